/**
 * The volume steps of the compute flows, as nova-compute takes them (`_prep_block_device`,
 * `virt/block_device.py`, `_shutdown_instance`, `_cleanup_volumes`):
 *
 * - `prepare` (a build's `block_device_mapping` task state): each volume mapping, boot devices
 *   first, gets a device name, a volume (created by the host from an image, a snapshot or nothing,
 *   and waited for until `available`), an attachment (nova-api's, or one the host makes), this
 *   host's connector on it, the connection info saved where nova keeps it, and `os-complete`.
 * - `attached`: the volumes the driver gives the guest.
 * - `release` (delete, a failed build): every attachment deleted, then the volumes marked
 *   `delete_on_termination`.
 *
 * Every step is recorded in the instance's journal record before the next one (the mappings as
 * they fill in, then each connected volume), so a build resumed after a crash finds the volume it
 * created and the attachment it made instead of making a second one. It is not: the Cinder client
 * (`agent/volume/`) or the guest side (the driver gets `AttachedVolume`s in its spec).
 */
import type { Clock } from '../../lib/clock';
import type { AttachedVolume } from '../../virt-drivers/types';
import { nextDeviceName, volumeMappings, type BlockDevice } from '../../model/block-device';
import type { InstanceRecord } from '../../model/instance';
import type { CinderApi, VolumeConnector } from '../volume/cinder-api';
import { VolumeSetupError } from '../volume/errors';
import type { CinderClients } from '../volume/factory';
import type { AttachmentDeletes } from './attachment-deletes';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';
import { connectAttachment, deleteFreedVolume } from './volume-connect';
import { errorText } from '../../lib/error-text';

export interface VolumeFlowOptions {
  readonly cinder: CinderClients;
  /** Attachment deletes Cinder did not take, retried in the background (`attachment-deletes.ts`). */
  readonly owed: AttachmentDeletes;
  /** This host's connector (os-brick's properties for RBD): `host` is `[DEFAULT] host`. */
  readonly connector: VolumeConnector;
  /** `[DEFAULT] block_device_allocate_retries` and `_interval` (s). */
  readonly allocateRetries: number;
  readonly allocateIntervalS: number;
  readonly clock: Clock;
}

// Defined with the connect step (`volume-connect.ts`); exported here as well for the volume flows' other users.
export { novaConnectionInfo } from './volume-connect';

export class VolumeFlows {
  constructor(
    private readonly c: Pick<FlowContext, 'save' | 'log' | 'controlPlane' | 'now'>,
    private readonly o: VolumeFlowOptions,
  ) {}

  /** Whether the build has volume mappings to prepare. */
  static needed(bdms: readonly BlockDevice[] | undefined): boolean {
    return (bdms ?? []).some((b) => b.destination_type === 'volume');
  }

  /**
   * Connects every volume mapping of the build (`bdms` on the first call; the recorded ones when
   * resumed). @throws VolumeSetupError naming the volume; the record keeps what was made, for `release`
   */
  async prepare(rec: InstanceRecord, bdms: readonly BlockDevice[], ctx: RequestContext): Promise<void> {
    rec.block_devices ??= nameDevices(volumeMappings(bdms));
    rec.volumes ??= [];
    await this.c.save(rec);
    if (rec.block_devices.length === 0) return;
    if (!this.o.cinder.configured) throw new VolumeSetupError(rec.block_devices[0]?.volume_id ?? 'to be created', 'this host has no Cinder: set [placement] keystone credentials (block-storage in the catalog) or [cinder] endpoint_override');
    const cinder = this.o.cinder.forRequest(ctx);
    for (let k = 0; k < rec.block_devices.length; k++) {
      const b = rec.block_devices[k] as BlockDevice;
      if (b.volume_id && rec.volumes.some((v) => v.volume_id === b.volume_id)) continue;
      await this.connect(rec, k, cinder, ctx);
    }
  }

