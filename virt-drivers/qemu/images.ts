/**
 * Images and disks: resolving an instance's `image_ref` to a local file, and the qemu-img calls
 * that make, move and grow an instance's qcow2 overlay.
 *
 * `image_ref` is an absolute path to a raw or qcow2 file, or a plain file name under
 * `[qemu] images_path` (there is no Glance download here; a deployment places images on each
 * host, as nova's `_base` cache would hold them). Every instance disk is a qcow2 overlay whose
 * backing file is the image, created with an explicit backing format (`-F`), which qemu-img
 * requires and which keeps QEMU from probing the format of the image at every start.
 *
 * It is: a thin layer over qemu-img through the `Exec` port, with deadlines. It is not: an image
 * cache or a format converter. Image formats are probed once, by `qemu-img info`, on files the
 * operator placed; only raw and qcow2 are accepted.
 */
import { stat } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { CommandError, type Exec } from '../host/exec';
import { ImageError, InstanceFilesError } from './errors';

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

/**
 * qemu-img operations for one driver. Stateless; safe for concurrent use. Every method throws
 * `ImageError` (the image cannot be used) or `InstanceFilesError` (qemu-img failed, with its words).
 */
export class Images {
  constructor(
    private readonly opts: { readonly qemuImg: string; readonly imagesPath?: string },
    private readonly exec: Exec,
  ) {}

  /** The local file `imageRef` names, with its format and size. @throws ImageError */
  async resolve(imageRef: string): Promise<ResolvedImage> {
    let path: string;
    if (isAbsolute(imageRef)) path = imageRef;
    else if (!this.opts.imagesPath) throw new ImageError(imageRef, 'not an absolute path, and [qemu] images_path is not set');
    else if (!PLAIN_NAME.test(imageRef)) throw new ImageError(imageRef, 'not a file name under [qemu] images_path (letters, digits, . _ + -)');
    else path = join(this.opts.imagesPath, imageRef);
    try {
      if (!(await stat(path)).isFile()) throw new ImageError(imageRef, `${path} is not a regular file`);
    } catch (e) {
      if (e instanceof ImageError) throw e;
      throw new ImageError(imageRef, `${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`, { cause: e });
    }
    const info = await this.info(path).catch((e: unknown) => {
      throw new ImageError(imageRef, (e as Error).message, { cause: e });
    });
    if (info.format !== 'raw' && info.format !== 'qcow2') throw new ImageError(imageRef, `format ${info.format} is not supported (raw or qcow2)`);
    return { path, format: info.format, virtualSize: info.virtualSize };
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

  /** Grows `disk` to `rootGb` GiB if it is smaller; never shrinks. @throws InstanceFilesError */
  async growTo(disk: string, rootGb: number): Promise<void> {
    if (rootGb <= 0) return;
    const info = await this.info(disk);
    if (info.virtualSize < rootGb * GIB) await this.run(disk, ['resize', '-q', '-f', 'qcow2', disk, String(rootGb * GIB)]);
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
