// Volume hot plug over QMP with QEMU replaced by a fake that records commands: the attach sequence
// (secret, rbd node, raw node, device) and its undo when a step fails, detach waiting for
// DEVICE_DELETED (and leaving everything as it was when the guest never answers), extend's
// block_resize, stopped instances (definition only), idempotence and old definitions. The unplug
// against a monitor that keeps QEMU's state is volume-unplug.test.ts.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../../lib/logging/logger';
import { DriverError } from '../../../../virt-drivers/errors';
import type { QemuHost } from '../../../../virt-drivers/qemu/context';
import { QmpCommandError, QmpTimeoutError, VolumeReleaseTimeoutError } from '../../../../virt-drivers/qemu/errors';
import type { RbdVolumeDefinition, VmDefinition } from '../../../../virt-drivers/qemu/instance-files';
import type { Managed } from '../../../../virt-drivers/qemu/instances';
import { attachVolume, detachVolume, extendVolume } from '../../../../virt-drivers/qemu/volume-hotplug';
import { rbdVolumeDefinition } from '../../../../virt-drivers/qemu/volumes';
import { RBD_SECRET_UUID } from '../../../helpers/cinder-rbd-connection-info';
import { rbdVolume } from '../../../helpers/rbd-volume';

const UUID = '9a1ce000-0000-4000-8000-0000000000a1';
const VOL = '0d1a4c4e-2222-4222-8222-222222222222';
const SECRET = RBD_SECRET_UUID;
const ref = { uuid: UUID, name: 'n' };

interface Fake { host: QemuHost; m: Managed; calls: Array<[string, unknown]>; saved: number }

function fake(dir: string, opts: { running: boolean; volumes?: RbdVolumeDefinition[]; fail?: string; ack?: boolean; machine?: string }): Fake {
  const calls: Array<[string, unknown]> = [];
  const f = { calls, saved: 0 } as Fake;
  const vm = {
    alive: async () => opts.running,
    execute: async (command: string, args?: unknown) => {
      calls.push([command, args]);
      if (command === opts.fail) throw new QmpCommandError(command, 'GenericError', 'refused');
      return {};
    },
    qmp: async () => ({
      waitEvent: (_name: string, o: { timeoutMs: number }) => (opts.ack === false ? new Promise((_, reject) => setTimeout(() => reject(new QmpTimeoutError('event DEVICE_DELETED', o.timeoutMs)), o.timeoutMs)) : Promise.resolve({ event: 'DEVICE_DELETED', data: {} })),
    }),
  };
  const def = { machine: opts.machine ?? 'q35', ...(opts.volumes ? { volumes: opts.volumes } : {}) } as unknown as VmDefinition;
  const m = { rec: { uuid: UUID, vm: def }, paths: {}, ...(opts.running ? { vm } : {}) } as unknown as Managed;
  f.m = m;
  f.host = {
    opts: { rbdSecretsDir: dir, deviceDetach: { attempts: 1, timeoutMs: 20_000 } },
    log: silentLogger(),
    table: {
      active: new Map([[UUID, m]]),
      withLock: <T>(_u: string, fn: () => Promise<T>) => fn(),
      save: async (mm: Managed, patch: Partial<Managed['rec']>) => {
        f.saved++;
        mm.rec = { ...mm.rec, ...patch };
      },
    },
  } as unknown as QemuHost;
  return f;
}

