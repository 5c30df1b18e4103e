/**
 * Cinder attachments this host owes a delete: the attachment of a disk the guest has given back
 * (a detach, an attach undone, a deleted instance) whose `DELETE /attachments/{id}` Cinder did not
 * answer, even after the client's retries. nova-compute logs such a failure and leaves the volume
 * `detaching` or `attaching` for an operator; here the delete is recorded durably (record kind
 * `attachment_delete`, keyed by the attachment id) and retried in the background until Cinder
 * takes it (`owed-work.ts`), across restarts, so a Cinder outage ends with the volume `available`
 * once Cinder is back, without anyone asking again.
 *
 * Contracts: an attachment is owed only once no guest on this host uses its disk (deleting the
 * attachment of a disk in use would free the volume for another attach). The delete goes with the
 * agent's own token (its user has the `service` and `admin` roles nova's user has): the user's
 * token of the request may have expired by the time Cinder answers. A delete of an attachment
 * Cinder no longer has is done; one Cinder refuses for good (a 4xx other than 404 and 409) is
 * logged with what to do and dropped. The volume of a deleted instance's `delete_on_termination`
 * mapping is deleted after its attachment, once Cinder shows it `available`. It is not: the other
 * Cinder calls of a detach, nor nova's block device mapping (the flows destroy that themselves).
 */
import type { Clock } from '../../lib/clock';
import type { Logger } from '../../lib/logging/logger';
import { CinderRefusedError } from '../volume/errors';
import type { CinderClients } from '../volume/factory';
import { OwedWork } from './owed-work';
import type { RecordStore } from './ports';
import { deleteFreedVolume } from './volume-connect';

/** The record kind owed attachment deletes are stored under. */
export const ATTACHMENT_DELETE = 'attachment_delete';

/** One owed delete, as stored. */
export interface OwedAttachmentDelete {
  readonly attachment_id: string;
  readonly volume_id: string;
  /** The instance the attachment was for. */
  readonly instance: string;
  /** When it was recorded (ISO 8601). */
  readonly since: string;
  /** A deleted instance's `delete_on_termination` volume: deleted once the attachment is, and `available`. */
  readonly delete_volume?: boolean;
}

export interface AttachmentDeleteDeps {
  readonly store: RecordStore;
  readonly cinder: CinderClients;
  readonly log: Logger;
  readonly clock?: Clock;
}

export class AttachmentDeletes extends OwedWork<OwedAttachmentDelete> {
  constructor(deps: AttachmentDeleteDeps) {
    super({
      store: deps.store,
      kind: ATTACHMENT_DELETE,
      keyField: 'attachment',
      log: deps.log,
      messages: { failed: 'Cinder did not delete the attachment of a disk the guest gave back; retrying in the background', done: 'attachment deleted in Cinder' },
      act: async (id, item) => {
        const cinder = deps.cinder.forRequest({});
        try {
          await cinder.deleteAttachment(id);
          if (!item.delete_volume) return 'done';
          return (await deleteFreedVolume(cinder, item.volume_id)) === 'gone' ? 'done' : 'retry';
        } catch (e) {
          if (!(e instanceof CinderRefusedError)) throw e;
          deps.log.error(
            { attachment: id, volume: item.volume_id, instance: item.instance, reason: e.message },
            'Cinder refuses to delete the attachment of a disk no guest uses; given up: delete it in Cinder (openstack volume attachment delete)',
          );
          return 'dropped';
        }
      },
      ...(deps.clock ? { clock: deps.clock } : {}),
    });
  }

  /**
   * Deletes `attachmentId` now, or records the delete as owed and leaves it to the background.
   * Never throws. @returns false when it is owed; true when nothing is (deleted, or refused for good and logged)
   */
  async remove(attachmentId: string, volumeId: string, instance: string, now: string): Promise<boolean> {
    await this.owe(attachmentId, { attachment_id: attachmentId, volume_id: volumeId, instance, since: now });
    return (await this.tryNow([attachmentId])).length === 0;
  }

  /** Marks an owed delete's volume for deletion after it (a deleted instance's `delete_on_termination`). */
  async thenDeleteVolume(attachmentId: string): Promise<void> {
    const item = this.owed(attachmentId);
    if (item) await this.owe(attachmentId, { ...item, delete_volume: true });
  }
}
