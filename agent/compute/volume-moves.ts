/**
 * The volume steps of a move, as nova-compute takes them (`compute/manager.py`), so that only the
 * host that runs the guest holds a connected Cinder attachment:
 *
 * - cold migration and resize: the host giving the instance up (the source after its power off,
 *   the destination of a revert) replaces each attachment by one with no connector and deletes the
 *   old one (`_terminate_volume_connections`); the host taking it connects those with its own
 *   connector, records the connections (the driver's spec gives them to the guest), writes them
 *   into nova's mappings and completes them (`_update_volume_attachments`,
 *   `_complete_volume_attachments`).
 * - live migration: the destination makes a second attachment per volume with its own connector
 *   before the guest comes, keeping the source's ids (nova's `old_vol_attachment_ids`); once the
 *   guest runs there the source deletes its own and the destination completes the new ones and
 *   writes them into nova's mappings; a rollback deletes the new ones, the source's stay.
 *
 * The mappings travel from host to host in the move's messages (`bdms`). Every attachment made is
 * recorded in the instance's journal record before the next step, so a repeated step uses it
 * instead of making another. Volume disks are never copied: both hosts open the same volume.
 * It is not: the flows' order or their failure states (`resize.ts`, `live.ts`), or the Cinder client.
 */
import type { BlockDevice, VolumeAttachment } from '../../model/block-device';
import type { InstanceRecord, MigrationRecord } from '../../model/instance';
import type { CinderApi } from '../volume/cinder-api';
import { CinderNotFoundError } from '../volume/errors';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';
import { connectAttachment, connectorFor, volumeAttachment, type ConnectableDevice } from './volume-connect';
import type { VolumeFlowOptions } from './volume-flows';
import { errorText } from '../../lib/error-text';

/** A volume step of a move failed; the message names the volume and the step, `cause` keeps Cinder's error. */
export class VolumeMoveError extends Error {
  constructor(
    readonly volumeId: string,
    what: string,
    options?: { cause?: unknown },
  ) {
    super(`volume ${volumeId} ${what}`, options);
    this.name = 'VolumeMoveError';
  }
}

type VolumeDevice = BlockDevice & { readonly volume_id: string };
const isVolume = (b: BlockDevice): b is VolumeDevice => b.destination_type === 'volume' && !!b.volume_id;
export type VolumeMoveContext = Pick<FlowContext, 'host' | 'save' | 'log' | 'controlPlane'>;

export class VolumeMoves {
  constructor(
    private readonly c: VolumeMoveContext,
    private readonly o: Pick<VolumeFlowOptions, 'cinder' | 'connector'>,
  ) {}

  /** A move message's `bdms` argument: the instance's volume mappings; none (no argument) when it has no volume. */
  static bdmsArg(rec: InstanceRecord | undefined): { bdms?: BlockDevice[] } {
    const devices = (rec?.block_devices ?? []).filter(isVolume);
    return devices.length ? { bdms: devices } : {};
  }

  /**
   * A cold move's host giving the instance up, its guest gone (nova `_terminate_volume_connections`):
   * each volume's attachment is replaced by a new one with no connector, which keeps the volume
   * reserved for the instance while no host is connected; the new id is recorded (with the old one,
   * in the migration) and written into nova's mapping, then the old attachment is deleted, which
   * ends this host's connection, and the record's connection with it.
   * @throws VolumeMoveError; what was replaced stays recorded (`undoDisconnect` takes it back)
   */
  async disconnect(rec: InstanceRecord, ctx: RequestContext): Promise<void> {
    const devices = rec.block_devices ?? [];
    if (!devices.some(isVolume)) return;
    const replaced = (migrationOf(rec, devices).old_attachment_ids ??= {});
    const cinder = this.cinder(ctx, devices);
    for (let k = 0; k < devices.length; k++) {
      const b = devices[k] as BlockDevice;
      if (!isVolume(b)) continue;
      const volumeId = b.volume_id;
      if (!(volumeId in replaced)) {
        const made = await this.step(volumeId, `could not get an attachment without a connector from ${this.c.host}`, () => cinder.createAttachment(volumeId, rec.uuid, null, 'rw'));
        replaced[volumeId] = b.attachment_id;
        devices[k] = { ...b, attachment_id: made.id };
        await this.c.save(rec);
      }
      const now = devices[k] as VolumeDevice;
      if (now.id !== null) await this.c.controlPlane.blockDevice(rec.uuid, now.id, { attachment_id: now.attachment_id }, ctx);
      const old = replaced[volumeId];
      if (old) await this.step(volumeId, `could not have its attachment ${old} on ${this.c.host} deleted`, () => cinder.deleteAttachment(old));
      if (rec.volumes?.some((v) => v.volume_id === volumeId)) {
        rec.volumes = rec.volumes.filter((v) => v.volume_id !== volumeId);
        await this.c.save(rec);
      }
    }
  }

