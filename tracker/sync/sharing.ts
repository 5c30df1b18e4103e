/**
 * Sharing providers (a storage pool serving DISK_GB to hosts in an aggregate) as drivers need to see
 * them: lone roots beside the host's tree, found through the root's aggregates with
 * MISC_SHARES_VIA_AGGREGATE, as nova's report client adds them. Read-only: the agent never writes a
 * sharing provider; its owner (a storage service, an operator) does.
 *
 * Looked up when the root's aggregates change and otherwise every
 * `[compute] resource_provider_association_refresh` seconds, so a steady cycle costs nothing extra.
 */
import type { PlacementApi } from '../placement/api';
import type { ProviderTree } from '../../model/provider-tree';
import type { ProviderSnapshot } from '../../model/provider-types';

export class SharingProviders {
  private cached: ProviderSnapshot[] = [];
  private key = '';
  private at = -Infinity;

  constructor(
    private readonly api: PlacementApi,
    private readonly refreshMs: number,
    private readonly now: () => number,
  ) {}

  /** The sharing providers of `aggregates`, from cache when fresh. Counts reads into `reads`. */
  async get(aggregates: readonly string[], stats: { reads: number }): Promise<readonly ProviderSnapshot[]> {
    const key = [...aggregates].sort().join(',');
    const stale = key !== this.key || (this.refreshMs > 0 && this.now() - this.at > this.refreshMs);
    if (!stale) return this.cached;
    // Remembered only once the lookup succeeds: a failed one (an outage, a malformed answer) is
    // tried again by the next cycle, not after the refresh interval.
    const at = this.now();
    const remember = (found: ProviderSnapshot[]): ProviderSnapshot[] => {
      [this.key, this.at] = [key, at];
      return (this.cached = found);
    };
    if (aggregates.length === 0) return remember([]);
    stats.reads++;
    const records = await this.api.sharingProviders(aggregates);
    const out: ProviderSnapshot[] = [];
    for (const r of records) {
      stats.reads += 3;
      const [inv, traits, aggs] = await Promise.all([this.api.getInventories(r.uuid), this.api.getTraits(r.uuid), this.api.getAggregates(r.uuid)]);
      out.push({
        uuid: r.uuid,
        name: r.name,
        parent_provider_uuid: null,
        root_provider_uuid: r.uuid,
        generation: inv.resource_provider_generation,
        inventories: inv.inventories,
        traits: [...traits.traits].sort(),
        aggregates: [...aggs.aggregates].sort(),
      });
    }
    return remember(out);
  }

  /** What the last lookup found (no I/O). */
  last(): readonly ProviderSnapshot[] {
    return this.cached;
  }

  /** Adds them to a driver's tree as lone roots. */
  static addTo(tree: ProviderTree, providers: readonly ProviderSnapshot[]): void {
    for (const p of providers) if (!tree.exists(p.uuid) && !tree.exists(p.name)) tree.insert(p);
  }

  clear(): void {
    this.key = '';
    this.cached = [];
    this.at = -Infinity;
  }
}
