/**
 * DurableJournal: the agent's record of what it was asked to do and how far it got, on disk in
 * `state_path/journal/`. It implements the RPC layer's `RequestJournal` (a request is fsync'd
 * before its message is acknowledged) and gives the compute manager a durable key/value store for
 * instance and operation records, written before each side effect.
 *
 * Recovery (`open`): the snapshot plus the log after it rebuild the open requests (accepted, not
 * completed: the manager finishes or rolls them back), the de-duplication window (recently
 * completed `_unique_id`s, bounded in count and age), and the stored records.
 *
 * Concurrency: one instance per process; methods may be called concurrently. State in memory
 * changes only after the record is on disk, so what the agent acts on is always recoverable.
 */
import { join } from 'node:path';
import type { Logger } from '../../lib/logging/logger';
import { RecordLog } from './log';
import { crashPoint } from '../crash-points';
import { JournalError, type AcceptResult, type JournalRequest, type RequestJournal, type RequestOutcome } from './types';

interface OpenEntry {
  readonly request: JournalRequest;
  readonly acceptedAt: number;
}

interface State {
  open: Record<string, OpenEntry>;
  /** uniqueId -> completed at (ms) */
  recent: Record<string, number>;
  kv: Record<string, Record<string, unknown>>;
}

function isState(d: unknown): d is State {
  if (typeof d !== 'object' || d === null) return false;
  const s = d as Record<string, unknown>;
  return [s.open, s.recent, s.kv].every((x) => typeof x === 'object' && x !== null);
}

export interface DurableJournalOptions {
  readonly logger: Logger;
  readonly now?: () => number;
  /** Completed ids remembered for de-duplication. */
  readonly windowSize?: number;
  readonly windowMaxAgeMs?: number;
  /** Records between compactions. */
  readonly compactEvery?: number;
}

export class DurableJournal implements RequestJournal {
  private state: State = { open: {}, recent: {}, kv: {} };
  private readonly log: RecordLog<State>;
  private readonly now: () => number;
  private compacting: Promise<void> | undefined;

  private constructor(
    dir: string,
    private readonly opts: DurableJournalOptions,
  ) {
    this.log = new RecordLog<State>(dir, isState);
    this.now = opts.now ?? Date.now;
  }

  /** Opens (and recovers) the journal in `<statePath>/journal`. @throws CheckpointCorruptError */
  static async open(statePath: string, opts: DurableJournalOptions): Promise<DurableJournal> {
    const j = new DurableJournal(join(statePath, 'journal'), opts);
    const replay = await j.log.open();
    if (replay.snapshot) j.state = replay.snapshot;
    for (const r of replay.records) j.apply(r.k, r.d);
    for (const p of replay.problems) opts.logger.warn({ problem: p }, 'journal recovery');
    opts.logger.info(
      { open_requests: Object.keys(j.state.open).length, records: Object.values(j.state.kv).reduce((n, m) => n + Object.keys(m).length, 0) },
      'journal recovered',
    );
    return j;
  }

  private apply(kind: string, d: unknown): void {
    const x = d as Record<string, unknown>;
    switch (kind) {
      case 'accept': {
        const e = x as unknown as OpenEntry;
        this.state.open[e.request.uniqueId] = e;
        break;
      }
      case 'complete': {
        const id = String(x.id);
        delete this.state.open[id];
        this.state.recent[id] = Number(x.at);
        break;
      }
      case 'put': {
        const bucket = (this.state.kv[String(x.kind)] ??= {});
        bucket[String(x.key)] = x.value;
        break;
      }
      case 'del':
        delete this.state.kv[String(x.kind)]?.[String(x.key)];
        break;
      default:
        this.opts.logger.warn({ kind }, 'journal: unknown record kind ignored');
    }
  }

  private async write(kind: string, data: unknown): Promise<void> {
    try {
      await this.log.append(kind, data);
    } catch (e) {
      throw new JournalError(`journal write failed: ${(e as Error).message}`, { cause: e });
    }
    this.apply(kind, data);
    if (this.log.uncompacted >= (this.opts.compactEvery ?? 2000) && !this.compacting) {
      this.compacting = this.log
        .compact(() => this.trimmed())
        .catch((e: unknown) => this.opts.logger.warn({ reason: (e as Error).message }, 'journal compaction failed; the log keeps growing until the next try'))
        .finally(() => {
          this.compacting = undefined;
        });
    }
  }

  /** The state with the de-duplication window trimmed to its bounds. */
  private trimmed(): State {
    const maxAge = this.opts.windowMaxAgeMs ?? 24 * 3600 * 1000;
    const size = this.opts.windowSize ?? 10000;
    const recent = Object.entries(this.state.recent)
      .filter(([, at]) => this.now() - at <= maxAge)
      .sort((a, b) => b[1] - a[1])
      .slice(0, size);
    this.state.recent = Object.fromEntries(recent);
    return this.state;
  }

  async accept(request: JournalRequest): Promise<AcceptResult> {
    const id = request.uniqueId;
    if (this.state.open[id] || this.state.recent[id] !== undefined) return 'duplicate';
    await this.write('accept', { request, acceptedAt: this.now() });
    crashPoint('journal.accepted');
    return 'new';
  }

  async complete(uniqueId: string, outcome: RequestOutcome): Promise<void> {
    if (!this.state.open[uniqueId]) return;
    await this.write('complete', { id: uniqueId, outcome, at: this.now() });
    crashPoint('journal.completed');
  }

  /** Accepted requests not completed, oldest first: what recovery must finish or roll back. */
  pending(): JournalRequest[] {
    return Object.values(this.state.open)
      .sort((a, b) => a.acceptedAt - b.acceptedAt)
      .map((e) => e.request);
  }

  /** Stores `value` under (kind, key) durably before resolving. */
  put(kind: string, key: string, value: unknown): Promise<void> {
    return this.write('put', { kind, key, value });
  }

  async del(kind: string, key: string): Promise<void> {
    if (this.state.kv[kind]?.[key] === undefined) return;
    await this.write('del', { kind, key });
  }

  get<T>(kind: string, key: string): T | undefined {
    return this.state.kv[kind]?.[key] as T | undefined;
  }

  list<T>(kind: string): Array<[string, T]> {
    return Object.entries(this.state.kv[kind] ?? {}) as Array<[string, T]>;
  }

  /** Forces a compaction now (tests, shutdown). */
  async compactNow(): Promise<void> {
    await this.compacting;
    await this.log.compact(() => this.trimmed());
  }

  async close(): Promise<void> {
    await this.compacting;
    await this.log.close();
  }
}
