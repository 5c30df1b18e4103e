/**
 * Connecting one volume mapping's Cinder attachment to this host: the step a build
 * (`volume-flows.ts`), an attach (`volume-attach.ts`) and the host a move brings the instance to
 * (`volume-moves.ts`) share, as nova's `DriverVolumeBlockDevice.attach` does it: Cinder is told
 * this host's connector with the guest's device as its mountpoint, and its connection info, in
 * nova's form, becomes the `VolumeAttachment` the journal records and the driver's spec gets.
 *
 * Also here: one try at deleting a volume whose attachments went (a deleted instance's
 * `delete_on_termination` volume), shared by the delete and the attachment deletes it owes.
 *
 * It is not: saving the record or nova's mapping, completing the attachment, or undoing anything on
 * failure; each caller orders those steps itself.
 */
import type { BlockDevice, VolumeAttachment } from '../../model/block-device';
import type { CinderApi, VolumeConnector } from '../volume/cinder-api';
import { CinderNotFoundError, VolumeSetupError } from '../volume/errors';

/** nova's form of the connection info it stores in a mapping: Cinder's flat answer split, with the volume as `serial`. */
export function novaConnectionInfo(flat: Readonly<Record<string, unknown>>, volumeId: string): { driver_volume_type: string; data: Record<string, unknown>; serial: string } {
  const { driver_volume_type, ...data } = flat;
  if (typeof driver_volume_type !== 'string' || driver_volume_type === '') throw new VolumeSetupError(volumeId, 'Cinder gave the attachment no driver_volume_type (is the volume service up?)');
  return { driver_volume_type, data, serial: volumeId };
}

/** A volume mapping whose volume, attachment and device are known: what can be connected. */
export type ConnectableDevice = Pick<BlockDevice, 'id' | 'boot_index' | 'delete_on_termination'> & {
  readonly volume_id: string;
  readonly attachment_id: string;
  readonly device_name: string;
};

/** This host's connector for the volume the guest sees as `device` (nova adds the mountpoint). */
export function connectorFor(connector: VolumeConnector, device: string): VolumeConnector {
  return { ...connector, mountpoint: device };
}

/**
 * What the journal records of mapping `b` once Cinder answered with the connection info `flat`.
 * @throws VolumeSetupError when the answer has no `driver_volume_type`
 */
export function volumeAttachment(b: ConnectableDevice, flat: Readonly<Record<string, unknown>>): VolumeAttachment {
  return {
    volume_id: b.volume_id,
    attachment_id: b.attachment_id,
    device_name: b.device_name,
    boot_index: b.boot_index,
    delete_on_termination: b.delete_on_termination,
    bdm_id: b.id,
    connection_info: novaConnectionInfo(flat, b.volume_id),
  };
}

/**
 * Connects `b`'s attachment to this host (`PUT /v3/attachments/{id}` with the connector).
 * @throws what `CinderApi.updateAttachment` throws, VolumeSetupError (no driver_volume_type)
 */
export async function connectAttachment(cinder: CinderApi, connector: VolumeConnector, b: ConnectableDevice): Promise<VolumeAttachment> {
  const answer = await cinder.updateAttachment(b.attachment_id, connectorFor(connector, b.device_name));
  return volumeAttachment(b, answer.connection_info);
}

/** Volume states in which Cinder refuses a delete: attached, or `detaching` for a moment after its last attachment went. */
const VOLUME_IN_USE = new Set(['detaching', 'attaching', 'reserved', 'in-use']);

/**
 * One try at deleting volume `id` once its attachments are gone: 'gone' when Cinder has it deleted,
 * deleting or no longer has it; 'in-use' while its status still refuses the delete, unless `force`
 * (then the delete is asked anyway, and Cinder's refusal says why).
 */
export async function deleteFreedVolume(cinder: CinderApi, id: string, force = false): Promise<'gone' | 'in-use'> {
  const status = await cinder.getVolume(id).then(
    (v) => v.status,
    (e: unknown) => (e instanceof CinderNotFoundError ? 'deleted' : Promise.reject(e)),
  );
  if (status === 'deleted' || status === 'deleting') return 'gone';
  if (VOLUME_IN_USE.has(status) && !force) return 'in-use';
  await cinder.deleteVolume(id);
  return 'gone';
}
