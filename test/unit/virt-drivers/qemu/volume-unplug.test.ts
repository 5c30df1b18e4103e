// Taking a hot-plugged volume out of a guest, against a fake QMP monitor that keeps QEMU's state
// the way QEMU does: `device_del` only asks the guest, the device goes when the guest answers
// (DEVICE_DELETED, after the virtio backend's own event), and `blockdev-del` of a node a device
// still uses is refused. Covered: the undo of an attach whose definition cannot be saved (it waits
// for the guest before removing the nodes and the secret, and says so when the guest keeps the
// disk), and detach when QEMU refuses device_del, has no such device, or the guest never answers.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../../../lib/clock';
import { createLogger } from '../../../../lib/logging/logger';
import { loadConfig } from '../../../../config/loader';
import { DriverError } from '../../../../virt-drivers/errors';
import type { QemuHost } from '../../../../virt-drivers/qemu/context';
import { QmpCommandError, VolumeAttachUndoError, VolumeReleaseTimeoutError, VolumeUnplugError } from '../../../../virt-drivers/qemu/errors';
import { instancePaths, type RbdVolumeDefinition, type VmDefinition } from '../../../../virt-drivers/qemu/instance-files';
import type { Managed } from '../../../../virt-drivers/qemu/instances';
import { qemuOptionsFromConfig } from '../../../../virt-drivers/qemu/options';
import type { VmProcesses } from '../../../../virt-drivers/qemu/process';
import { QemuVm } from '../../../../virt-drivers/qemu/vm';
import { attachVolume, detachVolume } from '../../../../virt-drivers/qemu/volume-hotplug';
import { rbdVolumeDefinition } from '../../../../virt-drivers/qemu/volumes';
import { RBD_SECRET_UUID } from '../../../helpers/cinder-rbd-connection-info';
import { FakeQmpServer, type FakeQmpAnswer, type FakeQmpCommand } from '../../../helpers/fake-qmp';
import { rbdVolume } from '../../../helpers/rbd-volume';

const UUID = '9a1ce000-0000-4000-8000-0000000000b2';
const VOL = '0d1a4c4e-4444-4444-8444-444444444444';
const ref = { uuid: UUID, name: 'n' };

/** What the guest does with a device_del: let go shortly after, or never. */
type Guest = 'releases' | 'keeps';
const IN_PROGRESS = (id: string): { class: string; desc: string } => ({ class: 'GenericError', desc: `Device ${id} is already in the process of unplug` });

/** The part of QEMU's state hot plug changes, moved by the commands as QEMU moves it. */
class QemuState {
  readonly secrets = new Set<string>();
  readonly nodes = new Set<string>();
  /** Device id → the node it uses. */
  readonly devices = new Map<string, string>();
  guest: Guest = 'releases';
  /** device_del's answer when set (QEMU refusing the unplug). */
  deviceDelRefusal: { class: string; desc: string } | undefined;
  /** Requests the guest misses before it acts on one (a guest still booting). */
  missed = 0;
  /** How long after a request QEMU refuses another for the same device as "in progress" (ms; 0: never). */
  unplugWindowMs = 0;
  private readonly pendingSince = new Map<string, number>();

  constructor(private readonly server: FakeQmpServer) {}

  handle(cmd: FakeQmpCommand): FakeQmpAnswer {
    const a = cmd.arguments ?? {};
    switch (cmd.execute) {
      case 'object-add':
        this.secrets.add(String(a['id']));
        return { return: {} };
      case 'object-del':
        this.secrets.delete(String(a['id']));
        return { return: {} };
      case 'blockdev-add':
        this.nodes.add(String(a['node-name']));
        return { return: {} };
      case 'device_add':
        this.devices.set(String(a['id']), String(a['drive']));
        return { return: {} };
      case 'device_del':
        return this.deviceDel(String(a['id']));
      case 'blockdev-del':
        return this.blockdevDel(String(a['node-name']));
      default:
        return { error: { class: 'CommandNotFound', desc: `The command ${cmd.execute} has not been found` } };
    }
  }

