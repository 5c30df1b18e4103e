// The qemu driver's volume swap with QEMU replaced by a fake monitor that records commands and
// emits the block job's events as QEMU 7.2 does (READY after blockdev-mirror, COMPLETED after
// job-complete, CANCELLED after block-job-cancel): the copy onto the new volume under temporary
// names, the old nodes removed and the slot's names restored by a second, empty mirror; a copy that
// fails cancelled with the new nodes removed and the definition unchanged; a stopped guest (the
// definition only) and a replay (nothing).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../../lib/logging/logger';
import type { QemuHost } from '../../../../virt-drivers/qemu/context';
import type { RbdVolumeDefinition, VmDefinition } from '../../../../virt-drivers/qemu/instance-files';
import type { Managed } from '../../../../virt-drivers/qemu/instances';
import { swapVolume, VolumeSwapError } from '../../../../virt-drivers/qemu/volume-swap';
import { rbdVolumeDefinition } from '../../../../virt-drivers/qemu/volumes';
import { RBD_SECRET_UUID } from '../../../helpers/cinder-rbd-connection-info';
import { rbdVolume } from '../../../helpers/rbd-volume';

const UUID = '9a1ce000-0000-4000-8000-0000000000a1';
const OLD = '0d1a4c4e-1111-4111-8111-111111111111';
const NEW = '0d1a4c4e-2222-4222-8222-222222222222';
const ref = { uuid: UUID, name: 'n' };

interface Ev { event: string; data: Record<string, unknown> }
interface Fake { host: QemuHost; m: Managed; calls: Array<[string, Record<string, unknown> | undefined]>; saved: number }

/** `mirror`: what the job does after blockdev-mirror (`ready`, or fails with an error event). */
function fake(dir: string, o: { running: boolean; volumes: RbdVolumeDefinition[]; mirror?: 'ready' | 'error' }): Fake {
  const calls: Fake['calls'] = [];
  const f = { calls, saved: 0 } as Fake;
  const waiting: Array<{ name: string; match?: (e: Ev) => boolean; resolve: (e: Ev) => void }> = [];
  const emit = (event: string, data: Record<string, unknown>): void => {
    setImmediate(() => {
      for (const w of waiting.splice(0)) {
        if (w.name === event && (!w.match || w.match({ event, data }))) w.resolve({ event, data });
        else waiting.push(w);
      }
    });
  };
  const vm = {
    alive: async () => o.running,
    execute: async (command: string, args?: Record<string, unknown>) => {
      calls.push([command, args]);
      if (command === 'blockdev-mirror') emit(o.mirror === 'error' ? 'BLOCK_JOB_COMPLETED' : 'BLOCK_JOB_READY', { device: args?.['job-id'], ...(o.mirror === 'error' ? { error: 'Input/output error' } : {}) });
      if (command === 'job-complete') emit('BLOCK_JOB_COMPLETED', { device: args?.id });
      if (command === 'block-job-cancel') emit('BLOCK_JOB_CANCELLED', { device: args?.device });
      return {};
    },
    qmp: async () => ({
      waitEvent: (name: string, w: { timeoutMs: number; match?: (e: Ev) => boolean }) => new Promise<Ev>((resolve) => waiting.push({ name, resolve, ...(w.match ? { match: w.match } : {}) })),
    }),
  };
  const def = { machine: 'q35', volumes: o.volumes } as unknown as VmDefinition;
  f.m = { rec: { uuid: UUID, vm: def }, paths: {}, ...(o.running ? { vm } : {}) } as unknown as Managed;
  f.host = {
    opts: { rbdSecretsDir: dir, qmpTimeoutMs: 1000 },
    log: silentLogger(),
    table: {
      active: new Map([[UUID, f.m]]),
      withLock: <T>(_u: string, fn: () => Promise<T>) => fn(),
      save: async (mm: Managed, patch: Partial<Managed['rec']>) => {
        f.saved++;
        mm.rec = { ...mm.rec, ...patch };
      },
    },
  } as unknown as QemuHost;
  return f;
}

