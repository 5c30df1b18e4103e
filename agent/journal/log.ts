/**
 * An append-only, fsync'd record log with group commit, and atomic checksummed snapshots for
 * compaction. The durable journal (`durable.ts`) is built on it.
 *
 * Why a log and not SQLite: Node 20 has no `node:sqlite`, and better-sqlite3 is a native add-on
 * that would compile on every host (`docs/dependencies.md#journal-storage`); the state is small
 * (open requests, instances of one host) and only ever read whole at start-up. A log gives one
 * fsync per batch of concurrent writers (group commit), which is what a burst of 200 casts needs.
 *
 * Format: one JSON object per line, `{"s": seq, "k": kind, "d": data, "c": crc32}`, the CRC over
 * the line without its `c` field. A snapshot (`snapshot.json`, a versioned, checksummed checkpoint)
 * holds the folded state up to a sequence number; records at or below it are skipped on replay.
 * Recovery drops a torn last line (a crash mid-write) and reports, but skips, a corrupt line
 * elsewhere. Compaction writes the snapshot first, then atomically replaces the log with an empty
 * one, so a crash between the two only replays records the snapshot already holds.
 *
 * Not synchronized across processes: one agent owns one state directory.
 */
import { constants } from 'node:fs';
import { mkdir, open, readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir, writeFileAtomic } from '../../lib/atomic-file';
import { readCheckpoint, writeCheckpoint, type CheckpointSpec } from '../../lib/checkpoint';
import { crc32 } from '../../lib/crc32';

export interface LogRecord {
  readonly s: number;
  readonly k: string;
  readonly d: unknown;
}

export interface Replay<S> {
  readonly snapshot: S | undefined;
  readonly records: readonly LogRecord[];
  /** Problems met while reading (a torn tail, a corrupt line), for the log. */
  readonly problems: readonly string[];
}

/** The log could not be written or made durable. */
export class LogWriteError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LogWriteError';
  }
}

function encode(r: LogRecord): string {
  const body = JSON.stringify({ s: r.s, k: r.k, d: r.d });
  return `${body.slice(0, -1)},"c":${crc32(body)}}\n`;
}

function decode(line: string): LogRecord | undefined {
  let o: { s?: unknown; k?: unknown; d?: unknown; c?: unknown };
  try {
    o = JSON.parse(line) as typeof o;
  } catch {
    return undefined;
  }
  if (typeof o.s !== 'number' || typeof o.k !== 'string') return undefined;
  return o.c === crc32(JSON.stringify({ s: o.s, k: o.k, d: o.d })) ? { s: o.s, k: o.k, d: o.d } : undefined;
}

export class RecordLog<S> {
  private fh: FileHandle | undefined;
  private seq = 0;
  /** The last sequence number known to be on disk. */
  private durableSeq = 0;
  private queue: Array<{ s: number; line: string; resolve: () => void; reject: (e: Error) => void }> = [];
  /** All disk work (batches, compaction) runs on this chain, one step at a time. */
  private chain: Promise<void> = Promise.resolve();
  private flushScheduled = false;
  private closed = true;
  private sinceSnapshot = 0;
  /** fsyncs made (one per batch): appends / flushes is the group-commit factor. */
  flushes = 0;
  private readonly logPath: string;
  private readonly spec: CheckpointSpec<{ seq: number; state: S }>;

  constructor(
    private readonly dir: string,
    validate: (state: unknown) => state is S,
  ) {
    this.logPath = join(dir, 'journal.log');
    this.spec = {
      path: join(dir, 'snapshot.json'),
      kind: 'compute-agent/journal-snapshot',
      version: 1,
      validate: (d: unknown): d is { seq: number; state: S } =>
        typeof d === 'object' && d !== null && typeof (d as { seq?: unknown }).seq === 'number' && validate((d as { state?: unknown }).state),
    };
  }

  /** Records appended since the last snapshot (a compaction hint). */
  get uncompacted(): number {
    return this.sinceSnapshot;
  }

  /**
   * Reads the snapshot and the records after it, then opens the log for appending.
   * @throws CheckpointCorruptError when the snapshot exists but fails its checks
   */
  async open(): Promise<Replay<S>> {
    await mkdir(this.dir, { recursive: true, mode: 0o750 });
    const snap = await readCheckpoint(this.spec);
    this.seq = snap?.seq ?? 0;
    const problems: string[] = [];
    const records: LogRecord[] = [];
    let text = '';
    try {
      text = await readFile(this.logPath, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    const lines = text.split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    lines.forEach((line, i) => {
      if (line === '') return;
      const r = decode(line);
      if (!r) {
        problems.push(i === lines.length - 1 ? `dropped a torn last record (line ${i + 1})` : `skipped a corrupt record at line ${i + 1}`);
        return;
      }
      if (r.s <= (snap?.seq ?? 0)) return;
      records.push(r);
      this.seq = Math.max(this.seq, r.s);
    });
    this.durableSeq = this.seq;
    this.sinceSnapshot = records.length;
    // A torn tail must not stay in front of new appends: rewrite the log with the good records.
    if (problems.length > 0) await writeFileAtomic(this.logPath, records.map(encode).join(''), 0o600);
    this.fh = await open(this.logPath, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o600);
    this.closed = false;
    return { snapshot: snap?.state, records, problems };
  }

  /**
   * Appends one record; resolves with its sequence number once it is on disk. Concurrent appends
   * share one write and one fsync (group commit).
   * @throws LogWriteError
   */
  append(kind: string, data: unknown): Promise<number> {
    if (this.closed) return Promise.reject(new LogWriteError('the journal is not open'));
    const s = ++this.seq;
    const line = encode({ s, k: kind, d: data });
    this.sinceSnapshot++;
    return new Promise<number>((resolve, reject) => {
      this.queue.push({ s, line, resolve: () => resolve(s), reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        this.chain = this.chain.then(() => this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    this.flushScheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    try {
      if (!this.fh) throw new LogWriteError('the journal is closed');
      await this.fh.write(batch.map((b) => b.line).join(''));
      await this.fh.datasync();
      this.flushes++;
      this.durableSeq = batch[batch.length - 1]?.s ?? this.durableSeq;
      for (const b of batch) b.resolve();
    } catch (e) {
      const err = e instanceof LogWriteError ? e : new LogWriteError(`journal write failed: ${(e as Error).message}`, { cause: e });
      for (const b of batch) b.reject(err);
    }
  }

  /**
   * Writes a snapshot and empties the log. `state` is asked for when the compaction runs, after
   * every earlier append is on disk and its waiter has run, so it holds exactly the records up to
   * the durable sequence number; appends queued meanwhile go to the fresh log.
   */
  compact(state: () => S): Promise<void> {
    const run = async (): Promise<void> => {
      const seq = this.durableSeq;
      await writeCheckpoint(this.spec, { seq, state: state() });
      await this.fh?.close();
      this.fh = undefined;
      await writeFileAtomic(this.logPath, '', 0o600);
      await fsyncDir(this.dir);
      this.fh = await open(this.logPath, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o600);
      this.sinceSnapshot = this.queue.length;
    };
    // A macrotask hop lets the waiters of the last batch apply their records first.
    const step = this.chain.then(() => new Promise<void>((r) => setImmediate(r))).then(run);
    this.chain = step.catch(() => undefined);
    return step;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.chain;
    await this.fh?.close();
    this.fh = undefined;
  }
}