  private deviceDel(id: string): FakeQmpAnswer {
    if (this.deviceDelRefusal) return { error: this.deviceDelRefusal };
    if (!this.devices.has(id)) return { error: { class: 'DeviceNotFound', desc: `Device '${id}' not found` } };
    const since = this.pendingSince.get(id);
    if (since !== undefined && Date.now() - since < this.unplugWindowMs) return { error: IN_PROGRESS(id) };
    this.pendingSince.set(id, Date.now());
    if (this.missed > 0) {
      this.missed--;
      return { return: {} };
    }
    if (this.guest === 'releases') {
      setTimeout(() => {
        this.devices.delete(id);
        // QEMU announces the virtio backend (no device id) before the device itself.
        this.server.event('DEVICE_DELETED', { path: `/machine/peripheral/${id}/virtio-backend` });
        this.server.event('DEVICE_DELETED', { device: id, path: `/machine/peripheral/${id}` });
      }, 30);
    }
    return { return: {} };
  }

  private blockdevDel(node: string): FakeQmpAnswer {
    // In use: the drive of a device, or the rbd node under a raw format node (`volN-format` on `volN-storage`).
    const busy = [...this.devices.values()].includes(node) || (node.endsWith('-storage') && this.nodes.has(node.replace(/-storage$/, '-format')));
    if (busy) return { error: { class: 'GenericError', desc: `Node '${node}' is busy: node is used as the drive of a device` } };
    if (!this.nodes.delete(node)) return { error: { class: 'GenericError', desc: `Failed to find node with node-name='${node}'` } };
    return { return: {} };
  }
}

interface Rig {
  readonly host: QemuHost;
  readonly m: Managed;
  readonly qemu: QemuState;
  /** The agent's log lines so far, parsed. */
  readonly logs: () => Array<Record<string, unknown>>;
  /** Commands the monitor received, without the handshake. */
  readonly sent: () => string[];
  /** When set, saving the definition fails with it. */
  readonly failSave: { error?: Error };
}