  private async connect(rec: InstanceRecord, k: number, cinder: CinderApi, ctx: RequestContext): Promise<void> {
    const devices = rec.block_devices as BlockDevice[];
    const update = async (patch: Partial<BlockDevice>): Promise<BlockDevice> => {
      devices[k] = { ...(devices[k] as BlockDevice), ...patch };
      await this.c.save(rec);
      return devices[k];
    };
    let b = devices[k] as BlockDevice;
    const what = b.volume_id ?? `from ${b.source_type}${b.image_id ? ` ${b.image_id}` : ''}`;
    try {
      if (!b.volume_id) {
        const made = await cinder.createVolume({
          size: b.volume_size ?? 0,
          name: b.source_type === 'blank' ? `${rec.uuid}-blank-vol` : '',
          ...(b.image_id && b.source_type === 'image' ? { imageRef: b.image_id } : {}),
          ...(b.snapshot_id ? { snapshot_id: b.snapshot_id } : {}),
          ...(b.volume_type ? { volume_type: b.volume_type } : {}),
        });
        b = await update({ volume_id: made.id });
        if (b.id !== null) await this.c.controlPlane.blockDevice(rec.uuid, b.id, { volume_id: made.id }, ctx);
      }
      const volumeId = b.volume_id as string;
      await this.waitAvailable(cinder, volumeId, b.attachment_id !== null);
      if (!b.attachment_id) b = await update({ attachment_id: (await cinder.createAttachment(volumeId, rec.uuid, null, 'rw')).id });
      const attachmentId = b.attachment_id as string;
      const device = b.device_name as string;
      const attached = await connectAttachment(cinder, this.o.connector, { ...b, volume_id: volumeId, attachment_id: attachmentId, device_name: device });
      const info = attached.connection_info;
      (rec.volumes ??= []).push(attached);
      await this.c.save(rec);
      if (b.id !== null) await this.c.controlPlane.blockDevice(rec.uuid, b.id, { attachment_id: attachmentId, device_name: device, connection_info: JSON.stringify(info) }, ctx);
      await cinder.completeAttachment(attachmentId);
      this.c.log.info({ instance: rec.uuid, volume: volumeId, attachment: attachmentId, device, type: info.driver_volume_type }, 'volume connected');
    } catch (e) {
      if (e instanceof VolumeSetupError) throw e;
      throw new VolumeSetupError(b.volume_id ?? what, e instanceof Error ? e.message : String(e), { cause: e });
    }
  }

  /**
   * Waits until a volume is usable: `available` (or `reserved`/`attaching` when nova-api reserved it
   * with an attachment), as nova's `_await_block_device_map_created` does.
   * @throws VolumeSetupError when it went to error or did not settle within the retries
   */
  private async waitAvailable(cinder: CinderApi, id: string, reserved: boolean): Promise<void> {
    const ok = reserved ? ['available', 'reserved', 'attaching', 'in-use'] : ['available'];
    const tries = Math.max(1, this.o.allocateRetries + 1);
    let status = 'unknown';
    for (let n = 0; n < tries; n++) {
      status = (await cinder.getVolume(id)).status;
      if (ok.includes(status)) return;
      if (status === 'error' || status === 'error_restoring') throw new VolumeSetupError(id, `Cinder put the volume in ${status} (look at cinder-volume's log)`);
      if (n + 1 < tries) await this.o.clock.sleep(this.o.allocateIntervalS * 1000);
    }
    throw new VolumeSetupError(id, `still ${status} after ${tries} looks ${this.o.allocateIntervalS} s apart ([DEFAULT] block_device_allocate_retries)`);
  }

