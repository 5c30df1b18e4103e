/**
 * The failures of the volume RPC methods (`volume-attach.ts`), one class each, in the
 * `nova.exception` form nova-compute raises them (nova `exception.py`), so nova-api answers as it
 * would for nova-compute (400 for the Invalid ones; `reserve_block_device_name` is a call whose
 * error reaches the user). Each message says what went wrong here, and `cause` keeps the error it
 * came from (Cinder's, the driver's).
 */
import { NovaError } from '../rpc/oslo/errors';

type Opts = { readonly cause?: unknown };

/** The volume is attached to the instance already, or cannot be attached as asked. nova: `InvalidVolume` (400). */
export class InvalidVolumeError extends NovaError {
  constructor(reason: string) {
    super('InvalidVolume', `Invalid volume: ${reason}`, { reason }, 400);
  }
}

/** A tag was asked for, and the driver cannot show tags to the guest. nova: `VolumeTaggedAttachNotSupported` (400). */
export class VolumeTaggedAttachNotSupportedError extends NovaError {
  constructor(driver: string) {
    super('VolumeTaggedAttachNotSupported', `Tagged volume attachment is not supported for this server instance (virt driver ${driver} has no device tagging).`, {}, 400);
  }
}

/** A multiattach volume, which the driver does not share between guests. nova: `MultiattachNotSupportedByVirtDriver` (409). */
export class MultiattachNotSupportedError extends NovaError {
  constructor(volumeId: string) {
    super('MultiattachNotSupportedByVirtDriver', `Volume ${volumeId} has 'multiattach' set, which is not supported for this instance (the qemu driver shares no disk between guests).`, { volume_id: volumeId }, 409);
  }
}

/** The attach failed; what it did is undone (the attachment deleted, nova's row destroyed). nova: `VolumeAttachFailed` (500). */
export class VolumeAttachFailedError extends NovaError {
  constructor(readonly volumeId: string, reason: string, options?: Opts) {
    super('VolumeAttachFailed', `Volume ${volumeId} could not be attached. Reason: ${reason}`, { volume_id: volumeId, reason }, 500, options);
  }
}

/** The detach failed; the volume stays attached (or, past the guest, says what is left). nova: `VolumeDetachFailed` (500). */
export class VolumeDetachFailedError extends NovaError {
  constructor(readonly volumeId: string, reason: string, options?: Opts) {
    super('VolumeDetachFailed', `Volume ${volumeId} could not be detached. Reason: ${reason}`, { volume_id: volumeId, reason }, 500, options);
  }
}

/** The swap failed; the guest keeps the old volume (a cast: nova's API sees the fault). */
export class VolumeSwapFailedError extends NovaError {
  constructor(readonly oldVolumeId: string, readonly newVolumeId: string, reason: string, options?: Opts) {
    // nova-compute re-raises the driver's own error; no nova class names a failed swap.
    super('NovaException', `Volume ${oldVolumeId} could not be swapped for ${newVolumeId}. Reason: ${reason}`, { old_volume_id: oldVolumeId, new_volume_id: newVolumeId, reason }, 500, options);
  }
}