describe('qemu volume unplug (fake QMP monitor)', () => {
  let dir: string;
  let server: FakeQmpServer;
  let vm: QemuVm;

  async function rig(volumes: RbdVolumeDefinition[]): Promise<Rig> {
    dir = mkdtempSync(join(tmpdir(), 'vol-unplug-'));
    writeFileSync(join(dir, `${RBD_SECRET_UUID}.base64`), 'AQBwS3hmAAAAABAAf0yR0Uq1Ek5RyqQKrJc0Ww==', { mode: 0o600 });
    server = new FakeQmpServer(instancePaths(dir).qmp);
    await server.listen();
    const qemu = new QemuState(server);
    server.handler = (cmd) => qemu.handle(cmd);
    const { config } = loadConfig({ files: [], env: {}, defaultFile: '/nonexistent/compute-agent.conf' });
    const opts = { ...qemuOptionsFromConfig(config), rbdSecretsDir: dir };
    const lines: string[] = [];
    const log = createLogger({ sink: { write: (l) => void lines.push(l) } }).logger;
    const processes: VmProcesses = { launch: () => Promise.reject(new Error('not in this test')), inspect: async (pid) => ({ pid, startTicks: '1', argv: [] }), signal: () => undefined };
    vm = new QemuVm(UUID, instancePaths(dir), 4242, '1', { processes, clock: systemClock, logger: log, opts });
    const m = { rec: { uuid: UUID, vm: { machine: 'q35', volumes } as unknown as VmDefinition }, paths: instancePaths(dir), vm } as unknown as Managed;
    const failSave: { error?: Error } = {};
    const table = {
      active: new Map([[UUID, m]]),
      withLock: <T>(_u: string, fn: () => Promise<T>) => fn(),
      save: async (mm: Managed, patch: Partial<Managed['rec']>) => {
        if (failSave.error) throw failSave.error;
        mm.rec = { ...mm.rec, ...patch };
      },
    };
    return {
      host: { opts, log, table } as unknown as QemuHost,
      m,
      qemu,
      failSave,
      logs: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
      sent: () => server.received.map((c) => c.execute).filter((c) => c !== 'qmp_capabilities'),
    };
  }

  afterEach(async () => {
    vm.detach();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A volume plugged in slot `slot` of the rig's QEMU, as a successful attach leaves it. */
  function plugged(r: Rig, slot: number): RbdVolumeDefinition {
    const vol = rbdVolumeDefinition(UUID, rbdVolume(VOL), slot);
    r.qemu.secrets.add(`vol${slot}-secret`);
    r.qemu.nodes.add(`vol${slot}-storage`).add(`vol${slot}-format`);
    r.qemu.devices.set(`virtio-vol${slot}`, `vol${slot}-format`);
    return vol;
  }

  test('attach whose definition cannot be saved: waits for the guest, then removes the nodes and the secret; the save error comes back', async () => {
    const r = await rig([]);
    r.failSave.error = new Error('disk full');
    await expect(attachVolume(r.host, ref, rbdVolume(VOL))).rejects.toBe(r.failSave.error);
    expect(r.sent()).toEqual(['object-add', 'blockdev-add', 'blockdev-add', 'device_add', 'device_del', 'blockdev-del', 'blockdev-del', 'object-del']);
    // Nothing of it is left in QEMU, and nothing was recorded.
    expect([r.qemu.devices.size, r.qemu.nodes.size, r.qemu.secrets.size]).toEqual([0, 0, 0]);
    expect(r.m.rec.vm.volumes).toEqual([]);
    expect(r.logs().find((l) => l['level'] === 'warn')).toMatchObject({ instance: UUID, volume: VOL, device: 'virtio-vol0', err: 'disk full' });
  });

  test('attach whose definition cannot be saved, and the guest keeps the disk: VolumeAttachUndoError naming both, nodes left in place, logged', async () => {
    const r = await rig([]);
    r.failSave.error = new Error('disk full');
    r.qemu.guest = 'keeps';
    const err = await attachVolume(r.host, ref, rbdVolume(VOL), { attempts: 1, timeoutMs: 80 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeAttachUndoError);
    expect(err).toBeInstanceOf(DriverError);
    const undo = err as VolumeAttachUndoError;
    expect(undo.cause).toBe(r.failSave.error);
    expect(undo.undoError).toBeInstanceOf(VolumeReleaseTimeoutError);
    expect(undo.message).toMatch(new RegExp(`^instance ${UUID}: volume ${VOL} was plugged but its definition could not be saved \\(disk full\\), and unplugging it again failed \\(.*within 80 ms.*\\); device virtio-vol0 is in the guest`));
    // No blockdev-del against a node the device still uses.
    expect(r.sent()).toEqual(['object-add', 'blockdev-add', 'blockdev-add', 'device_add', 'device_del']);
    expect([...r.qemu.devices.keys(), ...r.qemu.nodes, ...r.qemu.secrets]).toEqual(['virtio-vol0', 'vol0-storage', 'vol0-format', 'vol0-secret']);
    expect(r.logs().find((l) => l['level'] === 'error')).toMatchObject({ instance: UUID, volume: VOL, device: 'virtio-vol0', err: undo.message });
  });

  test('detach: the nodes go only after the guest released the device (DEVICE_DELETED of the backend alone is not it)', async () => {
    const r = await rig([]);
    r.m.rec = { ...r.m.rec, vm: { ...r.m.rec.vm, volumes: [plugged(r, 2)] } };
    await detachVolume(r.host, ref, VOL);
    expect(r.sent()).toEqual(['device_del', 'blockdev-del', 'blockdev-del', 'object-del']);
    expect([r.qemu.devices.size, r.qemu.nodes.size, r.qemu.secrets.size]).toEqual([0, 0, 0]);
    expect(r.m.rec.vm.volumes).toEqual([]);
  });

  test('detach that QEMU refuses: VolumeUnplugError naming instance, volume and device, with QEMU’s error as cause; all kept', async () => {
    const r = await rig([]);
    r.m.rec = { ...r.m.rec, vm: { ...r.m.rec.vm, volumes: [plugged(r, 1)] } };
    r.qemu.deviceDelRefusal = { class: 'GenericError', desc: "Bus 'volport1' does not support hotplugging" };
    const err = await detachVolume(r.host, ref, VOL).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeUnplugError);
    expect(err).toBeInstanceOf(DriverError);
    expect((err as Error).message).toBe(`instance ${UUID}: unplugging volume ${VOL} (virtio-vol1) failed: qmp device_del: GenericError: Bus 'volport1' does not support hotplugging; it stays attached`);
    expect((err as Error).cause).toBeInstanceOf(QmpCommandError);
    expect(r.sent()).toEqual(['device_del']);
    expect(r.qemu.nodes.size).toBe(2);
    expect(r.m.rec.vm.volumes?.map((v) => v.volumeId)).toEqual([VOL]);
  });

  test('detach of a device QEMU no longer has (its DEVICE_DELETED came after an earlier timeout): the nodes go, the definition drops it', async () => {
    const r = await rig([]);
    const vol = plugged(r, 0);
    r.qemu.devices.clear();
    r.m.rec = { ...r.m.rec, vm: { ...r.m.rec.vm, volumes: [vol] } };
    await detachVolume(r.host, ref, VOL);
    expect(r.sent()).toEqual(['device_del', 'blockdev-del', 'blockdev-del', 'object-del']);
    expect([r.qemu.nodes.size, r.qemu.secrets.size]).toEqual([0, 0]);
    expect(r.m.rec.vm.volumes).toEqual([]);
  });

  test('detach the guest never answers: VolumeReleaseTimeoutError, nothing removed, still recorded', async () => {
    const r = await rig([]);
    r.m.rec = { ...r.m.rec, vm: { ...r.m.rec.vm, volumes: [plugged(r, 3)] } };
    r.qemu.guest = 'keeps';
    const err = await detachVolume(r.host, ref, VOL, { attempts: 1, timeoutMs: 60 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeReleaseTimeoutError);
    expect((err as Error).message).toBe(`instance ${UUID}: the guest did not release volume ${VOL} (virtio-vol3) within 60 ms of requests; it stays attached`);
    expect(r.sent()).toEqual(['device_del']);
    expect(r.qemu.devices.has('virtio-vol3')).toBe(true);
    expect(r.m.rec.vm.volumes).toHaveLength(1);
  });

  test('detach from a guest that misses the first requests (still booting): asked again until it lets go, as nova’s libvirt driver does; each retry logged', async () => {
    const r = await rig([]);
    r.m.rec = { ...r.m.rec, vm: { ...r.m.rec.vm, volumes: [plugged(r, 1)] } };
    r.qemu.missed = 2;
    await detachVolume(r.host, ref, VOL, { attempts: 4, timeoutMs: 60 });
    expect(r.sent()).toEqual(['device_del', 'device_del', 'device_del', 'blockdev-del', 'blockdev-del', 'object-del']);
    expect(r.m.rec.vm.volumes).toEqual([]);
    expect(r.logs().filter((l) => l['msg'] === 'the guest has not released the volume yet: asking again').map((l) => l['attempt'])).toEqual([2, 3]);
  });

  test('detach the guest keeps through every request, QEMU refusing some as "in progress": VolumeReleaseTimeoutError over all of them, nothing removed', async () => {
    const r = await rig([]);
    r.m.rec = { ...r.m.rec, vm: { ...r.m.rec.vm, volumes: [plugged(r, 2)] } };
    r.qemu.guest = 'keeps';
    r.qemu.unplugWindowMs = 100; // longer than one wait: the second request is refused, the third taken
    const err = await detachVolume(r.host, ref, VOL, { attempts: 3, timeoutMs: 60 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeReleaseTimeoutError);
    expect((err as Error).message).toMatch(/did not release volume .* within 180 ms of requests; it stays attached/);
    expect(server.received.filter((c) => c.execute === 'device_del')).toHaveLength(3);
    expect(r.qemu.devices.has('virtio-vol2')).toBe(true);
    expect(r.qemu.nodes.size).toBe(2);
    expect(r.m.rec.vm.volumes).toHaveLength(1);
  });
});
