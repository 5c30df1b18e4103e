/**
 * A window of recently accepted request ids (`_unique_id`), bounded in size and age, optionally
 * persisted to a checkpoint file so duplicates are still recognised after a restart (a message
 * redelivered because the agent died before its ack reached the broker, or a sender re-publishing
 * after a reconnect).
 *
 * Writes are group-committed: `add` is synchronous and in memory; `flush` resolves once a write
 * containing every id added before the call is durable, and concurrent flushes share one write.
 * The file stays small (`maxEntries`, default 512 ids, about 30 KB): each write costs two fsyncs
 * and 1-3 ms here, so requests arriving together share it. 512 ids cover every message a
 * reconnect can redeliver (at most 3 x prefetch) with room for senders' re-publishes.
 *
 * Not here: the requests themselves (the journal keeps those).
 */
import type { Clock } from '../../lib/clock';
import { systemClock } from '../../lib/clock';
import { JsonCheckpoint } from '../../lib/checkpoint';

export const DEDUPE_WINDOW_FILE = 'rpc-dedupe-window.json';
const KIND = 'compute-agent/rpc-dedupe-window';
const VERSION = 1;

interface WindowData {
  readonly entries: ReadonlyArray<readonly [string, number]>;
}

function validate(data: unknown): WindowData | undefined {
  const d = data as { entries?: unknown };
  if (typeof data !== 'object' || data === null || !Array.isArray(d.entries)) return undefined;
  for (const e of d.entries) {
    if (!Array.isArray(e) || e.length !== 2 || typeof e[0] !== 'string' || typeof e[1] !== 'number') return undefined;
  }
  return data as WindowData;
}

export interface DedupeWindowOptions {
  /** The checkpoint file; omit for a memory-only window. */
  readonly path?: string;
  readonly maxEntries?: number;
  readonly maxAgeMs?: number;
  readonly clock?: Clock;
}

/**
 * Ownership: one per journal. Concurrency: `add`/`has`/`delete` are synchronous; `flush` may be
 * called concurrently (writes never overlap).
 */
export class DedupeWindow {
  private readonly ids = new Map<string, number>();
  private readonly file: JsonCheckpoint<WindowData> | undefined;
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private readonly clock: Clock;
  private version = 0;
  private durableVersion = 0;
  private writing: Promise<void> | undefined;

  constructor(opts: DedupeWindowOptions = {}) {
    this.file = opts.path ? new JsonCheckpoint(opts.path, KIND, VERSION, validate) : undefined;
    this.maxEntries = opts.maxEntries ?? 512;
    this.maxAgeMs = opts.maxAgeMs ?? 3600_000;
    this.clock = opts.clock ?? systemClock;
  }

  get size(): number {
    return this.ids.size;
  }

  /**
   * Loads the persisted window. A missing file is an empty window.
   * @throws CheckpointCorruptError or CheckpointIoError; the window is then empty and usable.
   */
  async load(): Promise<void> {
    if (!this.file) return;
    const data = await this.file.read();
    for (const [id, at] of data?.entries ?? []) this.ids.set(id, at);
    this.prune();
  }

  has(id: string): boolean {
    const at = this.ids.get(id);
    return at !== undefined && this.clock.now() - at <= this.maxAgeMs;
  }

  add(id: string): void {
    this.ids.delete(id);
    this.ids.set(id, this.clock.now());
    this.prune();
    this.version++;
  }

  delete(id: string): void {
    if (this.ids.delete(id)) this.version++;
  }

  /** Makes every change made so far durable. @throws CheckpointIoError */
  async flush(): Promise<void> {
    if (!this.file) return;
    const wanted = this.version;
    while (this.durableVersion < wanted) {
      if (this.writing) {
        await this.writing.catch(() => undefined);
        continue;
      }
      const snapshot = this.version;
      const entries = [...this.ids.entries()];
      this.writing = this.file.write({ entries }).then(() => {
        this.durableVersion = Math.max(this.durableVersion, snapshot);
      });
      try {
        await this.writing;
      } finally {
        this.writing = undefined;
      }
    }
  }

  private prune(): void {
    const oldest = this.clock.now() - this.maxAgeMs;
    for (const [id, at] of this.ids) {
      if (this.ids.size <= this.maxEntries && at >= oldest) break;
      this.ids.delete(id);
    }
  }
}
