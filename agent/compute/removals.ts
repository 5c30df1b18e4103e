/**
 * Allocation removals owed to Placement: the consumers of instances this host has deleted (and of
 * their migrations). A delete completes locally whether or not Placement answers; what it still
 * owes Placement is recorded here durably (record kind `allocation_removal`, in the journal's store)
 * BEFORE the instance's record is dropped, and removed only once `DELETE /allocations/{consumer}`
 * succeeded. A background drain retries with capped backoff, without a deadline, until every
 * removal is done; it survives restarts because it starts again from the records. `DELETE` is
 * idempotent (nothing held is success), so a removal tried twice is harmless.
 *
 * Contracts: `pending()` lists the consumers the audit must not call orphaned (their allocations
 * are on the way out). Nova never reuses an instance or migration uuid, so removing a consumer
 * later can only remove what the deleted instance held. It is not: the claim service's outage
 * retry (operations with a deadline, `tracker/claims/retry.ts`), nor removals of failed builds.
 */
import { backoffDelay, type BackoffPolicy } from '../../lib/backoff';
import { systemClock, type Clock } from '../../lib/clock';
import type { Logger } from '../../lib/logging/logger';
import type { ClaimService } from '../../tracker/claims/service';
import type { RecordStore } from './ports';

/** The record kind pending removals are stored under. */
export const ALLOCATION_REMOVAL = 'allocation_removal';

/** One pending removal, as stored. */
export interface PendingRemoval {
  readonly consumer: string;
  /** The instance whose delete owes it (the consumer itself, or the instance of a migration). */
  readonly instance: string;
  /** When the delete recorded it (ISO 8601). */
  readonly since: string;
}

export interface RemovalDeps {
  readonly store: RecordStore;
  readonly claims: Pick<ClaimService, 'forceDeleteOnce'>;
  readonly log: Logger;
  readonly clock?: Clock;
  /** Between drain passes while removals are left: 1 s doubling to 10 s, so they finish within ~10 s of Placement's return. */
  readonly backoff?: BackoffPolicy;
}

const DRAIN_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 10000, jitter: 0.3 };

export class AllocationRemovals {
  private readonly clock: Clock;
  private draining: Promise<void> | undefined;
  private again = false;
  private readonly stopped = new AbortController();

  constructor(private readonly deps: RemovalDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** Consumers whose removal is owed. */
  pending(): string[] {
    return this.deps.store.list<PendingRemoval>(ALLOCATION_REMOVAL).map(([consumer]) => consumer);
  }

  /** Records that `consumers` (of `instance`) must be removed; durable when it resolves. */
  async add(instance: string, consumers: readonly string[]): Promise<void> {
    const since = new Date(this.clock.now()).toISOString();
    for (const consumer of consumers) await this.deps.store.put(ALLOCATION_REMOVAL, consumer, { consumer, instance, since } satisfies PendingRemoval);
  }

  /**
   * Tries `consumers` once now; what fails is left to the background drain, which this starts.
   * Never throws.
   */
  async tryNow(consumers: readonly string[], requestId?: string): Promise<void> {
    for (const consumer of consumers) await this.removeOne(consumer, requestId);
    this.start();
  }

  /** One pass over every pending removal. @returns how many are left */
  async drainOnce(): Promise<number> {
    for (const consumer of this.pending()) await this.removeOne(consumer);
    return this.pending().length;
  }

  /** Starts the background drain when removals are pending (recovery, and after each delete). */
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

  /** Stops the drain (shutdown); what is pending stays recorded for the next start. */
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
      const delay = backoffDelay(pass, this.deps.backoff ?? DRAIN_BACKOFF);
      try {
        await this.clock.sleep(delay, this.stopped.signal);
      } catch {
        return; // stopped
      }
      if ((await this.drainOnce()) === 0) return;
    }
  }

  /** Removes one consumer's allocations; on success its record goes. Never throws. */
  private async removeOne(consumer: string, requestId?: string): Promise<void> {
    if (!this.deps.store.get<PendingRemoval>(ALLOCATION_REMOVAL, consumer)) return;
    try {
      await this.deps.claims.forceDeleteOnce(consumer, requestId);
    } catch (e) {
      this.deps.log.warn({ consumer, reason: (e as Error).message }, 'allocation removal of a deleted instance failed; retrying in the background');
      return;
    }
    await this.deps.store.del(ALLOCATION_REMOVAL, consumer);
    this.deps.log.info({ consumer }, 'allocations of a deleted instance removed');
  }
}
