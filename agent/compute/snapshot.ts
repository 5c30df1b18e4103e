/**
 * `snapshot_instance` and `backup_instance`, as nova-compute runs them with the libvirt driver:
 * nova's API has created the image in Glance (queued, with the instance's properties) and set the
 * task state; this host copies the root disk as of one instant (the driver's `snapshot`), fills
 * the image's formats and the properties nova's libvirt driver adds, streams the data to Glance,
 * and clears the task. A backup then deletes the oldest backups of the same type beyond
 * `rotation` (nova's `_rotate_backups`).
 *
 * The task goes image_snapshot (or image_backup), image_pending_upload (the copy), image_uploading
 * (the upload), then none, each written to nova with the task it expects. Any failure clears the
 * task, records the fault and deletes the image (nova's `delete_image_on_error`), so no half-made
 * image is left; a rotation that fails is logged and leaves the backups as they were.
 *
 * Glance is written with the agent's own credentials (as the image cache reads it). The data is
 * streamed from the driver's copy on disk: the agent never holds an image in memory.
 *
 * Not here: the disk copy (the virt driver), shelve (which snapshots, then offloads).
 */
import type { GlanceImageWrites, ImagePatchOp } from '../../virt-drivers/glance/api';
import type { SnapshotImage } from '../../virt-drivers/driver';
import type { InstanceRecord } from '../../model/instance';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';
import { transition, type FlowStep } from './transitions';
import { errorText } from '../../lib/error-text';

export type SnapshotContext = Pick<FlowContext, 'locks' | 'require' | 'save' | 'driver' | 'log' | 'notify'>;

/** `backup_instance`'s arguments besides the image. */
export interface BackupRequest {
  /** nova's `backup_type` (`daily`, `weekly`, any word). */
  readonly type: string;
  /** How many backups of that type to keep. */
  readonly rotation: number;
}

/** The formats and the properties nova's libvirt driver gives a snapshot (`_create_snapshot_metadata`). */
export function snapshotImageOps(rec: InstanceRecord, image: Pick<SnapshotImage, 'diskFormat'>): ImagePatchOp[] {
  return [
    { op: 'replace', path: '/disk_format', value: image.diskFormat },
    { op: 'replace', path: '/container_format', value: 'bare' },
    { op: 'add', path: '/image_location', value: 'snapshot' },
    { op: 'add', path: '/image_state', value: 'available' },
    { op: 'add', path: '/owner_id', value: rec.project_id },
  ];
}

export class SnapshotFlows {
  constructor(
    private readonly c: SnapshotContext,
    /** Absent: no Glance configured; a snapshot fails with what to set. */
    private readonly images: GlanceImageWrites | undefined,
  ) {}

  /** `snapshot_instance`: the root disk, as of now, into image `imageId`. */
  snapshot(uuid: string, imageId: string, ctx: RequestContext): Promise<void> {
    return this.run(uuid, imageId, ctx);
  }

  /** `backup_instance`: a snapshot into image `imageId`, then the backups of its type rotated. */
  backup(uuid: string, imageId: string, backup: BackupRequest, ctx: RequestContext): Promise<void> {
    return this.run(uuid, imageId, ctx, backup);
  }

  private run(uuid: string, imageId: string, ctx: RequestContext, backup?: BackupRequest): Promise<void> {
    const c = this.c;
    const [start, end, revert]: readonly [FlowStep, FlowStep, FlowStep] = backup ? ['backup.start', 'backup.end', 'backup.revert'] : ['snapshot.start', 'snapshot.end', 'snapshot.revert'];
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      await this.step(rec, start, ctx);
      const t0 = Date.now();
      let uploadedBytes = 0;
      try {
        uploadedBytes = await this.capture(rec, imageId, ctx, ['snapshot.pending', 'snapshot.uploading']);
      } catch (e) {
        const fault = `${backup ? 'backup' : 'snapshot'} failed: ${errorText(e)}`;
        transition(rec, revert);
        rec.fault = fault;
        await c.save(rec);
        c.log.warn({ instance: uuid, image: imageId, fault }, 'snapshot failed; task cleared, image deleted');
        await c.notify(rec, revert, ctx, fault);
        await this.dropImage(uuid, imageId, 'a failed snapshot');
        return;
      }
      c.log.info({ instance: uuid, image: imageId, bytes: uploadedBytes, ms: Date.now() - t0 }, 'snapshot uploaded to Glance');
      await this.step(rec, end, ctx);
      if (backup) await this.rotate(uuid, backup);
    });
  }

  /**
   * The root disk copied (through `pending`) and streamed into image `imageId` (through
   * `uploading`), the image filled as nova's libvirt driver fills it; resolves to the bytes sent.
   * Hold the instance's lock. @throws what the driver or Glance threw; Error without Glance
   */
  async capture(rec: InstanceRecord, imageId: string, ctx: RequestContext, [pending, uploading]: readonly [FlowStep, FlowStep]): Promise<number> {
    const images = this.images;
    if (!images) throw new Error('Glance is not configured on this host: set [glance] endpoint_override, or keystone auth in [placement]');
    let sent = 0;
    await this.step(rec, pending, ctx);
    const upload = async (image: SnapshotImage): Promise<void> => {
      await this.step(rec, uploading, ctx);
      await images.updateImage(imageId, snapshotImageOps(rec, image));
      await images.uploadImageData(imageId, image.data, image.bytes);
      sent = image.bytes;
    };
    // The image's os_require_quiesce: no snapshot rather than one taken without the guest's filesystems frozen.
    await this.c.driver.snapshot(rec, upload, { requireQuiesce: rec.image_meta?.os_require_quiesce === true });
    return sent;
  }

  /** Deletes image `imageId` (a failed snapshot's, a shelved one unshelved); a failure is logged. */
  async dropImage(uuid: string, imageId: string, why: string): Promise<void> {
    await this.images?.deleteImage(imageId).catch((err: unknown) => this.c.log.warn({ instance: uuid, image: imageId, reason: errorText(err) }, `the image of ${why} could not be deleted`));
  }

  /** Deletes the oldest backups of `backup.type` of the instance beyond `backup.rotation`; never throws. */
  private async rotate(uuid: string, backup: BackupRequest): Promise<void> {
    const images = this.images;
    if (!images) return;
    try {
      const listed = await images.listImages({ instance_uuid: uuid, image_type: 'backup', backup_type: backup.type, sort_key: 'created_at', sort_dir: 'desc' });
      for (const old of listed.slice(backup.rotation)) {
        await images.deleteImage(old.id);
        this.c.log.info({ instance: uuid, image: old.id, backup_type: backup.type, rotation: backup.rotation }, 'backup rotated out');
      }
    } catch (e) {
      this.c.log.warn({ instance: uuid, backup_type: backup.type, reason: errorText(e) }, 'backup rotation failed; the older backups are kept');
    }
  }

  private async step(rec: InstanceRecord, step: FlowStep, ctx: RequestContext): Promise<void> {
    transition(rec, step);
    await this.c.save(rec);
    await this.c.notify(rec, step, ctx);
  }
}
