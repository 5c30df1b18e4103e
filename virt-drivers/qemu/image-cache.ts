/**
 * The host's cache of Glance images, nova's `_base`: `<instances_path>/<[image_cache]
 * subdirectory_name>/<image id>.<raw|qcow2>`, the backing files of the instances' overlays.
 *
 * An image is downloaded once however many builds ask for it at once (one in-flight download per
 * image id, shared by every caller), streamed to a dot-file beside its final name while its hash
 * is computed (`os_hash_algo`/`os_hash_value`, else md5 `checksum`), fsynced, checked by `verify`
 * (qemu-img's view of the file against Glance's `disk_format`) and renamed into place, then the
 * directory fsynced. Any failure removes the dot-file: a reader never sees a partial image, and a
 * crash leaves only a dot-file that `prune` removes. An image already in the cache is used without
 * asking Glance (as nova does), and its mtime is set to now: the mtime is when it was last used.
 *
 * `prune` removes images no instance uses and nobody used for `minAgeMs` (nova's
 * `remove_unused_original_minimum_age_seconds`); images in use get their mtime refreshed.
 *
 * It is: the files and the single-flight table. It is not: the Glance client (a port), nor a
 * format converter (raw and qcow2 are used as they come).
 */
import { createHash, getHashes, randomBytes, type Hash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Clock } from '../../lib/clock';
import { fsyncDir } from '../../lib/atomic-file';
import type { Logger } from '../../lib/logging/logger';
import type { GlanceApi, GlanceImage } from '../glance/api';
import { GlanceError } from '../glance/errors';
import { ImageChecksumError, ImageDownloadError, ImageError } from './errors';

/** An image in the cache. */
export interface CachedImage {
  readonly id: string;
  readonly path: string;
  readonly format: 'raw' | 'qcow2';
}

export interface ImageCacheOptions {
  readonly dir: string;
  /** An unused image older than this (since its last use) is removed by `prune`. */
  readonly minAgeMs: number;
}

export interface ImageCacheDeps {
  readonly glance: GlanceApi;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Checks a downloaded file before it enters the cache. @throws ImageError */
  readonly verify?: (id: string, path: string, format: 'raw' | 'qcow2') => Promise<void>;
}

const CACHED = /^([A-Za-z0-9-]+)\.(raw|qcow2)$/;
const PARTIAL = /^\.([A-Za-z0-9-]+)\.[0-9a-f]+\.part$/;
const FORMATS = ['raw', 'qcow2'] as const;

export class ImageCache {
  private readonly inflight = new Map<string, Promise<CachedImage>>();
  private downloadCount = 0;

  constructor(
    private readonly opts: ImageCacheOptions,
    private readonly deps: ImageCacheDeps,
  ) {}

  /** Downloads started since this cache was made (each a `GET /v2/images/{id}/file`). */
  get downloads(): number {
    return this.downloadCount;
  }

  /** The cache's directory. */
  get dir(): string {
    return this.opts.dir;
  }

  /**
   * The image `id`, from the cache or downloaded into it; concurrent callers share one download.
   * @throws ImageDownloadError (Glance said no, or could not be reached, or the download broke),
   *   ImageChecksumError, ImageError (not active, a format other than raw or qcow2, refused by `verify`)
   */
  fetch(id: string): Promise<CachedImage> {
    let p = this.inflight.get(id);
    if (!p) {
      p = this.load(id).finally(() => this.inflight.delete(id));
      this.inflight.set(id, p);
    }
    return p;
  }