describe('qemu volume hot plug', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vol-hp-'));
  beforeAll(() => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${SECRET}.base64`), 'AQBwS3hmAAAAABAAf0yR0Uq1Ek5RyqQKrJc0Ww==', { mode: 0o600 });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const existing = (): RbdVolumeDefinition => rbdVolumeDefinition(UUID, rbdVolume('0d1a4c4e-1111-4111-8111-111111111111'), 0);

  test('attach to a running q35 guest: secret, rbd and raw nodes, device on the free slot root port; recorded', async () => {
    const f = fake(dir, { running: true, volumes: [existing()] });
    await attachVolume(f.host, ref, rbdVolume(VOL));
    expect(f.calls.map(([c]) => c)).toEqual(['object-add', 'blockdev-add', 'blockdev-add', 'device_add']);
    expect(f.calls[0]?.[1]).toEqual({ 'qom-type': 'secret', id: 'vol1-secret', file: join(dir, `${SECRET}.base64`), format: 'base64' });
    expect(f.calls[1]?.[1]).toMatchObject({ driver: 'rbd', 'node-name': 'vol1-storage', 'key-secret': 'vol1-secret' });
    expect(f.calls[2]?.[1]).toMatchObject({ driver: 'raw', 'node-name': 'vol1-format' });
    expect(f.calls[3]?.[1]).toEqual({ driver: 'virtio-blk-pci', drive: 'vol1-format', id: 'virtio-vol1', serial: VOL, bus: 'volport1' });
    expect(f.m.rec.vm.volumes?.map((v) => [v.volumeId, v.slot])).toEqual([[existing().volumeId, 0], [VOL, 1]]);
    // Again: nothing more.
    await attachVolume(f.host, ref, rbdVolume(VOL));
    expect(f.calls).toHaveLength(4);
  });

  test('pc machine: the device at its pci.0 address', async () => {
    const f = fake(dir, { running: true, volumes: [], machine: 'pc' });
    await attachVolume(f.host, ref, rbdVolume(VOL));
    expect(f.calls[3]?.[1]).toMatchObject({ bus: 'pci.0', addr: '0x8' });
  });

  test.each([
    ['device_add', ['blockdev-del', 'blockdev-del', 'object-del'], /device_add/],
    ['blockdev-add', ['object-del'], /blockdev-add \(rbd\)/],
  ])('a refused %s undoes what was added and records nothing', async (fail, undo, step) => {
    const f = fake(dir, { running: true, volumes: [], fail });
    const err = await attachVolume(f.host, ref, rbdVolume(VOL)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DriverError);
    expect((err as Error).message).toMatch(step);
    const after = f.calls.slice(f.calls.findIndex(([c]) => c === fail) + 1).map(([c]) => c);
    expect(after).toEqual(undo);
    expect(f.saved).toBe(0);
    expect(f.m.rec.vm.volumes).toEqual([]);
  });

  test('a definition without volume slots is refused; a stopped instance only records', async () => {
    const old = fake(dir, { running: true });
    await expect(attachVolume(old.host, ref, rbdVolume(VOL))).rejects.toThrow(/before volume support/);
    expect(old.calls).toEqual([]);
    const stopped = fake(dir, { running: false, volumes: [] });
    await attachVolume(stopped.host, ref, rbdVolume(VOL));
    expect(stopped.m.rec.vm.volumes?.map((v) => v.volumeId)).toEqual([VOL]);
  });

  test('detach: device_del, then the nodes and secret; dropped from the definition; idempotent', async () => {
    const f = fake(dir, { running: true, volumes: [rbdVolumeDefinition(UUID, rbdVolume(VOL), 3)] });
    await detachVolume(f.host, ref, VOL);
    expect(f.calls).toEqual([
      ['device_del', { id: 'virtio-vol3' }],
      ['blockdev-del', { 'node-name': 'vol3-format' }],
      ['blockdev-del', { 'node-name': 'vol3-storage' }],
      ['object-del', { id: 'vol3-secret' }],
    ]);
    expect(f.m.rec.vm.volumes).toEqual([]);
    await detachVolume(f.host, ref, VOL);
    expect(f.calls).toHaveLength(4);
  });

  test('detach a guest never acknowledges: VolumeReleaseTimeoutError, nodes and definition kept', async () => {
    const f = fake(dir, { running: true, volumes: [rbdVolumeDefinition(UUID, rbdVolume(VOL), 0)], ack: false });
    const err = detachVolume(f.host, ref, VOL, { attempts: 1, timeoutMs: 50 });
    await expect(err).rejects.toBeInstanceOf(VolumeReleaseTimeoutError);
    await expect(err).rejects.toThrow(/did not release volume .* it stays attached/);
    expect(f.calls.map(([c]) => c)).toEqual(['device_del']);
    expect(f.saved).toBe(0);
    expect(f.m.rec.vm.volumes).toHaveLength(1);
  });

  test('extend: block_resize on the format node when running, nothing when stopped, DriverError for an unknown volume', async () => {
    const f = fake(dir, { running: true, volumes: [rbdVolumeDefinition(UUID, rbdVolume(VOL), 2)] });
    await extendVolume(f.host, ref, VOL, 2 * 1024 ** 3);
    expect(f.calls).toEqual([['block_resize', { 'node-name': 'vol2-format', size: 2 * 1024 ** 3 }]]);
    await expect(extendVolume(f.host, ref, 'other', 1024)).rejects.toThrow(DriverError);
    const stopped = fake(dir, { running: false, volumes: [rbdVolumeDefinition(UUID, rbdVolume(VOL), 2)] });
    await extendVolume(stopped.host, ref, VOL, 1024);
    expect(stopped.calls).toEqual([]);
  });
});