  /**
   * Disconnects the instance's volumes from this host while keeping them reserved for it, as
   * nova's `_terminate_volume_connections` does for an offload and a failed unshelve. Cinder cannot
   * disconnect an attachment, so each volume gets a new attachment without a connector, nova's
   * mapping moves to it, and the old one is deleted (owed when Cinder does not take it now). Call
   * once the guest is gone. @throws what Cinder threw for a new attachment; the volumes done so
   * far are recorded, a replay goes on with the others
   */
  async keepReservedOnly(rec: InstanceRecord, ctx: RequestContext): Promise<void> {
    const connected = rec.volumes ?? [];
    if (connected.length === 0) return;
    const cinder = this.o.cinder.forRequest(ctx);
    for (const v of connected) {
      const reserved = await cinder.createAttachment(v.volume_id, rec.uuid, null, 'rw');
      rec.volumes = (rec.volumes ?? []).filter((x) => x.volume_id !== v.volume_id);
      rec.block_devices = (rec.block_devices ?? []).map((b) => (b.volume_id === v.volume_id ? { ...b, attachment_id: reserved.id } : b));
      await this.c.save(rec);
      if (v.bdm_id !== null) await this.c.controlPlane.blockDevice(rec.uuid, v.bdm_id, { attachment_id: reserved.id }, ctx);
      if (!(await this.o.owed.remove(v.attachment_id, v.volume_id, rec.uuid, this.c.now()))) this.c.log.warn({ instance: rec.uuid, volume: v.volume_id, attachment: v.attachment_id }, 'Cinder did not delete the old attachment; the host deletes it once Cinder answers');
      this.c.log.info({ instance: rec.uuid, volume: v.volume_id, attachment: reserved.id }, 'volume disconnected from this host, kept reserved for the instance');
    }
  }

  /** The guest's volumes, for the driver's spec. */
  attached(rec: InstanceRecord): AttachedVolume[] {
    return (rec.volumes ?? []).map((v) => ({ volume_id: v.volume_id, device_name: v.device_name, boot_index: v.boot_index, connection_info: v.connection_info }));
  }

  /**
   * Gives everything back after the guest is gone: each attachment deleted (a missing one is
   * gone already), then the volumes marked `delete_on_termination` (those this build made
   * included, on a failed build). Errors are logged, not thrown, as nova's `_shutdown_instance`
   * and `_cleanup_volumes` do: the delete goes on, and an operator sees what stayed behind.
   */
  async release(rec: InstanceRecord | undefined, ctx: RequestContext): Promise<void> {
    const devices = rec?.block_devices ?? [];
    if (!rec || devices.length === 0) return;
    if (!this.o.cinder.configured) return;
    const cinder = this.o.cinder.forRequest(ctx);
    // An attachment delete Cinder does not take now is owed, its delete_on_termination volume
    // with it: both happen in the background once Cinder answers (`attachment-deletes.ts`).
    const owed = new Set<string>();
    for (const b of devices) {
      if (!b.attachment_id || (await this.o.owed.remove(b.attachment_id, b.volume_id ?? '', rec.uuid, this.c.now()))) continue;
      owed.add(b.attachment_id);
      if (b.delete_on_termination && b.volume_id) await this.o.owed.thenDeleteVolume(b.attachment_id);
      this.warn(rec.uuid, b, 'Cinder did not delete the attachment; the host deletes it (and a delete_on_termination volume) once Cinder answers', undefined);
    }
    for (const b of devices) {
      if (!b.volume_id || !b.delete_on_termination || (b.attachment_id && owed.has(b.attachment_id))) continue;
      await this.deleteVolume(cinder, b.volume_id).catch((e: unknown) => this.warn(rec.uuid, b, 'could not delete the volume (delete_on_termination)', e));
    }
    rec.volumes = [];
  }

  /** A volume just detached may be `detaching` for a moment: Cinder refuses its delete until it is `available`. */
  private async deleteVolume(cinder: CinderApi, id: string): Promise<void> {
    for (let n = 0; (await deleteFreedVolume(cinder, id, n >= 10)) === 'in-use'; n++) await this.o.clock.sleep(1000);
  }

  private warn(uuid: string, b: BlockDevice, what: string, e: unknown): void {
    const why = e === undefined ? {} : { reason: errorText(e) };
    this.c.log.warn({ instance: uuid, volume: b.volume_id, attachment: b.attachment_id, ...why }, what);
  }
}

/**
 * Device names for the mappings that have none: the boot volume `/dev/vda`, the others the next
 * free `vdX`, past the names in `alsoTaken` (a local root disk's).
 */
export function nameDevices(bdms: readonly BlockDevice[], alsoTaken: readonly string[] = []): BlockDevice[] {
  const taken = new Set([...alsoTaken, ...bdms.map((b) => b.device_name).filter((n): n is string => !!n)]);
  return bdms.map((b) => {
    if (b.device_name) return b;
    const name = nextDeviceName(taken);
    taken.add(name);
    return { ...b, device_name: name };
  });
}