  /**
   * Takes back what `disconnect` did when the move fails on this host and the guest stays: a
   * volume whose old attachment still exists gets it back (the new one deleted); one whose old
   * attachment is gone is connected here again through the new one. Never throws: what could not
   * be taken back is logged, naming the attachment.
   */
  async undoDisconnect(rec: InstanceRecord, ctx: RequestContext): Promise<void> {
    const replaced = rec.migration?.old_attachment_ids;
    const devices = rec.block_devices ?? [];
    if (!replaced) return;
    for (let k = 0; k < devices.length; k++) {
      const b = devices[k] as BlockDevice;
      if (!isVolume(b) || !(b.volume_id in replaced)) continue;
      const old = replaced[b.volume_id] ?? null;
      try {
        const cinder = this.cinder(ctx, devices);
        const oldKept = old !== null && (await cinder.getAttachment(old).then(() => true, (e: unknown) => (e instanceof CinderNotFoundError ? false : Promise.reject(e))));
        if (oldKept) {
          // The record points at the kept attachment before the other is deleted: never at a deleted one.
          devices[k] = { ...b, attachment_id: old };
          await this.c.save(rec);
          if (b.id !== null) await this.c.controlPlane.blockDevice(rec.uuid, b.id, { attachment_id: old }, ctx);
          if (b.attachment_id) await cinder.deleteAttachment(b.attachment_id);
        } else {
          await this.connectDevice(rec, k, cinder);
          await this.publish(rec, b.volume_id, cinder, ctx);
        }
        delete replaced[b.volume_id];
        await this.c.save(rec);
      } catch (e) {
        this.c.log.error({ instance: rec.uuid, volume: b.volume_id, attachment: b.attachment_id, old_attachment: old, reason: errorText(e) }, 'could not give the volume its connection on this host back after a failed move; fix its attachments in Cinder');
      }
    }
  }

  /**
   * The host a cold move brings the instance to (the destination, or the source of a revert),
   * before its driver starts the guest: `bdms`, the mappings the other host sent, replace the
   * record's; each attachment not yet connected here gets this host's connector and its connection
   * is recorded (the driver's spec gives it to the guest); then each is written into nova's mapping
   * and completed (`os-complete`: the volume in-use).
   * @throws VolumeMoveError; the connections made stay recorded, so a repeat goes on from there
   */
  async connect(rec: InstanceRecord, ctx: RequestContext, bdms?: readonly BlockDevice[] | null): Promise<void> {
    if (bdms?.length) {
      rec.block_devices = bdms.map((b) => ({ ...b }));
      // A connection recorded for another attachment of a volume went with that attachment.
      rec.volumes = (rec.volumes ?? []).filter((v) => bdms.some((b) => b.volume_id === v.volume_id && b.attachment_id === v.attachment_id));
    }
    const devices = rec.block_devices ?? [];
    if (!devices.some(isVolume)) return;
    const cinder = this.cinder(ctx, devices);
    for (let k = 0; k < devices.length; k++) {
      const b = devices[k] as BlockDevice;
      if (isVolume(b) && !(rec.volumes ?? []).some((v) => v.volume_id === b.volume_id)) await this.connectDevice(rec, k, cinder);
    }
    for (const v of rec.volumes ?? []) await this.publish(rec, v.volume_id, cinder, ctx);
  }

