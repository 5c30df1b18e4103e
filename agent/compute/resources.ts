/**
 * What a flavor asks for, as nova computes it, and where on this host's provider tree it goes.
 *
 * Request (nova `scheduler/utils.py` ResourceRequest): VCPU = vcpus, MEMORY_MB = memory_mb,
 * DISK_GB = root_gb + ephemeral_gb + swap in GiB rounded up; extra specs `resources:<RC>=N`
 * override or add classes (N = 0 removes one), `resourcesN:<RC>=N` form a numbered group that must
 * come from a single provider, `trait:<NAME>=required|forbidden` constrain the providers.
 *
 * Placement onto the tree: VCPU, MEMORY_MB and DISK_GB from the root (DISK_GB from a sharing
 * provider when the root has none), other classes from the first provider of the tree, parents
 * first, that has the class, room for it (`ClaimBook.free`, which counts in-flight claims) and the
 * required traits (on it or on the root) and none of the forbidden ones.
 */
import type { ClaimBook } from '../../tracker/claims';
import { InsufficientResourcesError } from '../../tracker/claims';
import type { ProviderSnapshot, Resources } from '../../model/provider-types';
import { ArgumentError } from './decode';
import type { Flavor } from '../../model/instance';

export interface RequestGroup {
  readonly resources: Record<string, number>;
  /** True for a numbered group: everything from one provider. */
  readonly sameProvider: boolean;
}

export interface ResourceRequest {
  readonly groups: readonly RequestGroup[];
  readonly required: readonly string[];
  readonly forbidden: readonly string[];
}

const ROOT_CLASSES = new Set(['VCPU', 'MEMORY_MB', 'DISK_GB', 'PCPU']);

/** The request a flavor makes. @throws ArgumentError for a malformed extra spec */
export function requestFromFlavor(f: Flavor): ResourceRequest {
  const base: Record<string, number> = {
    VCPU: f.vcpus,
    MEMORY_MB: f.memory_mb,
    DISK_GB: f.root_gb + f.ephemeral_gb + Math.ceil(f.swap / 1024),
  };
  const numbered = new Map<string, Record<string, number>>();
  const required: string[] = [];
  const forbidden: string[] = [];
  for (const [key, value] of Object.entries(f.extra_specs)) {
    const res = /^resources([A-Za-z0-9_-]*):([A-Z0-9_]+)$/.exec(key);
    if (res) {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) throw new ArgumentError(`flavor.extra_specs.${key} = ${JSON.stringify(value)}: expected an integer >= 0`);
      const suffix = res[1] ?? '';
      const target = suffix === '' ? base : (numbered.get(suffix) ?? numbered.set(suffix, {}).get(suffix) ?? {});
      target[res[2] ?? ''] = n;
      continue;
    }
    const trait = /^trait[A-Za-z0-9_-]*:([A-Z0-9_]+)$/.exec(key);
    if (trait) {
      if (value === 'required') required.push(trait[1] ?? '');
      else if (value === 'forbidden') forbidden.push(trait[1] ?? '');
      else throw new ArgumentError(`flavor.extra_specs.${key} = ${JSON.stringify(value)}: expected required or forbidden`);
    }
  }
  const clean = (r: Record<string, number>): Record<string, number> => Object.fromEntries(Object.entries(r).filter(([, n]) => n > 0));
  const groups: RequestGroup[] = [{ resources: clean(base), sameProvider: false }];
  for (const r of numbered.values()) if (Object.keys(clean(r)).length) groups.push({ resources: clean(r), sameProvider: true });
  return { groups, required, forbidden };
}

/** Total amount per class over all groups. */
export function totalsOf(req: ResourceRequest): Record<string, number> {
  const out: Record<string, number> = {};
  for (const g of req.groups) for (const [rc, n] of Object.entries(g.resources)) out[rc] = (out[rc] ?? 0) + n;
  return out;
}

/** Sums allocations per class. */
export function sumAllocations(a: Readonly<Record<string, Resources>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const res of Object.values(a)) for (const [rc, n] of Object.entries(res)) out[rc] = (out[rc] ?? 0) + n;
  return out;
}

export interface PlacementScope {
  /** Our providers, parents first (the root first). */
  readonly providers: readonly ProviderSnapshot[];
  /** Sharing providers serving this host (read-only). */
  readonly sharing: readonly ProviderSnapshot[];
  readonly claims: ClaimBook;
}

/**
 * Chooses providers for `req` on this host.
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
