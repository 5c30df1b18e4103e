/**
 * The fleet scenario's arithmetic, kept free of I/O so it is unit-tested: the over-allocation check,
 * request counts summed over shards, the scaling of a compressed audit window to requests per host
 * per minute, conflict rates, and the estimate for nova-compute's tracker at the same size from
 * request counts measured in the same run.
 */

/** One inventory record as Placement reports it (the fields capacity depends on). */
export interface InventoryCapacity {
  readonly total: number;
  readonly reserved: number;
  readonly allocation_ratio: number;
}

/** A provider's inventories and usages, as read at the end of a run. */
export interface ProviderUsage {
  readonly uuid: string;
  readonly name: string;
  readonly inventories: Readonly<Record<string, InventoryCapacity>>;
  readonly usages: Readonly<Record<string, number>>;
}

/** A resource class on a provider whose usage exceeds what Placement may hand out. */
export interface OverAllocation {
  readonly provider: string;
  readonly name: string;
  readonly resourceClass: string;
  readonly used: number;
  readonly capacity: number;
}

/**
 * Every (provider, resource class) whose usage exceeds `(total - reserved) * allocation_ratio`,
 * Placement's own capacity rule. A usage of a class with no inventory counts as capacity 0.
 */
export function overAllocations(providers: readonly ProviderUsage[]): OverAllocation[] {
  const out: OverAllocation[] = [];
  for (const p of providers) {
    for (const [rc, used] of Object.entries(p.usages)) {
      if (used <= 0) continue;
      const inv = p.inventories[rc];
      const capacity = inv ? (inv.total - inv.reserved) * inv.allocation_ratio : 0;
      if (used > capacity) out.push({ provider: p.uuid, name: p.name, resourceClass: rc, used, capacity });
    }
  }
  return out;
}

/** Request counts keyed `METHOD route status` (RequestCounter's snapshot), as plain entries. */
export type CountEntries = ReadonlyArray<readonly [string, number]>;

/** Sums count snapshots (one per host or per shard) into one. */
export function sumCounts(parts: readonly CountEntries[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of parts) for (const [k, v] of part) out.set(k, (out.get(k) ?? 0) + v);
  return out;
}

export interface Traffic {
  readonly requests: number;
  readonly reads: number;
  readonly writes: number;
  /** Answers with status 409. */
  readonly conflicts: number;
  /** Transport failures (no answer). */
  readonly errors: number;
}

/** Totals of a count snapshot. */
export function traffic(counts: ReadonlyMap<string, number> | CountEntries): Traffic {
  let requests = 0;
  let reads = 0;
  let conflicts = 0;
  let errors = 0;
  for (const [key, n] of counts) {
    const [method = '', , status = ''] = key.split(' ');
    requests += n;
    if (method === 'GET') reads += n;
    if (status === '409') conflicts += n;
    if (status === 'error') errors += n;
  }
  return { requests, reads, writes: requests - reads, conflicts, errors };
}

/** `part` as a percentage of `whole` (0 when there is no whole), one decimal. */
export function percent(part: number, whole: number): number {
  return whole > 0 ? Math.round((part / whole) * 1000) / 10 : 0;
}

/** The default audit interval a compressed window stands in for (nova's periodic spacing). */
export const REAL_INTERVAL_SECONDS = 60;

/**
 * Requests per host per minute at the real audit interval, from a window where audits ran at a
 * compressed one: what one host asks per audit (requests / audits run), times the audits a host runs
 * per minute at `realIntervalSeconds`. Counting audits actually run (not window / interval) keeps a
 * partial first or last tick from skewing the rate.
 */
export function perHostPerMinute(requests: number, auditsRun: number, realIntervalSeconds = REAL_INTERVAL_SECONDS): number {
  if (auditsRun <= 0) return NaN;
  return (requests / auditsRun) * (60 / realIntervalSeconds);
}

/** Requests per host per minute as measured, at the compressed interval (no scaling). */
export function measuredPerHostPerMinute(requests: number, hosts: number, windowSeconds: number): number {
  if (hosts <= 0 || windowSeconds <= 0) return NaN;
  return requests / hosts / (windowSeconds / 60);
}

export interface NovaEstimate {
  readonly perHostPerMinute: number;
  readonly fleetPerMinute: number;
  readonly derivation: string;
}

/** What nova's report client sent for one host of the fleet's shape, measured in the same run. */
export interface NovaHostPasses {
  readonly providers: number;
  /** Instances on that host when it was measured (each one is a read in every pass). */
  readonly consumers: number;
  /** Requests of the resource tracker's periodic pass when nothing changed. */
  readonly steady: number;
  /** Requests of the pass when the association refresh is due. */
  readonly refresh: number;
}

/** nova's default `resource_provider_association_refresh`. */
export const NOVA_REFRESH_SECONDS = 300;

/**
 * nova-compute's (Zed) steady Placement traffic for `hosts` hosts like the measured one: its
 * periodic `update_available_resource` runs every `REAL_INTERVAL_SECONDS`, and once per
 * `NOVA_REFRESH_SECONDS` that pass is a refresh pass instead. Per refresh period: the steady passes
 * between refreshes, plus one refresh pass. An estimate from measured passes, not a measurement of a
 * fleet of nova-computes; claims and builds add one steady pass each, and a quiet fleet has none.
 */
export function novaEstimate(nova: NovaHostPasses, hosts: number): NovaEstimate {
  const passes = NOVA_REFRESH_SECONDS / REAL_INTERVAL_SECONDS;
  const perPeriod = (passes - 1) * nova.steady + nova.refresh;
  const perHostPerMinute = perPeriod / (NOVA_REFRESH_SECONDS / 60);
  return {
    perHostPerMinute,
    fleetPerMinute: perHostPerMinute * hosts,
    derivation:
      `estimate from nova's report client measured in this run on one ${nova.providers}-provider host with ${nova.consumers} instances: ` +
      `${passes - 1} steady passes x ${nova.steady} + 1 refresh pass x ${nova.refresh} requests per ${NOVA_REFRESH_SECONDS} s`,
  };
}

/**
 * Providers holding every class `resources` asks for that cannot take one more of it: the hosts a
 * scheduler can no longer place this flavor on (roots, for a flavor of root classes).
 */
export function providersWithoutRoom(providers: readonly ProviderUsage[], resources: Readonly<Record<string, number>>): number {
  let full = 0;
  for (const p of providers) {
    const wanted = Object.entries(resources);
    if (!wanted.every(([rc]) => p.inventories[rc])) continue;
    const fits = wanted.every(([rc, n]) => {
      const inv = p.inventories[rc];
      return inv !== undefined && (p.usages[rc] ?? 0) + n <= (inv.total - inv.reserved) * inv.allocation_ratio;
    });
    if (!fits) full++;
  }
  return full;
}
