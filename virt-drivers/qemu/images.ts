/**
 * Images and disks: resolving an instance's `image_ref` to a local file, and the qemu-img calls
 * that make, move and grow an instance's qcow2 overlay.
 *
 * `image_ref` is a Glance image id (a UUID) when Glance is configured (`[glance]`): the image comes
 * from the host's image cache (`image-cache.ts`), which downloads it once. Otherwise it is an
 * absolute path to a raw or qcow2 file, or a plain file name under `[qemu] images_path`, placed on
 * the host by the deployment. Every instance disk is a qcow2 overlay whose
 * backing file is the image, created with an explicit backing format (`-F`), which qemu-img
 * requires and which keeps QEMU from probing the format of the image at every start.
 *
 * It is: a thin layer over qemu-img through the `Exec` port, with deadlines. It is not: the image
 * cache, nor a format converter. Local files' formats are probed by `qemu-img info`; a Glance
 * image's format is Glance's `disk_format`, which the probe of the downloaded file must confirm
 * (a raw image whose data looks like qcow2 is refused, as is a qcow2 with a backing file). Only
 * raw and qcow2 are accepted.
 */
import { stat } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { CommandError, type Exec } from '../host/exec';
import { ImageError, InstanceFilesError } from './errors';
import type { ImageCache } from './image-cache';

/** An image found on this host, with the format qemu-img probed. */
export interface ResolvedImage {
  readonly path: string;
  readonly format: 'raw' | 'qcow2';
  readonly virtualSize: number;
}

/** What `qemu-img info` says about a disk. */
export interface DiskInfo {
  readonly format: string;
  readonly virtualSize: number;
  readonly backingFile?: string;
}

const GIB = 1024 * 1024 * 1024;
const TIMEOUT_MS = 120_000;
const PLAIN_NAME = /^[A-Za-z0-9][A-Za-z0-9._+-]*$/;
const GLANCE_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * qemu-img operations for one driver. Stateless; safe for concurrent use. Every method throws
 * `ImageError` (the image cannot be used) or `InstanceFilesError` (qemu-img failed, with its words).
 */
export class Images {
  constructor(
    private readonly opts: { readonly qemuImg: string; readonly imagesPath?: string },
    private readonly exec: Exec,
    private readonly cache?: ImageCache,
  ) {}

  /**
   * The local file `imageRef` names (a Glance image id: its file in the image cache, downloaded
   * if need be), with its format and size. @throws ImageError (and its ImageChecksumError, ImageDownloadError)
   */
  async resolve(imageRef: string): Promise<ResolvedImage> {
    if (this.cache && GLANCE_ID.test(imageRef)) {
      const cached = await this.cache.fetch(imageRef);
      const info = await this.info(cached.path).catch((e: unknown) => {
        throw new ImageError(imageRef, (e as Error).message, { cause: e });
      });
      return { path: cached.path, format: cached.format, virtualSize: info.virtualSize };
    }
    let path: string;
    if (isAbsolute(imageRef)) path = imageRef;
    else if (!this.opts.imagesPath) throw new ImageError(imageRef, `not an absolute path, and [qemu] images_path is not set${this.glanceHint(imageRef)}`);
    else if (!PLAIN_NAME.test(imageRef)) throw new ImageError(imageRef, 'not a file name under [qemu] images_path (letters, digits, . _ + -)');
    else path = join(this.opts.imagesPath, imageRef);
    try {
      if (!(await stat(path)).isFile()) throw new ImageError(imageRef, `${path} is not a regular file`);
    } catch (e) {
      if (e instanceof ImageError) throw e;
      throw new ImageError(imageRef, `${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})${this.glanceHint(imageRef)}`, { cause: e });
    }
    const info = await this.info(path).catch((e: unknown) => {
      throw new ImageError(imageRef, (e as Error).message, { cause: e });
    });
    if (info.format !== 'raw' && info.format !== 'qcow2') throw new ImageError(imageRef, `format ${info.format} is not supported (raw or qcow2)`);
    return { path, format: info.format, virtualSize: info.virtualSize };
  }

  /**
   * Checks a file downloaded from Glance before it enters the cache: qemu-img must see the format
   * Glance declared, and a qcow2 must not name a backing file (it would read another file of the host).
   * @throws ImageError
   */
  async checkDownloaded(imageRef: string, path: string, format: 'raw' | 'qcow2'): Promise<void> {
    const info = await this.info(path).catch((e: unknown) => {
      throw new ImageError(imageRef, (e as Error).message, { cause: e });
    });
    if (info.format !== format) throw new ImageError(imageRef, `Glance says disk_format ${format}, but the data is ${info.format}`);
    if (info.backingFile !== undefined) throw new ImageError(imageRef, `the qcow2 image names a backing file (${info.backingFile}); refused`);
  }

