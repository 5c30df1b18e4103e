/**
 * Work this host owes a service that did not answer: recorded durably (one record per item, under
 * its own kind in the journal's store) before the caller goes on as if it were done, removed only
 * once the service took it, and retried by a background drain with capped backoff, without a
 * deadline, until none is left. The drain survives restarts because it starts again from the
 * records. Each item's action must be idempotent: an item may be tried twice (a crash between the
 * service's answer and the record's removal).
 *
 * It is not: an operation with a deadline (the claim service's outage retry), nor a queue with an
 * order: items are independent and tried in the store's order. Its users: `removals.ts`
 * (allocations of deleted instances, owed to Placement) and `attachment-deletes.ts` (Cinder
 * attachments the guest no longer uses).
 */
import { backoffDelay, type BackoffPolicy } from '../../lib/backoff';
import { systemClock, type Clock } from '../../lib/clock';
import type { Logger } from '../../lib/logging/logger';
import type { RecordStore } from './ports';

/** What an item's action decided. */
export type OwedOutcome = 'done' | 'retry' | 'dropped';

export interface OwedWorkDeps<T> {
  readonly store: RecordStore;
  /** The record kind the items are stored under. */
  readonly kind: string;
  /**
   * Does one item. Resolves 'done' (the record goes), 'dropped' (the service refused it for good:
   * the action logged what an operator must do; the record goes) or 'retry' (the record stays).
   * A throw counts as 'retry' and is logged with `failed`.
   */
  readonly act: (key: string, item: T, requestId?: string) => Promise<OwedOutcome>;
  readonly log: Logger;
  /** The log lines: `failed` (warn, with the reason) and `done` (info). */
  readonly messages: { readonly failed: string; readonly done: string };
  /** The field the item's key is logged under. */
  readonly keyField: string;
  readonly clock?: Clock;
  /** Between drain passes while items are left. */
  readonly backoff?: BackoffPolicy;
}

/** 1 s doubling to 10 s: items finish within about 10 s of the service's return. */
export const OWED_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 10000, jitter: 0.3 };

export class OwedWork<T> {
  protected readonly clock: Clock;
  private draining: Promise<void> | undefined;
  private again = false;
  private readonly stopped = new AbortController();

  constructor(private readonly deps: OwedWorkDeps<T>) {
    this.clock = deps.clock ?? systemClock;
  }

  /** The keys of the items owed. */
  pending(): string[] {
    return this.deps.store.list<T>(this.deps.kind).map(([key]) => key);
  }

  /** The items owed, with their keys. */
  items(): Array<[string, T]> {
    return this.deps.store.list<T>(this.deps.kind);
  }

  /** The item owed under `key`, if any. */
  owed(key: string): T | undefined {
    return this.deps.store.get<T>(this.deps.kind, key);
  }

  /** Records that `item` is owed under `key`; durable when it resolves. */
  owe(key: string, item: T): Promise<void> {
    return this.deps.store.put(this.deps.kind, key, item);
  }

  /**
   * Tries `keys` once now; what is left goes to the background drain, which this starts.
   * Never throws. @returns the keys still owed
   */
  async tryNow(keys: readonly string[], requestId?: string): Promise<string[]> {
    for (const key of keys) await this.doOne(key, requestId);
    this.start();
    const left = new Set(this.pending());
    return keys.filter((k) => left.has(k));
  }

  /** One pass over every item owed. @returns how many are left */
  async drainOnce(): Promise<number> {
    for (const key of this.pending()) await this.doOne(key);
    return this.pending().length;
  }

  /** Starts the background drain when items are owed (recovery, and after each `tryNow`). */
  start(): void {
    if (this.stopped.signal.aborted || this.pending().length === 0) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      if (this.again) {
        this.again = false;
        this.start();
      }
    });
  }

  /** Stops the drain (shutdown); what is owed stays recorded for the next start. */
  async stop(): Promise<void> {
    this.stopped.abort();
    await this.draining;
  }

  /** Resolves once no drain is running (tests). */
  async settle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    for (let pass = 1; !this.stopped.signal.aborted; pass++) {
      const delay = backoffDelay(pass, this.deps.backoff ?? OWED_BACKOFF);
      try {
        await this.clock.sleep(delay, this.stopped.signal);
      } catch {
        return; // stopped
      }
      if ((await this.drainOnce()) === 0) return;
    }
  }

  /** Does one item; when it is done (or dropped) its record goes. Never throws. */
  private async doOne(key: string, requestId?: string): Promise<void> {
    const d = this.deps;
    const item = this.owed(key);
    if (item === undefined) return;
    let outcome: OwedOutcome;
    try {
      outcome = await d.act(key, item, requestId);
    } catch (e) {
      d.log.warn({ [d.keyField]: key, reason: e instanceof Error ? e.message : String(e) }, d.messages.failed);
      return;
    }
    if (outcome === 'retry') return;
    await d.store.del(d.kind, key);
    if (outcome === 'done') d.log.info({ [d.keyField]: key }, d.messages.done);
  }
}
