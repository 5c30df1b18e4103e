/**
 * Writing one provider's inventories, traits and aggregates, each only when it differs from what
 * Placement holds, each carrying the generation it was computed from.
 *
 * On a 409 `concurrent_update` (someone wrote to the provider since we read it: after a scheduler
 * claim this is routine, not an incident) only the aspect being written is re-read and the write
 * recomputed and redone, a bounded number of times with a small random pause.
 */
import {
  InventoryInUseError,
  ProviderGenerationConflictError,
} from '../placement/errors';
import type { FullInventoryRecord, ProviderSnapshot } from '../../model/provider-types';
import { conflictPause, freshAspect, readAspect, SyncError, type SyncContext } from './context';
import { mergeOwned, resolveInventories, sameFullInventories, sameSet } from './diff';

async function withConflictRetry(
  ctx: SyncContext,
  uuid: string,
  what: string,
  attempt: (n: number) => Promise<boolean>,
): Promise<void> {
  for (let n = 1; n <= ctx.conflictAttempts; n++) {
    try {
      if (await attempt(n)) return;
    } catch (e) {
      if (!(e instanceof ProviderGenerationConflictError)) throw e;
      ctx.stats.conflicts++;
      ctx.logger.debug({ provider: uuid, what, attempt: n }, 'generation moved under us; re-reading and redoing the write');
      if (n === ctx.conflictAttempts) {
        throw new SyncError(`${what} of provider ${uuid}: still conflicting after ${n} attempts`, { cause: e });
      }
      await conflictPause(ctx, n);
    }
  }
}

/** Makes Placement's inventories of `want.uuid` equal the driver's. */
export async function syncInventories(ctx: SyncContext, want: ProviderSnapshot): Promise<void> {
  const uuid = want.uuid;
  // Classes Placement refused to drop because they are still allocated; kept until they drain.
  const keep = new Set<string>();
  await withConflictRetry(ctx, uuid, 'inventories', async (n) => {
    const compute = (current: Readonly<Record<string, FullInventoryRecord>>): Record<string, FullInventoryRecord> => {
      const next = resolveInventories(want.inventories, current, ctx.initialRatios);
      for (const rc of keep) {
        const rec = current[rc];
        if (rec && !next[rc]) next[rc] = rec;
      }
      return next;
    };
    // Decide from what is known, even if a claim moved the generation since: no write, no read.
    const known = n === 1 ? ctx.view.known(uuid, 'inventories') : undefined;
    if (known && sameFullInventories(compute(known), known)) return true;
    const current = n === 1 ? await freshAspect(ctx, uuid, 'inventories') : await readAspect(ctx, uuid, 'inventories');
    const next = compute(current);
    if (sameFullInventories(next, current)) return true;
    const gen = ctx.view.get(uuid)?.generation ?? 0;
    try {
      const to = await ctx.sink.putInventories(uuid, gen, next);
      ctx.stats.writes++;
      ctx.view.setWritten(uuid, 'inventories', gen, to, next);
      return true;
    } catch (e) {
      if (!(e instanceof InventoryInUseError) || keep.size > 0) throw e;
      const used = await readAspect(ctx, uuid, 'allocations');
      for (const resources of Object.values(used)) {
        for (const [rc, amount] of Object.entries(resources)) if (amount > 0 && !next[rc] && current[rc]) keep.add(rc);
      }
      if (keep.size === 0) throw e;
      ctx.problems.push({
        provider: uuid,
        message: `kept ${[...keep].join(', ')} on ${want.name}: the driver no longer reports it, but it is still allocated`,
      });
      return false;
    }
  });
}

/**
 * Traits or aggregates: the agent adds what the driver wants and removes only what it added
 * before; what others added stays.
 */
export async function syncOwnedSet(ctx: SyncContext, kind: 'traits' | 'aggregates', want: ProviderSnapshot): Promise<void> {
  const uuid = want.uuid;
  const desired = want[kind];
  await withConflictRetry(ctx, uuid, kind, async (n) => {
    const owned = ctx.ownership.owned(kind, uuid);
    // Decide from what is known; re-read (if stale) only when a write is needed.
    const known = n === 1 ? ctx.view.known(uuid, kind) : undefined;
    const current =
      known && sameSet(mergeOwned(known, owned, desired), known)
        ? known
        : n === 1
          ? await freshAspect(ctx, uuid, kind)
          : await readAspect(ctx, uuid, kind);
    const next = mergeOwned(current, owned, desired);
    // We own what we wanted and either owned already or are adding now; not what someone else put there first.
    const nextOwned = desired.filter((x) => owned.includes(x) || !current.includes(x));
    if (!sameSet(next, current)) {
      const gen = ctx.view.get(uuid)?.generation ?? 0;
      const to = kind === 'traits' ? await ctx.sink.putTraits(uuid, gen, next) : await ctx.sink.putAggregates(uuid, gen, next);
      ctx.stats.writes++;
      ctx.view.setWritten(uuid, kind, gen, to, next);
    }
    if (!ctx.sink.dryRun) ctx.ownership.setOwned(kind, uuid, nextOwned);
    return true;
  });
}
