/**
 * One fleet run against a Placement that is already up and empty:
 *
 * 1. shards build their hosts (files, fake drivers, trackers; no Placement traffic yet);
 * 2. t0: every host's first sync at once while the claimer starts claiming; each shard starts its
 *    hosts' periodic audits (compressed interval) as soon as its first syncs are done, as the daemon
 *    does; converged = every host's first sync done, checked against Placement's provider list;
 * 3. the claimer claims until the fleet is full (or `claimSeconds` pass); as it starts, some hosts
 *    grow their disk, so their agents write inventory while claims land on the same providers;
 * 4. steady state: claims stopped, one interval to settle, then a window of audits only;
 * 5. audits stopped; every provider's usages checked against its capacity.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { NoAuth } from '../../tracker/placement/auth';
import { PlacementClient } from '../../tracker/placement/client';
import { PlacementHttp, RequestCounter } from '../../tracker/placement/http';
import { Claimer, FLAVORS, type ClaimerStats } from './claimer';
import { overAllocations, providersWithoutRoom, sumCounts, traffic, type CountEntries, type OverAllocation, type ProviderUsage, type Traffic } from './report';
import { ChildShard, LocalShard, type FleetShard, type ShardCounts } from './shard';
import { pool } from '../lib';

export interface FleetOptions {
  readonly hosts: number;
  /** Child processes; 0 runs every host in this process. */
  readonly shards: number;
  readonly placementUrl: string;
  /** The compressed audit interval (seconds; must divide 60). */
  readonly auditInterval: number;
  /** The steady window (seconds). */
  readonly windowSeconds: number;
  /** Concurrent claimer workers. */
  readonly claimers: number;
  /** The claim phase ends when the fleet is full or after this long. */
  readonly claimSeconds: number;
  readonly claimLimit?: number;
  /** Every `driftEvery`-th host grows its disk as claims start (0: none), so agents write under claims. */
  readonly driftEvery?: number;
  /** Placement's CPU time per phase (`placement-cpu.ts`); without it, phases report NaN. */
  readonly placementCpu?: CpuMeter;
  readonly log?: (line: string) => void;
}

/** CPU seconds some processes used: `take` answers since the last `take` (or `start`). */
export interface CpuMeter {
  start(): void;
  take(): number;
  stop(): void;
}

export interface PhaseTraffic {
  readonly seconds: number;
  readonly agents: Traffic;
  readonly audits: number;
  readonly auditFailures: number;
  /** CPU seconds Placement used in the phase (NaN when not measured). */
  readonly placementCpu: number;
}