  /** `qemu-img info` of a file, shared-locked so it works on a disk in use. @throws InstanceFilesError */
  async info(path: string): Promise<DiskInfo> {
    const out = await this.run(path, ['info', '-U', '--output=json', path]);
    let doc: unknown;
    try {
      doc = JSON.parse(out);
    } catch (e) {
      throw new InstanceFilesError(path, 'qemu-img info printed no JSON', { cause: e });
    }
    const d = (typeof doc === 'object' && doc !== null ? doc : {}) as Record<string, unknown>;
    const format = typeof d.format === 'string' ? d.format : 'unknown';
    const virtualSize = typeof d['virtual-size'] === 'number' ? d['virtual-size'] : 0;
    const backing = typeof d['full-backing-filename'] === 'string' ? d['full-backing-filename'] : typeof d['backing-filename'] === 'string' ? d['backing-filename'] : undefined;
    return { format, virtualSize, ...(backing === undefined ? {} : { backingFile: backing }) };
  }

  /**
   * Creates `disk` as a qcow2 overlay on `image`, `rootGb` GiB large (the image's size when 0).
   * @throws ImageError when the flavor's disk is smaller than the image; InstanceFilesError
   */
  async createOverlay(disk: string, image: ResolvedImage, rootGb: number): Promise<void> {
    const size = this.overlaySize(image, rootGb);
    await this.run(disk, ['create', '-q', '-f', 'qcow2', '-b', image.path, '-F', image.format, disk, ...(size === undefined ? [] : [String(size)])]);
  }

  /** Creates `disk` as a qcow2 overlay on `image` of exactly `bytes` (a live-migration target matches its source). @throws InstanceFilesError */
  async createOverlayBytes(disk: string, image: ResolvedImage, bytes: number): Promise<void> {
    await this.run(disk, ['create', '-q', '-f', 'qcow2', '-b', image.path, '-F', image.format, disk, String(bytes)]);
  }

  /** Points `disk` at `image` without touching its data (the same image, another path). @throws InstanceFilesError */
  async rebase(disk: string, image: ResolvedImage): Promise<void> {
    await this.run(disk, ['rebase', '-u', '-f', 'qcow2', '-b', image.path, '-F', image.format, disk]);
  }

  /**
   * Puts `disk` on `image` keeping what the guest sees: qemu-img's safe rebase writes into the
   * overlay every block where the old and the new backing differ. @throws InstanceFilesError
   */
  async rebaseKeepingData(disk: string, image: ResolvedImage): Promise<void> {
    await this.run(disk, ['rebase', '-f', 'qcow2', '-b', image.path, '-F', image.format, disk]);
  }

  /** Grows `disk` to `rootGb` GiB if it is smaller; never shrinks. @throws InstanceFilesError */
  async growTo(disk: string, rootGb: number): Promise<void> {
    if (rootGb <= 0) return;
    const info = await this.info(disk);
    if (info.virtualSize < rootGb * GIB) await this.run(disk, ['resize', '-q', '-f', 'qcow2', disk, String(rootGb * GIB)]);
  }

  /** Creates `path` as an empty qcow2 of `bytes`, with no backing file (a snapshot's target). @throws InstanceFilesError */
  async createBlank(path: string, bytes: number): Promise<void> {
    await this.run(path, ['create', '-q', '-f', 'qcow2', path, String(bytes)]);
  }

  /** Writes `disk` (its backing chain included) to `out` as one qcow2 with no backing file; zeros are not stored. Shared-locked: the disk may be open. @throws InstanceFilesError */
  async flatten(disk: string, out: string): Promise<void> {
    await this.run(disk, ['convert', '-U', '-q', '-O', 'qcow2', disk, out]);
  }

  /** For a Glance image id on a host without Glance: what to set. */
  private glanceHint(imageRef: string): string {
    return GLANCE_ID.test(imageRef) ? '; Glance is not configured: set [glance] endpoint_override, or keystone auth in [placement]' : '';
  }

  private overlaySize(image: ResolvedImage, rootGb: number): number | undefined {
    if (rootGb <= 0) return undefined;
    const bytes = rootGb * GIB;
    if (bytes < image.virtualSize) {
      throw new ImageError(image.path, `is ${(image.virtualSize / GIB).toFixed(1)} GiB, larger than the flavor's root disk of ${rootGb} GiB`);
    }
    return bytes;
  }

  private async run(subject: string, args: string[]): Promise<string> {
    try {
      return (await this.exec.run(this.opts.qemuImg, args, { timeoutMs: TIMEOUT_MS })).stdout;
    } catch (e) {
      const reason = e instanceof CommandError ? e.message : String(e);
      throw new InstanceFilesError(subject, reason, { cause: e });
    }
  }
}
