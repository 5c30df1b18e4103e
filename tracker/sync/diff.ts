/**
 * Pure comparisons for the sync: what the driver wants against what Placement holds, with the
 * ownership rule that the agent changes only what it put there.
 */
import type { FullInventoryRecord, Inventories } from '../../model/provider-types';
import { resolveInventory } from '../../model/provider-types';

/** Initial allocation ratios by resource class, for classes Placement does not have yet. */
export type InitialRatios = Readonly<Record<string, number>>;

/**
 * The full records to write: the driver's records with Placement's defaults filled in, and an
 * absent `allocation_ratio` taken from Placement's current record (an operator's choice) or, for a
 * class Placement does not have, from the initial ratios.
 */
export function resolveInventories(
  desired: Inventories,
  current: Readonly<Record<string, FullInventoryRecord>> | undefined,
  initial: InitialRatios,
): Record<string, FullInventoryRecord> {
  const out: Record<string, FullInventoryRecord> = {};
  for (const [rc, rec] of Object.entries(desired)) {
    out[rc] = resolveInventory(rec, current?.[rc], initial[rc] ?? 1.0);
  }
  return out;
}

export function sameFullInventories(
  a: Readonly<Record<string, FullInventoryRecord>>,
  b: Readonly<Record<string, FullInventoryRecord>>,
): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((rc) => {
    const x = a[rc];
    const y = b[rc];
    return (
      x !== undefined &&
      y !== undefined &&
      x.total === y.total &&
      x.reserved === y.reserved &&
      x.min_unit === y.min_unit &&
      x.max_unit === y.max_unit &&
      x.step_size === y.step_size &&
      Math.abs(x.allocation_ratio - y.allocation_ratio) < 1e-9
    );
  });
}

/**
 * The set to write when the agent owns `owned` (what it wrote before) and now wants `desired`:
 * everything currently there that the agent did not own stays; what the agent owned but no longer
 * wants goes; what it wants is added. Sorted.
 */
export function mergeOwned(current: readonly string[], owned: readonly string[], desired: readonly string[]): string[] {
  const want = new Set(desired);
  const drop = new Set(owned.filter((x) => !want.has(x)));
  const out = new Set(current.filter((x) => !drop.has(x)));
  for (const x of desired) out.add(x);
  return [...out].sort();
}

export function sameSet(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((x) => s.has(x));
}
