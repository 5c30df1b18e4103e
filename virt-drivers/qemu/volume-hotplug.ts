/**
 * Hot plug of Cinder RBD volumes into a running guest over QMP, and the stored definition kept in
 * step so that a restart or live migration brings the same disks back.
 *
 * Attach: `object-add` the slot's secret (QEMU reads the key file itself, the key never passes
 * through the agent), `blockdev-add` the rbd protocol node and the raw format node (the same
 * properties as the command line, from `cmdline.ts`), `device_add` the virtio-blk device on the
 * slot's root port (q35) or pci.0 address (pc); any failure removes what was added, and a
 * definition that cannot be saved takes the plugged disk out again the way a detach does. Detach:
 * `device_del`, the guest's `DEVICE_DELETED` (asked again, `device-release.ts`), then the nodes and
 * the secret (QEMU refuses to delete a node a device still uses); a guest that does not release the
 * disk through every request keeps it, and so does the definition. Extend: `block_resize`.
 *
 * It is not: the mapping and validation of connection_info (`volumes.ts`), the key files
 * (`rbd-secrets.ts`), the boot-time command line (`cmdline.ts`), Cinder or os-brick work.
 */
import { DriverError } from '../errors';
import type { AttachedVolume, InstanceRef } from '../types';
import { volumeBlockdevs, volumeDevice, volumeIds } from './cmdline';
import type { QemuHost } from './context';
import { QmpCommandError, VolumeAttachUndoError, VolumeReleaseTimeoutError, VolumeUnplugError } from './errors';
import type { RbdVolumeDefinition } from './instance-files';
import type { Managed } from './instances';
import { settledInstance } from './lifecycle';
import { DeviceNotReleasedError, releaseDevice, type DetachPolicy } from './device-release';
import { checkRbdSecrets } from './rbd-secrets';
import { rbdSecretFile, rbdVolumeDefinition, VOLUME_SLOTS } from './volumes';

/** A hot-plug step QEMU refused; what was added before it has been removed again. */
export class VolumeHotplugError extends DriverError {
  constructor(instance: string, volumeId: string, step: string, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`instance ${instance}: attaching volume ${volumeId} failed at ${step} (${why}); nothing of it is left in QEMU`, { cause });
  }
}

/** Whether the instance's QEMU runs. */
async function running(m: Managed): Promise<boolean> {
  return m.vm !== undefined && (await m.vm.alive());
}

/** The lowest slot no volume of `volumes` uses. @throws DriverError when all are taken */
function freeSlot(uuid: string, volumes: readonly RbdVolumeDefinition[]): number {
  for (let slot = 0; slot < VOLUME_SLOTS; slot++) if (!volumes.some((v) => v.slot === slot)) return slot;
  throw new DriverError(`instance ${uuid} has ${VOLUME_SLOTS} volumes already; no slot for another`);
}

/** Removal commands of an undo or a detach: errors are QEMU's (the object is gone already) or fatal. */
async function quietly(m: Managed, command: string, args: Record<string, unknown>): Promise<void> {
  await m.vm!.execute(command, args).catch((e: unknown) => {
    if (!(e instanceof QmpCommandError)) throw e;
  });
}

/** Adds the secret, nodes and device of `vol` to the running QEMU of `m`, all or nothing. */
async function plugVolume(host: QemuHost, m: Managed, uuid: string, vol: RbdVolumeDefinition): Promise<void> {
  const vm = m.vm!;
  const ids = volumeIds(vol.slot);
  const undo: Array<[string, Record<string, unknown>]> = [];
  const step = async (name: string, command: string, args: Record<string, unknown>, remove?: [string, Record<string, unknown>]): Promise<void> => {
    try {
      await vm.execute(command, args);
    } catch (e) {
      for (const [c, a] of undo.reverse()) await quietly(m, c, a);
      throw new VolumeHotplugError(uuid, vol.volumeId, name, e);
    }
    if (remove) undo.push(remove);
  };
  if (vol.secretUuid !== null) {
    await step('object-add (secret)', 'object-add', { 'qom-type': 'secret', id: ids.secret, file: rbdSecretFile(host.opts.rbdSecretsDir, vol.secretUuid), format: 'base64' }, ['object-del', { id: ids.secret }]);
  }
  const [storage, format] = volumeBlockdevs(vol);
  await step('blockdev-add (rbd)', 'blockdev-add', storage, ['blockdev-del', { 'node-name': ids.storage }]);
  await step('blockdev-add (raw)', 'blockdev-add', format, ['blockdev-del', { 'node-name': ids.format }]);
  // No bootindex: a hot-plugged volume is a data disk (nova gives boot volumes at spawn only).
  await step('device_add', 'device_add', volumeDevice(m.rec.vm.machine, vol, undefined));
}

/**
 * `VirtDriver.attachVolume`. `release` bounds the wait for the guest when a definition
 * that cannot be saved makes it take the disk out again.
 * @throws VolumeHotplugError (nothing is left), the save's error (the disk was taken out again),
 * VolumeAttachUndoError (the disk stays in the guest, unrecorded)
 */