export interface FleetOutcome {
  readonly hosts: number;
  readonly shards: number;
  readonly providersPerHost: number;
  readonly convergeSeconds: number;
  readonly converged: boolean;
  readonly providersInPlacement: number;
  readonly firstSyncRetries: number;
  readonly firstSyncFailed: number;
  /** t0 to convergence: first syncs, with the claimer already running. */
  readonly convergePhase: PhaseTraffic;
  /** Convergence to the end of the claims. */
  readonly claimPhase: PhaseTraffic & { readonly fleetFull: boolean; readonly drifted: number };
  /** One audit interval after the claims, before the window (the last drifted hosts write here). */
  readonly settle: PhaseTraffic;
  readonly claimer: ClaimerStats;
  readonly claimerTraffic: Traffic;
  readonly steady: PhaseTraffic;
  readonly overAllocations: readonly OverAllocation[];
  readonly providersChecked: number;
  /** Hosts the first flavor no longer fits on at the end. */
  readonly hostsFull: number;
  readonly wallSeconds: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function collect(shards: readonly FleetShard[], reset: boolean): Promise<{ counts: CountEntries; audits: number; failures: number }> {
  const all: ShardCounts[] = await Promise.all(shards.map((s) => s.counts(reset)));
  return {
    counts: [...sumCounts(all.map((a) => a.counts))],
    audits: all.reduce((n, a) => n + a.audits.runs, 0),
    failures: all.reduce((n, a) => n + a.audits.failures, 0),
  };
}

async function phase(shards: readonly FleetShard[], since: number, cpu: CpuMeter | undefined): Promise<PhaseTraffic> {
  const c = await collect(shards, true);
  return { seconds: (Date.now() - since) / 1000, agents: traffic(c.counts), audits: c.audits, auditFailures: c.failures, placementCpu: cpu ? cpu.take() : NaN };
}

/** Inventories and usages of every provider, read with a few requests at a time. */
export async function readUsages(http: PlacementHttp, concurrency = 8): Promise<ProviderUsage[]> {
  const api = new PlacementClient(http);
  const providers = await api.listProviders();
  const out: ProviderUsage[] = [];
  await pool(providers, concurrency, async (p) => {
    const inv = await api.getInventories(p.uuid);
    const use = await http.request<{ usages: Record<string, number> }>({ method: 'GET', path: `/resource_providers/${p.uuid}/usages`, microversion: '1.14' });
    out.push({ uuid: p.uuid, name: p.name, inventories: inv.inventories, usages: use.data.usages });
  });
  return out;
}

function split(total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
}

export async function runFleet(o: FleetOptions): Promise<FleetOutcome> {
  const log = o.log ?? ((): void => undefined);
  const started = Date.now();
  const prefix = `fleet-${randomUUID().slice(0, 6)}`;
  const shardCount = Math.max(1, o.shards);
  const shards: FleetShard[] = Array.from({ length: shardCount }, () => (o.shards > 0 ? new ChildShard() : new LocalShard()));
  const claimerCounter = new RequestCounter();
  const claimerHttp = new PlacementHttp({ auth: new NoAuth(o.placementUrl), counter: claimerCounter });
  // Convergence and capacity checks go through their own client: not the claimer's traffic.
  const checkHttp = new PlacementHttp({ auth: new NoAuth(o.placementUrl) });
  const claimer = new Claimer({ http: claimerHttp, workers: o.claimers, ...(o.claimLimit ? { limit: o.claimLimit } : {}) });
  try {
    let first = 0;
    const sizes = split(o.hosts, shardCount);
    await Promise.all(
      shards.map((s, i) => {
        const count = sizes[i] ?? 0;
        const opts = { prefix, first, count, placementUrl: o.placementUrl, dir: mkdtempSync(join(tmpdir(), `${prefix}-${i}-`)) };
        first += count;
        return s.init(opts);
      }),
    );
    log(`fleet: ${o.hosts} hosts built in ${shardCount} shard(s) in ${((Date.now() - started) / 1000).toFixed(1)} s; first syncs start`);

    o.placementCpu?.start();
    const t0 = Date.now();
    claimer.start();
    const reports = await Promise.all(
      shards.map(async (s) => {
        const r = await s.firstSync();
        await s.startAudits(o.auditInterval);
        return r;
      }),
    );
    const doneAt = reports.flatMap((r) => r.doneAt);
    const convergeSeconds = (Math.max(t0, ...doneAt) - t0) / 1000;
    const convergePhase = await phase(shards, t0, o.placementCpu);
    const providersPerHost = await shards[0]?.providersPerHost() ?? 0;
    const listed = await new PlacementClient(checkHttp).listProviders();
    const roots = listed.filter((p) => p.parent_provider_uuid === null && p.name.startsWith(`${prefix}-`)).length;
    const converged = roots === o.hosts && listed.length >= o.hosts * providersPerHost;
    log(`fleet: converged=${converged} in ${convergeSeconds} s (${roots} roots, ${listed.length} providers); claiming`);

    const tc = Date.now();
    claimer.ready();
    const drifted = (await Promise.all(shards.map((s) => s.drift(o.driftEvery ?? 0)))).reduce((a, b) => a + b, 0);
    let timer: NodeJS.Timeout | undefined;
    const fleetFull = await Promise.race([claimer.full.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), o.claimSeconds * 1000)))]);
    clearTimeout(timer);
    const claimerStats = await claimer.stop();
    const claimPhase = { ...(await phase(shards, tc, o.placementCpu)), fleetFull, drifted };
    log(`fleet: ${claimerStats.claimed} claims in ${claimPhase.seconds.toFixed(1)} s (full=${fleetFull}); steady window`);

    // One interval for every host to audit once after the last claim, then the window.
    const tt = Date.now();
    await sleep(o.auditInterval * 1000);
    const settle = await phase(shards, tt, o.placementCpu);
    const ts = Date.now();
    await sleep(o.windowSeconds * 1000);
    const steady = await phase(shards, ts, o.placementCpu);
    await Promise.all(shards.map((s) => s.stopAudits()));

    const usages = await readUsages(checkHttp);
    const over = overAllocations(usages);
    log(`fleet: ${usages.length} providers checked, ${over.length} over-allocated`);
    return {
      hosts: o.hosts,
      shards: o.shards,
      providersPerHost,
      convergeSeconds,
      converged,
      providersInPlacement: listed.length,
      firstSyncRetries: reports.reduce((n, r) => n + r.retries, 0),
      firstSyncFailed: reports.reduce((n, r) => n + r.failed.length, 0),
      convergePhase,
      claimPhase,
      settle,
      claimer: claimerStats,
      claimerTraffic: traffic(claimerCounter.snapshot()),
      steady,
      overAllocations: over,
      providersChecked: usages.length,
      hostsFull: providersWithoutRoom(usages, FLAVORS[0]?.resources ?? {}),
      wallSeconds: (Date.now() - started) / 1000,
    };
  } finally {
    o.placementCpu?.stop();
    await claimer.stop();
    await Promise.all(shards.map((s) => s.close().catch(() => undefined)));
  }
}
