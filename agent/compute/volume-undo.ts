/**
 * Undoing an `attach_volume` that failed (`volume-attach.ts`), so that it ends in one clear state:
 *
 * - the guest gave the disk back: the record lists neither the volume nor its mapping, nova's row is
 *   destroyed and Cinder's attachment deleted. When Cinder does not answer that delete (the client
 *   has retried already), the delete is owed and retried in the background until Cinder takes it
 *   (`attachment-deletes.ts`); the returned text says so, for the fault.
 * - the guest kept the disk (the driver's detach failed): nothing more is undone, since deleting the
 *   attachment of a disk a guest still writes to would free the volume for another attach. The
 *   record, the mapping and the attachment keep the volume, so a detach can take it out later.
 *
 * It is not: the fault or the notification (the attach flow records them with this text).
 */
import type { BlockDevice } from '../../model/block-device';
import type { InstanceRecord } from '../../model/instance';
import type { AttachmentDeletes } from './attachment-deletes';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';
import { errorText } from '../../lib/error-text';

/**
 * Undoes what an attach of `entry` did on `rec`. Never throws.
 * @returns '' when all is undone, else what is left (appended to the fault's reason)
 */
export async function undoAttach(c: Pick<FlowContext, 'driver' | 'save' | 'controlPlane' | 'log' | 'now'>, owed: AttachmentDeletes, rec: InstanceRecord, entry: BlockDevice, ctx: RequestContext): Promise<string> {
  const volumeId = entry.volume_id;
  if (!volumeId) return '';
  try {
    await c.driver.detachVolume(rec, volumeId);
  } catch (e) {
    c.log.error({ instance: rec.uuid, volume: volumeId, reason: errorText(e) }, 'a failed attach could not take the disk out of the guest; the volume stays attached');
    return `; the guest kept the disk (${errorText(e)}), so nothing is undone: the volume stays attached with its attachment`;
  }
  rec.volumes = (rec.volumes ?? []).filter((v) => v.volume_id !== volumeId);
  rec.block_devices = (rec.block_devices ?? []).filter((b) => b.volume_id !== volumeId);
  await c.save(rec);
  if (entry.id !== null) await c.controlPlane.destroyBlockDevice(rec.uuid, entry.id, ctx);
  if (!entry.attachment_id) return '';
  if (await owed.remove(entry.attachment_id, volumeId, rec.uuid, c.now())) return '';
  return `; Cinder did not delete its attachment ${entry.attachment_id}: the host deletes it once Cinder answers`;
}
