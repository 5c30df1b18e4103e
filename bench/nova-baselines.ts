/**
 * nova's report client as the baseline of scenarios that share a Placement with others (footprint
 * on the dev stack, fleet on its own): it registers a host of its own under a name no one else
 * uses, measures, and removes what it registered, so the Placement is left as it was found.
 */
import { randomUUID } from 'node:crypto';
import { NoAuth } from '../tracker/placement/auth';
import { PlacementClient } from '../tracker/placement/client';
import { PlacementHttp } from '../tracker/placement/http';
import { NovaReportClient, novaTree, totalRequests, type NovaClaim, type NovaInput, type NovaReport } from './nova-report-client';
import { nameUuid, SyntheticHost } from './trees';

const RATIOS = { VCPU: 4, MEMORY_MB: 1, DISK_GB: 1 };
/** A small instance: what matters to nova's reads is how many consumers there are, not their size. */
const INSTANCE = { VCPU: 1, MEMORY_MB: 512, DISK_GB: 1 };

/** Runs nova's report client for a fresh host of `providers` providers, then deletes that host. */
async function onFreshHost(
  nova: NovaReportClient,
  placementUrl: string,
  providers: number,
  input: (host: Pick<NovaInput, 'placement_url' | 'nodename' | 'root_uuid' | 'tree'>) => NovaInput,
): Promise<NovaReport | string> {
  const reason = await nova.unavailable();
  if (reason !== undefined) return reason;
  const nodename = `bench-nova-${randomUUID().slice(0, 8)}`;
  const root = nameUuid(nodename);
  const tree = await novaTree(new SyntheticHost(providers), nodename, root, RATIOS);
  const full = input({ placement_url: placementUrl, nodename, root_uuid: root, tree });
  try {
    const outcome = await nova.measure(full);
    return outcome.ran ? outcome.report : outcome.reason;
  } finally {
    const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(placementUrl) }));
    for (const c of full.consumers ?? []) await api.deleteAllocations(c.consumer).catch(() => undefined);
    for (const p of [...tree].reverse()) await api.deleteProvider(p.uuid).catch(() => undefined);
  }
}

/** The report client's process after a first registration of the 69-provider tree and `idleS` idle. */
export interface NovaFootprint {
  readonly rssMb: number;
  readonly hwmMb: number;
  readonly novaVersion: string;
}

export async function novaFootprint(placementUrl: string, idleS: number, nova = new NovaReportClient()): Promise<NovaFootprint | string> {
  const r = await onFreshHost(nova, placementUrl, 69, (h) => ({ ...h, scenarios: ['first'], idle_s: idleS }));
  return typeof r === 'string' ? r : { rssMb: r.vmRssMb, hwmMb: r.vmHwmMb, novaVersion: r.novaVersion };
}

/** What one nova-compute host of a given shape sends per periodic pass, measured. */
export interface NovaHostCounts {
  readonly providers: number;
  readonly consumers: number;
  /** Requests of a steady pass (the resource tracker's periodic, nothing changed). */
  readonly steady: number;
  /** Requests of the pass when the association refresh is due. */
  readonly refresh: number;
  readonly novaVersion: string;
}

/**
 * A host of `providers` providers (root and NIC children, as `trees.ts` builds them) holding
 * `consumers` instances: its first registration, then a steady pass and a refresh pass, counted.
 */
export async function novaHostCounts(placementUrl: string, providers: number, consumers: number, nova = new NovaReportClient()): Promise<NovaHostCounts | string> {
  const claims: NovaClaim[] = Array.from({ length: consumers }, () => ({ consumer: randomUUID(), project_id: randomUUID(), user_id: randomUUID(), resources: INSTANCE }));
  const r = await onFreshHost(nova, placementUrl, providers, (h) => ({ ...h, consumers: claims, scenarios: ['first', 'consumers', 'steady', 'refresh'] }));
  if (typeof r === 'string') return r;
  const { steady, refresh } = r.scenarios;
  if (!steady || !refresh) return 'nova did not report its steady and refresh passes';
  return { providers, consumers, steady: totalRequests(steady.requests), refresh: totalRequests(refresh.requests), novaVersion: r.novaVersion };
}