  /**
   * A live migration's destination, before the guest comes (nova `pre_live_migration`): for each
   * volume of `bdms` (the source's mappings) an attachment with this host's connector, made while
   * the source keeps its own. The record keeps the new ids in its mappings, their connections (the
   * incoming guest's spec) and, in the migration, the source's ids.
   * @throws VolumeMoveError; what was made stays recorded, for `liveAbandon`
   */
  async liveArrive(rec: InstanceRecord, bdms: readonly BlockDevice[] | null, ctx: RequestContext): Promise<void> {
    const carried = (bdms ?? []).filter(isVolume);
    if (carried.length === 0) return;
    const old = (migrationOf(rec, carried).old_attachment_ids ??= {});
    const cinder = this.cinder(ctx, carried);
    for (const b of carried) {
      const volumeId = b.volume_id;
      const device = b.device_name;
      if (!device) throw new VolumeMoveError(volumeId, 'has no device name in the mapping the source sent');
      let flat: Readonly<Record<string, unknown>> | undefined;
      if (!(volumeId in old)) {
        const made = await this.step(volumeId, `could not get an attachment with the connector of ${this.c.host}`, () => cinder.createAttachment(volumeId, rec.uuid, connectorFor(this.o.connector, device), 'rw'));
        old[volumeId] = b.attachment_id;
        rec.block_devices = [...(rec.block_devices ?? []).filter((x) => x.volume_id !== volumeId), { ...b, attachment_id: made.id }];
        await this.c.save(rec);
        flat = made.connection_info;
      }
      if ((rec.volumes ?? []).some((v) => v.volume_id === volumeId)) continue;
      const mine = (rec.block_devices ?? []).find((x) => x.volume_id === volumeId);
      const attachmentId = mine?.attachment_id ?? '';
      const attached = await this.step(volumeId, `has no connection to ${this.c.host}`, async () =>
        volumeAttachment({ ...b, attachment_id: attachmentId, device_name: device }, flat ?? (await cinder.getAttachment(attachmentId)).connection_info),
      );
      this.record(rec, attached);
      await this.c.save(rec);
    }
  }

  /**
   * A live migration's destination once the guest runs here (nova's post_live_migration_at_destination):
   * the new attachments are written into nova's mappings and completed. Never throws: the guest runs
   * here whatever Cinder answers, so a failure is logged, naming the volume.
   */
  async liveSettle(rec: InstanceRecord, ctx: RequestContext): Promise<void> {
    if (!rec.migration?.old_attachment_ids || (rec.volumes ?? []).length === 0) return;
    for (const v of rec.volumes ?? []) {
      await Promise.resolve()
        .then(() => this.publish(rec, v.volume_id, this.cinder(ctx, rec.block_devices ?? []), ctx))
        .catch((e: unknown) => this.c.log.error({ instance: rec.uuid, volume: v.volume_id, attachment: v.attachment_id, reason: errorText(e) }, 'could not complete the volume attachment after the live migration; the guest uses the volume here'));
    }
  }

  /**
   * A live migration's destination when the move is given up: the attachments it made are deleted
   * and its record's mappings and connections emptied; the source's attachments stay as they are.
   * Never throws: an attachment that could not be deleted is logged.
   */
  async liveAbandon(rec: InstanceRecord, ctx: RequestContext): Promise<void> {
    const old = rec.migration?.old_attachment_ids;
    if (!old || Object.keys(old).length === 0) return;
    for (const b of rec.block_devices ?? []) {
      if (!isVolume(b) || !(b.volume_id in old) || !b.attachment_id) continue;
      const made = b.attachment_id;
      await Promise.resolve()
        .then(() => this.cinder(ctx, [b]).deleteAttachment(made))
        .catch((e: unknown) => this.c.log.error({ instance: rec.uuid, volume: b.volume_id, attachment: made, reason: errorText(e) }, 'could not delete the attachment a failed live migration made; delete it in Cinder'));
    }
    rec.block_devices = [];
    rec.volumes = [];
    delete (rec.migration as MigrationRecord).old_attachment_ids;
    await this.c.save(rec);
  }

