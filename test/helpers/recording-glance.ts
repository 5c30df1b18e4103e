/**
 * Glance's image writes in memory, for the compute manager's snapshot and shelve tests: what each
 * image got (its JSON patch, its data as text), every call in order, the backups a rotation lists,
 * and an upload failure to inject.
 */
import type { Readable } from 'node:stream';
import type { GlanceImageWrites, ImagePatchOp, ListedImage } from '../../virt-drivers/glance/api';

/** Glance's writes in memory: what each image got, and the backups listed for a rotation. */
export class RecordingGlance implements GlanceImageWrites {
  readonly calls: string[] = [];
  readonly patches = new Map<string, ImagePatchOp[]>();
  readonly data = new Map<string, string>();
  listed: ListedImage[] = [];
  failUpload: Error | undefined;

  updateImage(id: string, ops: readonly ImagePatchOp[]): Promise<void> {
    this.calls.push(`patch ${id}`);
    this.patches.set(id, [...ops]);
    return Promise.resolve();
  }
  async uploadImageData(id: string, data: Readable, bytes: number): Promise<void> {
    this.calls.push(`upload ${id} ${bytes}`);
    if (this.failUpload) throw this.failUpload;
    const chunks: Buffer[] = [];
    for await (const c of data) chunks.push(c as Buffer);
    this.data.set(id, Buffer.concat(chunks).toString());
  }
  deleteImage(id: string): Promise<void> {
    this.calls.push(`delete ${id}`);
    return Promise.resolve();
  }
  listImages(query: Readonly<Record<string, string>>): Promise<ListedImage[]> {
    this.calls.push(`list ${new URLSearchParams(query).toString()}`);
    return Promise.resolve(this.listed);
  }
}

