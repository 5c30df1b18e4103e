/**
 * Where a resource request goes on this host's provider tree: VCPU, MEMORY_MB, DISK_GB and PCPU
 * from the root (DISK_GB from a sharing provider when the root has none), other classes from the
 * first provider of the tree, parents first, that has the class, room for it (`ClaimBook.free`,
 * which counts in-flight claims), the required traits (on it or on the root) and none of the
 * forbidden ones; a numbered group takes all its classes from one such provider.
 *
 * A pure choice: it records nothing and writes nothing (`service.ts` records the claim and writes
 * it). Placement checks the write again and stays the authority.
 */
import type { ProviderSnapshot } from '../../model/provider-types';
import type { ClaimBook } from './book';
import { InsufficientResourcesError } from './errors';
import type { ResourceRequest } from './request';

export interface PlacementScope {
  /** Our providers, parents first (the root first). */
  readonly providers: readonly ProviderSnapshot[];
  /** Sharing providers serving this host (read-only). */
  readonly sharing: readonly ProviderSnapshot[];
  readonly claims: Pick<ClaimBook, 'free'>;
}

const ROOT_CLASSES = new Set(['VCPU', 'MEMORY_MB', 'DISK_GB', 'PCPU']);

/**
 * Chooses providers for `req` on this host: provider uuid -> class -> amount.
 * @throws InsufficientResourcesError naming the class that does not fit
 */
export function placeRequest(req: ResourceRequest, scope: PlacementScope): Record<string, Record<string, number>> {
  const root = scope.providers[0];
  if (!root) throw new InsufficientResourcesError('(no tree)', 'VCPU', 1, 0);
  const plan: Record<string, Record<string, number>> = {};
  const planned = (rp: string, rc: string): number => plan[rp]?.[rc] ?? 0;
  const hasTraits = (p: ProviderSnapshot): boolean =>
    req.required.every((t) => p.traits.includes(t) || root.traits.includes(t)) && !req.forbidden.some((t) => p.traits.includes(t));
  const room = (p: ProviderSnapshot, rc: string, n: number, sharing: boolean): boolean =>
    Boolean(p.inventories[rc]) && (sharing || scope.claims.free(p.uuid, rc) - planned(p.uuid, rc) >= n);
  const add = (rp: string, rc: string, n: number): void => {
    const row = (plan[rp] ??= {});
    row[rc] = (row[rc] ?? 0) + n;
  };
  for (const g of req.groups) {
    const entries = Object.entries(g.resources);
    if (g.sameProvider) {
      const p = scope.providers.find((c) => hasTraits(c) && entries.every(([rc, n]) => room(c, rc, n, false)));
      if (!p) {
        const [rc = '?', n = 0] = entries[0] ?? [];
        throw new InsufficientResourcesError('any provider of this host', rc, n, 0);
      }
      for (const [rc, n] of entries) add(p.uuid, rc, n);
      continue;
    }
    for (const [rc, n] of entries) {
      const candidates = ROOT_CLASSES.has(rc) ? [root] : scope.providers.filter((p) => p !== root);
      let chosen = candidates.find((p) => hasTraits(p) && room(p, rc, n, false));
      if (!chosen && rc === 'DISK_GB' && !root.inventories.DISK_GB) chosen = scope.sharing.find((p) => room(p, rc, n, true));
      if (!chosen && !ROOT_CLASSES.has(rc) && root.inventories[rc] && room(root, rc, n, false)) chosen = root;
      if (!chosen) {
        const where = candidates.find((p) => p.inventories[rc]) ?? root;
        throw new InsufficientResourcesError(where.uuid, rc, n, Math.max(0, scope.claims.free(where.uuid, rc) - planned(where.uuid, rc)));
      }
      add(chosen.uuid, rc, n);
    }
  }
  return plan;
}
