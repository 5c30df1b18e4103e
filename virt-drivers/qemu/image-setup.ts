/**
 * How the qemu driver gets its images: the `Images` helper, with the Glance image cache when
 * Glance is configured (the agent's keystone auth, or `[glance] endpoint_override`), and the cache
 * manager, the periodic task that removes unused cached images (`[image_cache] manager_interval`).
 *
 * It is: construction and the timer. It is not: the cache (`image-cache.ts`) or the client
 * (`../glance/`).
 */
import type { Clock } from '../../lib/clock';
import type { Logger } from '../../lib/logging/logger';
import type { GlanceApi, GlanceAuth } from '../glance/api';
import { StaticGlanceAuth } from '../glance/api';
import { GlanceHttpClient } from '../glance/http';
import { ImageCache } from './image-cache';
import { Images } from './images';
import type { QemuOptions } from './options';
import type { Exec } from '../host/exec';

export interface ImageParts {
  readonly images: Images;
  /** Absent when Glance is not configured: image refs are local files only. */
  readonly cache: ImageCache | undefined;
}

/** The driver's `Images`, with a Glance cache when `glance` or `auth` or `[glance] endpoint_override` gives one. */
export function buildImages(opts: QemuOptions, deps: { exec: Exec; clock: Clock; log: Logger; glance?: GlanceApi; glanceAuth?: GlanceAuth }): ImageParts {
  const imgOpts = { qemuImg: opts.qemuImg, ...(opts.imagesPath ? { imagesPath: opts.imagesPath } : {}) };
  const auth = deps.glanceAuth ?? (opts.glance.endpointOverride ? new StaticGlanceAuth(opts.glance.endpointOverride) : undefined);
  const glance = deps.glance ?? (auth ? new GlanceHttpClient({ auth, numRetries: opts.glance.numRetries, timeoutMs: opts.glance.timeoutMs, clock: deps.clock }) : undefined);
  if (!glance) return { images: new Images(imgOpts, deps.exec), cache: undefined };
  // The cache checks each download with qemu-img before it enters the cache; Images reads the cache.
  const holder: { images?: Images } = {};
  const cache = new ImageCache(
    { dir: opts.imageCache.dir, minAgeMs: opts.imageCache.minAgeMs },
    { glance, clock: deps.clock, logger: deps.log, verify: (id, path, format) => (holder.images as Images).checkDownloaded(id, path, format) },
  );
  holder.images = new Images(imgOpts, deps.exec, cache);
  return { images: holder.images, cache };
}

/** Runs `cache.prune` every `intervalMs` with the images the instances use; one run at a time. */
export class CacheManager {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly cache: ImageCache,
    private readonly inUse: () => ReadonlySet<string>,
    private readonly log: Logger,
  ) {}

  start(intervalMs: number): void {
    this.stop();
    this.timer = setInterval(() => void this.runOnce(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One pass; a pass already running is awaited instead of starting another. */
  runOnce(): Promise<void> {
    this.running ??= this.cache
      .prune(this.inUse())
      .then(() => undefined)
      .catch((e: unknown) => this.log.warn({ err: e instanceof Error ? e.message : String(e), dir: this.cache.dir }, 'image cache manager pass failed'))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }
}
