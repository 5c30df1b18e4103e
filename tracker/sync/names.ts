/**
 * Resource classes and traits must exist in Placement before a provider can use them. Custom ones
 * (`CUSTOM_*`) are created, once per agent process (nova re-PUTs a class for every provider that
 * uses it: 56 requests for one MIG class on a 70-provider host). Standard ones come with Placement's
 * os-traits and os-resource-classes; a standard trait this Placement does not know (a driver built
 * against newer os-traits) is dropped from the write with a warning, so one unknown name does not
 * make Placement refuse the provider's whole trait list.
 */
import type { ProviderSnapshot } from '../../model/provider-types';
import { CUSTOM_NAME } from '../../model/provider-types';
import type { SyncContext } from './context';

/** Names known to exist in Placement; lives as long as the agent process. */
export class KnownNames {
  readonly classes = new Set<string>();
  readonly traits = new Set<string>();
  readonly missingStandardTraits = new Set<string>();
  /** Forget everything (SIGHUP, or Placement was replaced). */
  clear(): void {
    this.classes.clear();
    this.traits.clear();
    this.missingStandardTraits.clear();
  }
}

/**
 * Ensures every custom class and trait the desired providers use exists, and returns the standard
 * traits Placement does not know (to be left out of trait writes).
 */
export async function ensureNames(ctx: SyncContext, known: KnownNames, desired: readonly ProviderSnapshot[]): Promise<Set<string>> {
  const classes = new Set<string>();
  const traits = new Set<string>();
  for (const p of desired) {
    for (const rc of Object.keys(p.inventories)) if (CUSTOM_NAME.test(rc)) classes.add(rc);
    for (const t of p.traits) traits.add(t);
  }
  for (const rc of classes) {
    if (known.classes.has(rc)) continue;
    await ctx.sink.ensureResourceClass(rc);
    ctx.stats.writes++;
    if (!ctx.sink.dryRun) known.classes.add(rc);
  }
  const unchecked = [...traits].filter((t) => !known.traits.has(t) && !known.missingStandardTraits.has(t)).sort();
  if (unchecked.length > 0) {
    ctx.stats.reads++;
    const existing = await ctx.api.existingTraits(unchecked);
    for (const t of unchecked) {
      if (existing.has(t)) {
        known.traits.add(t);
      } else if (CUSTOM_NAME.test(t)) {
        await ctx.sink.ensureTrait(t);
        ctx.stats.writes++;
        if (!ctx.sink.dryRun) known.traits.add(t);
      } else {
        known.missingStandardTraits.add(t);
        ctx.logger.warn({ trait: t }, 'Placement does not know this standard trait (older os-traits); it is left out');
      }
    }
  }
  return new Set([...traits].filter((t) => known.missingStandardTraits.has(t)));
}