  /**
   * A live migration's source once the guest runs at the destination (nova `_post_live_migration`):
   * this host's attachments are deleted, ending its connections; the destination's are the
   * volumes' now. Never throws: the guest has left, so a failure is logged, naming the attachment.
   */
  async liveLeave(rec: InstanceRecord, ctx: RequestContext): Promise<void> {
    for (const b of (rec.block_devices ?? []).filter(isVolume)) {
      const mine = b.attachment_id;
      if (!mine) continue;
      await Promise.resolve()
        .then(() => this.cinder(ctx, [b]).deleteAttachment(mine))
        .catch((e: unknown) => this.c.log.error({ instance: rec.uuid, volume: b.volume_id, attachment: mine, reason: errorText(e) }, 'could not delete the source attachment after the live migration; delete it in Cinder'));
    }
  }

  /** Connects mapping `k` of the record here and records the connection. @throws VolumeMoveError */
  private async connectDevice(rec: InstanceRecord, k: number, cinder: CinderApi): Promise<void> {
    const b = (rec.block_devices ?? [])[k] as VolumeDevice;
    const { attachment_id: attachmentId, device_name: device } = b;
    if (!attachmentId || !device) throw new VolumeMoveError(b.volume_id, `names no attachment or no device in its mapping; it cannot be connected to ${this.c.host}`);
    const target: ConnectableDevice = { ...b, attachment_id: attachmentId, device_name: device };
    this.record(rec, await this.step(b.volume_id, `could not be connected to ${this.c.host}`, () => connectAttachment(cinder, this.o.connector, target)));
    await this.c.save(rec);
  }

  /** Writes the recorded connection of `volumeId` into nova's mapping, then completes its attachment. @throws VolumeMoveError */
  private async publish(rec: InstanceRecord, volumeId: string, cinder: CinderApi, ctx: RequestContext): Promise<void> {
    const v = (rec.volumes ?? []).find((x) => x.volume_id === volumeId);
    if (!v) return;
    if (v.bdm_id !== null) await this.c.controlPlane.blockDevice(rec.uuid, v.bdm_id, { attachment_id: v.attachment_id, device_name: v.device_name, connection_info: JSON.stringify(v.connection_info) }, ctx);
    await this.step(volumeId, `could not have its attachment ${v.attachment_id} completed`, () => cinder.completeAttachment(v.attachment_id));
  }

  /** Records `attached`, replacing the volume's earlier connection, in the order of the mappings (the order the guest gets its disks). */
  private record(rec: InstanceRecord, attached: VolumeAttachment): void {
    const devices = rec.block_devices ?? [];
    const at = (v: VolumeAttachment): number => devices.findIndex((b) => b.volume_id === v.volume_id);
    rec.volumes = [...(rec.volumes ?? []).filter((v) => v.volume_id !== attached.volume_id), attached].sort((a, b) => at(a) - at(b));
  }

  /** The user's Cinder. @throws VolumeMoveError naming the first volume when this host has no Cinder */
  private cinder(ctx: RequestContext, devices: readonly BlockDevice[]): CinderApi {
    if (!this.o.cinder.configured) throw new VolumeMoveError(devices.find(isVolume)?.volume_id ?? '?', `cannot move: host ${this.c.host} has no Cinder (set [placement] keystone credentials with block-storage in the catalog, or [cinder] endpoint_override)`);
    return this.o.cinder.forRequest(ctx);
  }

  /** Runs one Cinder step of `volumeId`. @throws VolumeMoveError saying `what` and why, with the cause */
  private async step<T>(volumeId: string, what: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (e) {
      if (e instanceof VolumeMoveError) throw e;
      throw new VolumeMoveError(volumeId, `${what}: ${errorText(e)}`, { cause: e });
    }
  }
}

/** The record's move. @throws VolumeMoveError when none is recorded (a flow calls a move step only during a move) */
function migrationOf(rec: InstanceRecord, devices: readonly BlockDevice[]): MigrationRecord {
  if (!rec.migration) throw new VolumeMoveError(devices.find(isVolume)?.volume_id ?? '?', `cannot move: instance ${rec.uuid} has no move recorded here`);
  return rec.migration;
}
