/**
 * A new host's inventories in one request. When the cycle's listing found none of this host's
 * providers, the sync creates every provider (parents first) and then writes every inventory in
 * one `POST /reshaper` with no allocations, instead of one `PUT .../inventories` per provider: 69
 * requests become one, and a scheduler sees the host's capacity all at once or not at all. Traits
 * and aggregates are then written by the per-provider path, only where a provider has them.
 *
 * The reshaper answers 204 without generations, so one listing follows. Placement's reshaper
 * replaces a provider's inventory twice in its transaction (an interim union with what was there,
 * then the final list), each a generation step; with no allocations nothing else moves it. A
 * provider listed exactly that many steps past the generation it was created at was written by
 * this request alone, so what the view knew of it (empty traits and aggregates, no allocations)
 * is still true at the new generation. Any other generation means someone else wrote to it in
 * between: its aspects are forgotten and the per-provider path reads what it needs.
 *
 * A refused reshape wrote nothing (one transaction): a 409 (someone wrote to a new provider
 * between its creation and the reshape), a 400 (a resource class Placement does not know) or a 403
 * (Placement 13's default rule, once its new policy defaults are enforced, lets only the `service`
 * role reshape, while inventory writes also take `admin`) falls back to the per-provider path,
 * which re-reads what moved and reports a refusal against the one provider it concerns, as for any
 * host. Placement unreachable ends the cycle like any other write; the next cycle finds the
 * providers and takes the per-provider path.
 *
 * Not here: a host some of whose providers exist (a restart, an adoption, a device added): the
 * per-provider path, which reads before it writes. Moves of inventory with allocations (`reshape.ts`).
 */
import type { ReshapeRequest } from '../placement/api';
import { PlacementError, PlacementUnavailableError } from '../placement/errors';
import type { ProviderSnapshot } from '../../model/provider-types';
import type { SyncContext } from './context';
import { resolveInventories } from './diff';

/** Generation steps Placement's reshaper makes on a provider whose inventory list is not empty, when no allocation touches it. */
export const RESHAPER_INVENTORY_STEPS = 2;

type InventoryWrites = ReshapeRequest['inventories'];

/** The inventories to write: every provider the cycle created whose driver inventory is not empty. */
function inventoriesOf(ctx: SyncContext, wanted: readonly ProviderSnapshot[], created: ReadonlySet<string>): InventoryWrites {
  const out: Record<string, InventoryWrites[string]> = {};
  for (const p of wanted) {
    const have = ctx.view.get(p.uuid);
    if (!have || !created.has(p.uuid)) continue;
    const inventories = resolveInventories(p.inventories, undefined, ctx.initialRatios);
    if (Object.keys(inventories).length > 0) out[p.uuid] = { resource_provider_generation: have.generation, inventories };
  }
  return out;
}

/**
 * Writes the inventories of the providers created this cycle in one `POST /reshaper` and brings
 * the view up to date (through `relist`, one listing). Returns whether it did; false when there
 * was nothing to write or Placement refused, in which case nothing was written and the caller's
 * per-provider path does the work.
 * @throws PlacementUnavailableError (and any error that is not a Placement refusal)
 */
export async function registerInventories(
  ctx: SyncContext,
  wanted: readonly ProviderSnapshot[],
  created: ReadonlySet<string>,
  relist: () => Promise<void>,
): Promise<boolean> {
  const inventories = inventoriesOf(ctx, wanted, created);
  const providers = Object.keys(inventories);
  if (providers.length === 0) return false;
  try {
    await ctx.sink.reshape({ inventories, allocations: {} });
    ctx.stats.writes++;
  } catch (e) {
    if (!(e instanceof PlacementError) || e instanceof PlacementUnavailableError) throw e;
    ctx.logger.info({ providers: providers.length, reason: e.message }, 'first registration in one request refused; writing each provider on its own');
    // Nothing was written; a 409 says someone else wrote to a new provider: one listing shows
    // which, so the per-provider path re-reads only those.
    ctx.stats.reads++;
    await relist();
    return false;
  }
  ctx.logger.info({ providers: providers.length }, 'first registration: every inventory written in one transaction');
  if (ctx.sink.dryRun) {
    for (const uuid of providers) {
      const w = inventories[uuid];
      if (w) ctx.view.setWritten(uuid, 'inventories', w.resource_provider_generation, w.resource_provider_generation + RESHAPER_INVENTORY_STEPS, w.inventories);
    }
    return true;
  }
  ctx.stats.reads++;
  await relist();
  for (const uuid of providers) {
    const w = inventories[uuid];
    const listed = ctx.view.get(uuid)?.generation;
    if (!w) continue;
    if (listed === w.resource_provider_generation + RESHAPER_INVENTORY_STEPS) {
      ctx.view.setWritten(uuid, 'inventories', w.resource_provider_generation, listed, w.inventories);
    } else {
      ctx.logger.debug({ provider: uuid, created_at: w.resource_provider_generation, listed }, 'new provider changed by someone else too; re-read before its next write');
      ctx.view.invalidate(uuid);
    }
  }
  return true;
}
