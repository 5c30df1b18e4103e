/**
 * The association refresh (`[compute] resource_provider_association_refresh`): how an outside
 * change to what this agent owns in Placement (an operator editing an inventory, removing one of
 * our traits or aggregates) is found, so that the cycle that follows repairs it.
 *
 * The cache decides from what it last read (`view.ts`), so a sync alone never notices such a
 * change. Nova's report client re-reads inventories, traits and aggregates of every provider once
 * the interval has passed (nova `scheduler/client/report.py` `_associations_stale`,
 * `_refresh_associations`: three reads per provider, 0 = read once and never again). Here the
 * cycle's opening `GET /resource_providers?in_tree=` already carries every provider's generation,
 * and Placement moves a provider's generation on every change to it; so a provider whose generation
 * still equals the one its aspects were read at cannot have drifted and costs nothing. Only the
 * aspects read at an older generation are re-read, and each provider at most once per interval: a
 * generation moved by a scheduler's claim looks the same as one moved by an operator, and claims
 * must not turn every cycle into re-reads.
 *
 * As in nova, the interval starts when the tracker first holds a provider (read at start, or just
 * created) and again at each re-read; so a change is found at the first cycle at least `refresh`
 * seconds after the previous read of that provider: within the interval when the cycle period
 * divides it, at worst one cycle later. A deleted child provider needs none of this: it is missing
 * from the listing and the sync creates it again.
 *
 * Not here: the repair itself (the sync writes what the driver wants over what was re-read, and the
 * ownership rules decide what it may remove); sharing providers (`sharing.ts`).
 */
import { readAspect, type RefreshReport, type SyncContext } from './context';
import { sameFullInventories, sameSet } from './diff';
import { ASSOCIATIONS, type Aspect, type AspectData } from './view';

function sameContent(aspect: Aspect, before: AspectData[Aspect] | undefined, after: AspectData[Aspect]): boolean {
  if (before === undefined) return false;
  if (aspect === 'inventories') return sameFullInventories(before as AspectData['inventories'], after as AspectData['inventories']);
  return sameSet(before as readonly string[], after as readonly string[]);
}

export class AssociationRefresh {
  /** provider -> when the tracker first held it or last re-read it (epoch ms). */
  private readonly readAt = new Map<string, number>();

  /** `refreshSeconds` 0 turns the refresh off: what was read once is trusted until a 409 or a cache clear. */
  constructor(
    private readonly refreshSeconds: number,
    private readonly now: () => number,
  ) {}

  /**
   * Re-reads the known aspects of `providers` that were read at an older generation than the
   * listing shows, for providers whose interval has passed; starts the interval of providers not
   * seen before. Aspects never read are left to the sync, which reads them when it needs them.
   */
  async refresh(ctx: SyncContext, providers: readonly string[]): Promise<RefreshReport> {
    const report = { reads: 0, providers: [] as string[], drifted: {} as Record<string, Aspect[]> };
    if (this.refreshSeconds <= 0) return report;
    const now = this.now();
    const due = (uuid: string): boolean => now - (this.readAt.get(uuid) ?? now) >= this.refreshSeconds * 1000;
    const inTree = new Set(providers);
    for (const uuid of this.readAt.keys()) if (!inTree.has(uuid)) this.readAt.delete(uuid);
    this.held(providers);
    for (const uuid of providers) {
      const stale = ctx.view.stale(uuid, ASSOCIATIONS).filter((a) => ctx.view.known(uuid, a) !== undefined);
      if (stale.length === 0 || !due(uuid)) continue;
      this.readAt.set(uuid, now);
      report.providers.push(uuid);
      for (const aspect of stale) {
        const before = ctx.view.known(uuid, aspect);
        const after = await readAspect(ctx, uuid, aspect);
        report.reads++;
        if (!sameContent(aspect, before, after)) (report.drifted[uuid] ??= []).push(aspect);
      }
    }
    return report;
  }

  /** Starts the interval of providers the cycle created or read for the first time. */
  held(providers: readonly string[]): void {
    if (this.refreshSeconds <= 0) return;
    const now = this.now();
    for (const uuid of providers) if (!this.readAt.has(uuid)) this.readAt.set(uuid, now);
  }

  /** Forgets when providers were re-read (with the cache: everything is read again anyway). */
  clear(): void {
    this.readAt.clear();
  }
}
