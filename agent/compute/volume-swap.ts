/**
 * `swap_volume` and `remove_volume_connection`, as nova-compute serves them (nova
 * `compute/manager.py` `swap_volume`/`_swap_volume`, `remove_volume_connection`):
 *
 * - swap (a cast: Cinder's migration or retype of an in-use volume, through nova-api, which made
 *   the new volume's attachment and began detaching the old one): the new attachment gets this
 *   host's connector, the driver moves the guest's disk onto the new volume, the new attachment is
 *   completed and the old one deleted; when Cinder is migrating the old volume it is told the move
 *   is done (`os-migrate_volume_completion`) and answers the id the mapping keeps, else the mapping
 *   keeps the new volume. A bigger new volume is grown in a guest whose driver can. The record and
 *   nova's mapping then name that volume, the new attachment and its connection info. A failure leaves the guest on the old disk: the old volume is in use
 *   again, the new attachment deleted, a Cinder migration told it failed, the fault recorded.
 * - remove_volume_connection (a call: a live migration's rollback, on the destination): this
 *   host's guest lets the volume go (if it has it), and with `delete_attachment` the mapping's
 *   attachment is deleted. A volume or instance this host does not know is fine (nova ignores
 *   NotFound), so a repeated call does nothing more.
 *
 * It is not: nova's instance-action events or versioned notifications of a swap (the transition
 * table has no swap rows; nova sets no task state for it), or the old-style (attachment-less) flows.
 */
import type { VolumeAttachment } from '../../model/block-device';
import type { InstanceRecord } from '../../model/instance';
import { VolumeDetachFailedError, VolumeSwapFailedError } from './volume-errors';
import type { CinderApi } from '../volume/cinder-api';
import { InstanceNotFoundError as DriverInstanceNotFoundError } from '../../virt-drivers/errors';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';
import { connectAttachment } from './volume-connect';
import type { VolumeFlowOptions } from './volume-flows';
import { errorText } from '../../lib/error-text';

export type VolumeSwapContext = Pick<FlowContext, 'locks' | 'require' | 'record' | 'save' | 'driver' | 'controlPlane' | 'log'>;

/** What `swap_volume` is asked. */
export interface SwapRequest {
  readonly old_volume_id: string;
  readonly new_volume_id: string;
  readonly new_attachment_id: string;
}

const GIB = 1024 ** 3;
export class VolumeSwapFlows {
  constructor(
    private readonly c: VolumeSwapContext,
    private readonly o: Pick<VolumeFlowOptions, 'cinder' | 'connector'>,
  ) {}