describe('qemu volume swap', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vol-swap-'));
  beforeAll(() => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${RBD_SECRET_UUID}.base64`), 'AQBwS3hmAAAAABAAf0yR0Uq1Ek5RyqQKrJc0Ww==', { mode: 0o600 });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const old = (): RbdVolumeDefinition => ({ ...rbdVolumeDefinition(UUID, rbdVolume(OLD), 0), bootIndex: null });

  test('a running guest: the new rbd node under temporary names, mirrored into, the job completed, the old nodes gone, the slot’s names back; recorded', async () => {
    const f = fake(dir, { running: true, volumes: [old()] });
    await swapVolume(f.host, ref, OLD, rbdVolume(NEW));
    const next = rbdVolumeDefinition(UUID, rbdVolume(NEW), 0);
    const args = (from: number, to: number): unknown[] => f.calls.slice(from, to).map(([, x]) => x);
    expect(f.calls.map(([c]) => c)).toEqual([
      ...['object-add', 'blockdev-add', 'blockdev-add', 'blockdev-mirror', 'job-complete'],
      ...['blockdev-del', 'blockdev-del', 'object-del'],
      ...['object-add', 'blockdev-add', 'blockdev-add', 'blockdev-mirror', 'job-complete'],
      ...['blockdev-del', 'blockdev-del', 'object-del'],
    ]);
    expect(f.calls[0]?.[1]).toMatchObject({ 'qom-type': 'secret', id: 'vol0-swap-secret' });
    expect(f.calls[1]?.[1]).toMatchObject({ driver: 'rbd', 'node-name': 'vol0-swap-storage', 'key-secret': 'vol0-swap-secret', image: next.image });
    expect(f.calls[2]?.[1]).toMatchObject({ driver: 'raw', 'node-name': 'vol0-swap-format', file: 'vol0-swap-storage' });
    // QEMU mirrors root nodes only: the raw node the device uses.
    expect(args(3, 5)).toEqual([{ 'job-id': 'vol0-swap', device: 'vol0-format', target: 'vol0-swap-format', sync: 'full' }, { id: 'vol0-swap' }]);
    expect(args(5, 8)).toEqual([{ 'node-name': 'vol0-format' }, { 'node-name': 'vol0-storage' }, { id: 'vol0-secret' }]);
    expect(f.calls[8]?.[1]).toMatchObject({ 'qom-type': 'secret', id: 'vol0-secret' });
    expect(f.calls[9]?.[1]).toMatchObject({ driver: 'rbd', 'node-name': 'vol0-storage', 'key-secret': 'vol0-secret', image: next.image });
    expect(f.calls[10]?.[1]).toMatchObject({ driver: 'raw', 'node-name': 'vol0-format', file: 'vol0-storage' });
    expect(args(11, 13)).toEqual([{ 'job-id': 'vol0-swap', device: 'vol0-swap-format', target: 'vol0-format', sync: 'none' }, { id: 'vol0-swap' }]);
    expect(args(13, 16)).toEqual([{ 'node-name': 'vol0-swap-format' }, { 'node-name': 'vol0-swap-storage' }, { id: 'vol0-swap-secret' }]);
    expect(f.m.rec.vm.volumes?.map((v) => [v.volumeId, v.slot, v.image])).toEqual([[NEW, 0, next.image]]);
    // A replay: the guest is on the new volume already.
    await swapVolume(f.host, ref, OLD, rbdVolume(NEW));
    expect(f.calls).toHaveLength(16);
  });

  test('a copy that fails: the job cancelled, the new node and secret removed, the definition unchanged, the guest on the old disk', async () => {
    const f = fake(dir, { running: true, volumes: [old()], mirror: 'error' });
    const err = await swapVolume(f.host, ref, OLD, rbdVolume(NEW)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeSwapError);
    expect((err as Error).message).toMatch(/failed at BLOCK_JOB_READY: the copy failed: Input\/output error; the guest keeps/);
    expect(f.calls.map(([c]) => c)).toEqual(['object-add', 'blockdev-add', 'blockdev-add', 'blockdev-mirror', 'block-job-cancel', 'blockdev-del', 'blockdev-del', 'object-del']);
    expect(f.calls.slice(5).map(([, a]) => a)).toEqual([{ 'node-name': 'vol0-swap-format' }, { 'node-name': 'vol0-swap-storage' }, { id: 'vol0-swap-secret' }]);
    expect(f.saved).toBe(0);
    expect(f.m.rec.vm.volumes?.map((v) => v.volumeId)).toEqual([OLD]);
  });

  test('a stopped guest only gets the new definition; a volume it does not have is refused', async () => {
    const f = fake(dir, { running: false, volumes: [old()] });
    await swapVolume(f.host, ref, OLD, rbdVolume(NEW));
    expect(f.calls).toEqual([]);
    expect(f.m.rec.vm.volumes?.map((v) => [v.volumeId, v.slot])).toEqual([[NEW, 0]]);
    await expect(swapVolume(f.host, ref, '0d1a4c4e-3333-4333-8333-333333333333', rbdVolume('0d1a4c4e-4444-4444-8444-444444444444'))).rejects.toThrow(/has no volume/);
  });
});
