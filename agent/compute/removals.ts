/**
 * Allocation removals owed to Placement: the consumers of instances this host has deleted (and of
 * their migrations). A delete completes locally whether or not Placement answers; what it still
 * owes Placement is recorded here durably (record kind `allocation_removal`, in the journal's store)
 * BEFORE the instance's record is dropped, and removed only once `DELETE /allocations/{consumer}`
 * succeeded. The background drain is `owed-work.ts`'s (capped backoff, no deadline, started again
 * from the records after a restart). `DELETE` is idempotent (nothing held is success), so a
 * removal tried twice is harmless.
 *
 * Contracts: `pending()` lists the consumers the audit must not call orphaned (their allocations
 * are on the way out). Nova never reuses an instance or migration uuid, so removing a consumer
 * later can only remove what the deleted instance held. It is not: the claim service's outage
 * retry (operations with a deadline, `tracker/claims/retry.ts`), nor removals of failed builds.
 */
import type { BackoffPolicy } from '../../lib/backoff';
import type { Clock } from '../../lib/clock';
import type { Logger } from '../../lib/logging/logger';
import type { ClaimService } from '../../tracker/claims/service';
import { OwedWork } from './owed-work';
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
  /** Between drain passes while removals are left (default `OWED_BACKOFF`: 1 s doubling to 10 s). */
  readonly backoff?: BackoffPolicy;
}

export class AllocationRemovals extends OwedWork<PendingRemoval> {
  constructor(deps: RemovalDeps) {
    super({
      store: deps.store,
      kind: ALLOCATION_REMOVAL,
      keyField: 'consumer',
      log: deps.log,
      messages: { failed: 'allocation removal of a deleted instance failed; retrying in the background', done: 'allocations of a deleted instance removed' },
      act: async (consumer, _item, requestId) => {
        await deps.claims.forceDeleteOnce(consumer, requestId);
        return 'done';
      },
      ...(deps.clock ? { clock: deps.clock } : {}),
      ...(deps.backoff ? { backoff: deps.backoff } : {}),
    });
  }

  /** Records that `consumers` (of `instance`) must be removed; durable when it resolves. */
  async add(instance: string, consumers: readonly string[]): Promise<void> {
    const since = new Date(this.clock.now()).toISOString();
    for (const consumer of consumers) await this.owe(consumer, { consumer, instance, since });
  }
}