export async function attachVolume(host: QemuHost, ref: InstanceRef, volume: AttachedVolume, release: DetachPolicy = host.opts.deviceDetach): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'attach a volume');
    const volumes = m.rec.vm.volumes;
    // Without a volume list a q35 guest has no volport root ports to plug into.
    if (volumes === undefined) throw new DriverError(`instance ${ref.uuid} was created before volume support (no volume slots in its definition); cold-migrate or rebuild it to attach volumes`);
    if (volumes.some((v) => v.volumeId === volume.volume_id)) return;
    const vol = { ...rbdVolumeDefinition(ref.uuid, volume, freeSlot(ref.uuid, volumes)), bootIndex: null };
    await checkRbdSecrets(ref.uuid, host.opts.rbdSecretsDir, [vol]);
    const hot = await running(m);
    if (hot) await plugVolume(host, m, ref.uuid, vol);
    try {
      await host.table.save(m, { vm: { ...m.rec.vm, volumes: [...volumes, vol] } });
    } catch (e) {
      // Not recorded: take it out of QEMU again so that the definition stays the truth.
      if (hot) await unplugUnrecorded(host, m, ref.uuid, vol, release, e);
      throw e;
    }
    host.log.info({ instance: ref.uuid, volume: vol.volumeId, slot: vol.slot, hot }, 'volume attached');
  });
}

/**
 * Takes the device of `vol` out of the guest (`releaseDevice`: device_del and the guest's
 * DEVICE_DELETED, asked again as `policy` says). Detach and the undo of an unrecorded attach share it.
 * @throws VolumeUnplugError, VolumeReleaseTimeoutError
 */
async function unplugDevice(host: QemuHost, m: Managed, uuid: string, vol: RbdVolumeDefinition, policy: DetachPolicy): Promise<void> {
  const device = volumeIds(vol.slot).device;
  try {
    await releaseDevice(m.vm!, device, policy, (attempt) => host.log.info({ instance: uuid, volume: vol.volumeId, device, attempt }, 'the guest has not released the volume yet: asking again'));
  } catch (e) {
    if (e instanceof DeviceNotReleasedError) throw new VolumeReleaseTimeoutError(uuid, vol.volumeId, device, e.timeoutMs, { cause: e });
    throw new VolumeUnplugError(uuid, vol.volumeId, device, e);
  }
}

/** Removes the nodes and secret of `vol`, once no device uses them. */
async function removeNodes(m: Managed, vol: RbdVolumeDefinition): Promise<void> {
  const ids = volumeIds(vol.slot);
  await quietly(m, 'blockdev-del', { 'node-name': ids.format });
  await quietly(m, 'blockdev-del', { 'node-name': ids.storage });
  if (vol.secretUuid !== null) await quietly(m, 'object-del', { id: ids.secret });
}

/**
 * Takes `vol`, plugged but not recorded (`saveError`), out of QEMU again.
 * @throws VolumeAttachUndoError when the guest keeps it (its nodes stay: the device uses them)
 */
async function unplugUnrecorded(host: QemuHost, m: Managed, uuid: string, vol: RbdVolumeDefinition, policy: DetachPolicy, saveError: unknown): Promise<void> {
  const device = volumeIds(vol.slot).device;
  try {
    await unplugDevice(host, m, uuid, vol, policy);
  } catch (e) {
    const err = new VolumeAttachUndoError(uuid, vol.volumeId, device, saveError, e);
    host.log.error({ instance: uuid, volume: vol.volumeId, device, err: err.message }, 'volume plugged but not recorded, and the guest keeps it');
    throw err;
  }
  await removeNodes(m, vol);
  host.log.warn({ instance: uuid, volume: vol.volumeId, device, err: saveError instanceof Error ? saveError.message : String(saveError) }, 'volume unplugged again: its definition could not be saved');
}

/** `VirtDriver.detachVolume`. @throws VolumeUnplugError, VolumeReleaseTimeoutError (the volume stays attached) */
export async function detachVolume(host: QemuHost, ref: InstanceRef, volumeId: string, policy: DetachPolicy = host.opts.deviceDetach): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'detach a volume');
    const vol = m.rec.vm.volumes?.find((v) => v.volumeId === volumeId);
    if (vol === undefined) return;
    if (await running(m)) {
      await unplugDevice(host, m, ref.uuid, vol, policy);
      await removeNodes(m, vol);
    }
    await host.table.save(m, { vm: { ...m.rec.vm, volumes: (m.rec.vm.volumes ?? []).filter((v) => v.volumeId !== volumeId) } });
    host.log.info({ instance: ref.uuid, volume: volumeId, slot: vol.slot }, 'volume detached');
  });
}

/** `VirtDriver.extendVolume`. */
export async function extendVolume(host: QemuHost, ref: InstanceRef, volumeId: string, bytes: number): Promise<void> {
  if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new DriverError(`instance ${ref.uuid}: volume ${volumeId} cannot be extended to ${bytes} bytes (a positive integer)`);
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'extend a volume');
    const vol = m.rec.vm.volumes?.find((v) => v.volumeId === volumeId);
    if (vol === undefined) throw new DriverError(`instance ${ref.uuid} has no volume ${volumeId} attached; nothing to extend`);
    // Stopped: librbd reads the image's new size when QEMU next opens it.
    if (!(await running(m))) return;
    try {
      await m.vm!.execute('block_resize', { 'node-name': volumeIds(vol.slot).format, size: bytes });
    } catch (e) {
      throw new DriverError(`instance ${ref.uuid}: block_resize of volume ${volumeId} to ${bytes} bytes failed`, { cause: e });
    }
    host.log.info({ instance: ref.uuid, volume: volumeId, bytes }, 'volume extended');
  });
}