  /**
   * Removes unused images last used `minAgeMs` ago or more, and dot-files no download is writing;
   * refreshes the mtime of the images in `inUse` (paths). Returns the paths removed.
   */
  async prune(inUse: ReadonlySet<string>): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.opts.dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const now = this.deps.clock.now();
    const removed: string[] = [];
    for (const name of names) {
      const path = join(this.opts.dir, name);
      const partial = PARTIAL.exec(name);
      const cached = CACHED.exec(name);
      const id = partial?.[1] ?? cached?.[1];
      if (id === undefined || this.inflight.has(id)) continue;
      if (partial) {
        await rm(path, { force: true });
        removed.push(path);
        continue;
      }
      if (inUse.has(path)) {
        await touch(path, now).catch(() => undefined);
        continue;
      }
      const st = await stat(path).catch(() => undefined);
      if (st && now - st.mtimeMs >= this.opts.minAgeMs) {
        await rm(path, { force: true });
        removed.push(path);
      }
    }
    if (removed.length > 0) this.deps.logger.info({ removed, dir: this.opts.dir }, 'image cache: unused images removed');
    return removed;
  }

  private async load(id: string): Promise<CachedImage> {
    const hit = await this.find(id);
    // A hit that `prune` removes between the stat and the touch is downloaded again.
    if (hit && (await touch(hit.path, this.deps.clock.now()).then(() => true, () => false))) return hit;
    const image = await this.glance(id, () => this.deps.glance.getImage(id));
    if (image.status !== 'active') throw new ImageError(id, `Glance image status is ${image.status}, not active`);
    const format = FORMATS.find((f) => f === image.diskFormat);
    if (!format) throw new ImageError(id, `disk_format ${image.diskFormat ?? '(none)'} is not supported (raw or qcow2)`);
    const check = expectedHash(image);
    if (!check) this.deps.logger.warn({ image: id }, 'Glance gives no checksum for this image; its data is not verified');
    await mkdir(this.opts.dir, { recursive: true, mode: 0o755 });
    const path = join(this.opts.dir, `${id}.${format}`);
    const part = join(this.opts.dir, `.${id}.${randomBytes(6).toString('hex')}.part`);
    const started = this.deps.clock.now();
    try {
      this.downloadCount++;
      const data = await this.glance(id, () => this.deps.glance.openImageData(id));
      const hash = check ? createHash(check.algorithm) : undefined;
      let bytes = 0;
      const meter = new Transform({
        transform(chunk: Buffer, _enc, done): void {
          bytes += chunk.length;
          hash?.update(chunk);
          done(null, chunk);
        },
      });
      await pipeline(data.stream, meter, createWriteStream(part, { flags: 'wx', mode: 0o644 })).catch((e: unknown) => {
        throw new ImageDownloadError(id, `download from Glance failed after ${bytes} bytes: ${errText(e)}`, { cause: e });
      });
      if (image.size !== null && bytes !== image.size) throw new ImageError(id, `size mismatch (Glance says ${image.size} bytes, got ${bytes})`);
      if (check && hash) verifyHash(id, check, hash);
      await syncFile(part);
      await this.deps.verify?.(id, part, format);
      await touch(part, this.deps.clock.now());
      await rename(part, path);
      await fsyncDir(this.opts.dir);
      const ms = this.deps.clock.now() - started;
      this.deps.logger.info({ image: id, bytes, format, ms, hash: check?.glanceName ?? null }, 'image downloaded from Glance');
      return { id, path, format };
    } catch (e) {
      await rm(part, { force: true });
      throw e;
    }
  }

  private async find(id: string): Promise<CachedImage | undefined> {
    for (const format of FORMATS) {
      const path = join(this.opts.dir, `${id}.${format}`);
      const st = await stat(path).catch(() => undefined);
      if (st?.isFile()) return { id, path, format };
    }
    return undefined;
  }

  /** Runs a Glance call, turning its failure into an ImageDownloadError naming the image. */
  private async glance<T>(id: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (e) {
      if (e instanceof GlanceError) throw new ImageDownloadError(id, e.message, { cause: e });
      throw e;
    }
  }
}

interface HashCheck {
  /** Glance's name (`sha512`, `sha3_512`, `md5`). */
  readonly glanceName: string;
  /** node's name. */
  readonly algorithm: string;
  readonly expected: string;
}

/** The hash to check: the multihash when node knows its algorithm, else the md5 checksum. */
function expectedHash(image: GlanceImage): HashCheck | undefined {
  if (image.osHashAlgo && image.osHashValue) {
    const algorithm = image.osHashAlgo.toLowerCase().replace(/_/g, '-');
    if (getHashes().includes(algorithm)) return { glanceName: image.osHashAlgo, algorithm, expected: image.osHashValue.toLowerCase() };
  }
  if (image.checksum) return { glanceName: 'md5', algorithm: 'md5', expected: image.checksum.toLowerCase() };
  return undefined;
}

function verifyHash(id: string, check: HashCheck, hash: Hash): void {
  const actual = hash.digest('hex');
  if (actual !== check.expected) throw new ImageChecksumError(id, check.glanceName, check.expected, actual);
}

async function syncFile(path: string): Promise<void> {
  const fh = await open(path, 'r+');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function touch(path: string, nowMs: number): Promise<void> {
  const t = nowMs / 1000;
  await utimes(path, t, t);
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