  /** `remove_volume_connection`. Idempotent. @throws VolumeDetachFailedError (the guest kept it), what Cinder's attachment delete throws */
  removeConnection(uuid: string, volumeId: string, deleteAttachment: boolean, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      const v = rec?.volumes?.find((x) => x.volume_id === volumeId);
      const entry = rec?.block_devices?.find((b) => b.volume_id === volumeId);
      if (!rec || (!v && !entry)) {
        c.log.info({ instance: uuid, volume: volumeId }, 'remove_volume_connection: no such volume of the instance on this host; nothing to do');
        return;
      }
      if (v) {
        try {
          await c.driver.detachVolume(rec, volumeId);
        } catch (e) {
          // A guest that is not on this host has no disk here to let go of.
          if (!(e instanceof DriverInstanceNotFoundError)) throw new VolumeDetachFailedError(volumeId, errorText(e), { cause: e });
        }
        rec.volumes = (rec.volumes ?? []).filter((x) => x.volume_id !== volumeId);
        await c.save(rec);
      }
      const attachment = v?.attachment_id ?? entry?.attachment_id ?? null;
      if (deleteAttachment && attachment) await this.o.cinder.forRequest(ctx).deleteAttachment(attachment);
      c.log.info({ instance: uuid, volume: volumeId, attachment, deleted: deleteAttachment }, 'volume connection removed on this host');
    });
  }

  /** `swap_volume`. @throws InstanceNotFoundError (nothing done), VolumeSwapFailedError (the guest keeps the old disk, fault recorded) */
  swap(uuid: string, req: SwapRequest, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      const { old_volume_id: oldId, new_volume_id: newId, new_attachment_id: newAttachment } = req;
      const old = (rec.volumes ?? []).find((v) => v.volume_id === oldId);
      if (!old) {
        if ((rec.volumes ?? []).some((v) => v.attachment_id === newAttachment)) {
          c.log.info({ instance: uuid, volume: oldId, attachment: newAttachment }, 'swap_volume done already (a replay); nothing to do');
          return;
        }
        throw await this.fail(rec, new VolumeSwapFailedError(oldId, newId, `volume ${oldId} is not attached to instance ${uuid} on this host`));
      }
      const cinder = this.o.cinder.forRequest(ctx);
      // nova asks Cinder to complete only a migration Cinder runs (not a swap between two volumes a user asked for).
      let migrating = false;
      let grow = 0;
      let attached: VolumeAttachment | undefined;
      try {
        const from = await cinder.getVolume(oldId);
        migrating = from.migration_status === 'migrating';
        // As nova's resize_to: a bigger new volume is grown in the guest once it is on it.
        const to = (await cinder.getVolume(newId)).size;
        if (to > from.size) grow = to;
        attached = await connectAttachment(cinder, this.o.connector, { id: old.bdm_id, boot_index: old.boot_index, delete_on_termination: old.delete_on_termination, volume_id: newId, attachment_id: newAttachment, device_name: old.device_name });
        // Cinder's migration ends with the new volume under the old id, so the driver knows the disk by the id it will keep.
        await c.driver.swapVolume(rec, oldId, { volume_id: migrating ? oldId : newId, device_name: old.device_name, boot_index: old.boot_index, connection_info: attached.connection_info });
        if (grow > 0 && c.driver.capabilities.supports_extend_volume) {
          await c.driver.extendVolume(rec, migrating ? oldId : newId, grow * GIB).catch((e: unknown) => c.log.warn({ instance: uuid, volume: newId, gib: grow, reason: errorText(e) }, 'swap_volume: the guest was not told the new volume is bigger; it sees the size at its next start'));
        }
        await cinder.completeAttachment(newAttachment);
      } catch (e) {
        await this.undo(rec, req, migrating, cinder);
        throw await this.fail(rec, new VolumeSwapFailedError(oldId, newId, errorText(e), { cause: e }));
      }
      // The guest is on the new volume: what follows is Cinder's bookkeeping, logged when it fails.
      await cinder.deleteAttachment(old.attachment_id).catch((e: unknown) => c.log.warn({ instance: uuid, attachment: old.attachment_id, reason: errorText(e) }, 'swap_volume: Cinder did not delete the old attachment'));
      const saveId = migrating ? await this.complete(cinder, uuid, oldId, newId, false) : newId;
      if (saveId !== (migrating ? oldId : newId)) c.log.warn({ instance: uuid, volume: saveId, disk: migrating ? oldId : newId }, 'swap_volume: Cinder keeps another id than the one the driver knows the disk by');
      const info = attached.connection_info;
      // As nova: the connection info names the volume the mapping keeps (Cinder's migration keeps the old id).
      const connectionInfo = { ...info, data: 'volume_id' in info.data ? { ...info.data, volume_id: saveId } : info.data, serial: saveId, volume_id: saveId };
      const now: VolumeAttachment = { ...attached, volume_id: saveId, connection_info: connectionInfo };
      rec.volumes = (rec.volumes ?? []).map((v) => (v.volume_id === oldId ? now : v));
      rec.block_devices = (rec.block_devices ?? []).map((b) => (b.volume_id === oldId ? { ...b, volume_id: saveId, attachment_id: newAttachment, snapshot_id: null, source_type: 'volume', destination_type: 'volume', ...(grow > 0 ? { volume_size: grow } : {}) } : b));
      await c.save(rec);
      const bdmId = old.bdm_id ?? (rec.block_devices ?? []).find((b) => b.volume_id === saveId)?.id ?? null;
      if (bdmId !== null) await c.controlPlane.blockDevice(uuid, bdmId, { volume_id: saveId, attachment_id: newAttachment, connection_info: JSON.stringify(connectionInfo) }, ctx);
      c.log.info({ instance: uuid, old: oldId, new: newId, kept: saveId, attachment: newAttachment, device: old.device_name }, 'volume swapped');
    });
  }

  /** A failed swap: the old volume in use again, the new attachment deleted, a Cinder migration told. Never throws. */
  private async undo(rec: InstanceRecord, req: SwapRequest, migrating: boolean, cinder: CinderApi): Promise<void> {
    const warn = (what: string) => (e: unknown): void => this.c.log.warn({ instance: rec.uuid, volume: req.old_volume_id, reason: errorText(e) }, what);
    await cinder.rollDetaching(req.old_volume_id).catch(warn('swap_volume: Cinder did not put the old volume back in use'));
    await cinder.deleteAttachment(req.new_attachment_id).catch(warn('swap_volume: Cinder did not delete the new attachment'));
    if (migrating) await this.complete(cinder, rec.uuid, req.old_volume_id, req.new_volume_id, true);
  }

  /** `os-migrate_volume_completion`: the id the mapping keeps (Cinder unable to answer: the old id, which a migration keeps). Never throws. */
  private async complete(cinder: CinderApi, uuid: string, oldId: string, newId: string, error: boolean): Promise<string> {
    const fallback = oldId;
    if (!cinder.migrateVolumeCompletion) {
      this.c.log.warn({ instance: uuid, volume: oldId }, 'swap_volume: this Cinder client cannot complete a volume migration');
      return fallback;
    }
    try {
      return await cinder.migrateVolumeCompletion(oldId, newId, error);
    } catch (e) {
      this.c.log.warn({ instance: uuid, volume: oldId, new: newId, error, reason: errorText(e) }, 'swap_volume: Cinder did not complete the volume migration');
      return fallback;
    }
  }

  private async fail<E extends Error>(rec: InstanceRecord, err: E): Promise<E> {
    rec.fault = `volume swap failed: ${err.message}`;
    await this.c.save(rec);
    this.c.log.warn({ instance: rec.uuid, fault: rec.fault }, 'swap_volume failed');
    return err;
  }
}
