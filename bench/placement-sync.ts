/**
 * Placement traffic of the tracker, side by side with nova's report client (anchors measured on
 * this machine kind with nova Zed: `docs/nova-baselines.md#placement-report-client`).
 *
 * For hosts of 1, 69 (nova's benchmark shape) and 300 providers, against a private, fresh
 * Placement per run (uwsgi 1x1, SQLite, as the anchors): the first sync, a steady-state sync, a
 * sync after a scheduler-style claim on the root followed by an inventory change, and the cycles
 * when `[compute] resource_provider_association_refresh` is due (the tracker's clock is moved on by
 * the interval): after that claim, on a quiet tree, and after someone else changed one child's
 * inventory and removed one of the root's traits (the re-reads a refresh costs, and the repair).
 * Requests by method, wall time, CPU time of this process; medians of the runs.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { systemClock, type Clock } from '../lib/clock';
import { silentLogger } from '../lib/logging/logger';
import { NoAuth } from '../tracker/placement/auth';
import { PlacementClient } from '../tracker/placement/client';
import { PlacementHttp, RequestCounter } from '../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../tracker/tracker';
import { median, round, type BenchOptions, type BenchResult, type BenchRow } from './lib';
import { nameUuid, SyntheticHost } from './trees';

const PORT = Number(process.env.BENCH_PLACEMENT_PORT ?? '18779');
const STACK = join(__dirname, '..', '..', 'scripts', 'stack');
/** nova's default `resource_provider_association_refresh`. */
const REFRESH_S = 300;

function freshPlacement(): void {
  execFileSync('bash', [STACK, 'reset-placement'], {
    env: { ...process.env, PLACEMENT_PORT: String(PORT), STACK_DIR: '/tmp/compute-agent-bench-stack' },
    stdio: 'ignore',
  });
}

interface Measure {
  reads: number;
  writes: number;
  conflicts: number;
  wallMs: number;
  cpuMs: number;
}

async function measure(counter: RequestCounter, fn: () => Promise<unknown>): Promise<Measure> {
  counter.reset();
  const cpu = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await fn();
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const c = process.cpuUsage(cpu);
  return {
    reads: counter.reads(),
    writes: counter.writes(),
    conflicts: counter.total((_m, _r, status) => status === '409'),
    wallMs,
    cpuMs: (c.user + c.system) / 1000,
  };
}

async function oneRun(providers: number): Promise<Record<string, Measure>> {
  freshPlacement();
  const counter = new RequestCounter();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(`http://127.0.0.1:${PORT}`), counter }));
  const host = new SyntheticHost(providers);
  const name = `bench-host-${providers}`;
  const root = nameUuid(name);
  let skewMs = 0;
  const clock: Clock = { now: () => Date.now() + skewMs, sleep: (ms, signal) => systemClock.sleep(ms, signal) };
  const refreshDue = (fn: () => Promise<unknown>) => () => {
    skewMs += REFRESH_S * 1000;
    return fn();
  };
  const tracker = new ResourceTracker({
    api,
    driver: host,
    nodename: name,
    rootUuid: root,
    initialRatios: initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 }),
    logger: silentLogger(),
    clock,
    associationRefreshSeconds: REFRESH_S,
  });
  const first = await measure(counter, () => tracker.updateFromDriver());
  const steady = await measure(counter, () => tracker.updateFromDriver());
  // A scheduler claims on the root (not counted), then the operator raises reserved memory.
  await api.putAllocations(randomUUID(), {
    allocations: { [root]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 20 } } },
    project_id: randomUUID(),
    user_id: randomUUID(),
    consumer_generation: null,
  });
  host.memoryReserved = 1024;
  const claimed = await measure(counter, () => tracker.updateFromDriver());
  const quietAfter = await measure(counter, () => tracker.updateFromDriver());
  const sync = () => tracker.updateFromDriver();
  // The claim moved the root's generation: its traits and aggregates, read before it, are re-read.
  const refreshAfterClaim = await measure(counter, refreshDue(sync));
  const refreshQuiet = await measure(counter, refreshDue(sync));
  await driftFromOutside(api, root);
  const refreshDrift = await measure(counter, refreshDue(sync));
  const repairedAfter = await measure(counter, sync);
  return { first, steady, claimed, quietAfter, refreshAfterClaim, refreshQuiet, refreshDrift, repairedAfter };
}

/** Someone else (not counted) removes one of the root's traits and halves a child's inventory. */
async function driftFromOutside(api: PlacementClient, root: string): Promise<void> {
  const traits = await api.getTraits(root);
  await api.putTraits(root, traits.resource_provider_generation, traits.traits.filter((t) => t !== 'COMPUTE_NODE'));
  const child = (await api.providersInTree(root)).find((p) => p.uuid !== root);
  if (!child) return;
  const inv = await api.getInventories(child.uuid);
  const changed = Object.fromEntries(Object.entries(inv.inventories).map(([rc, r]) => [rc, { ...r, total: Math.ceil(r.total / 2), max_unit: Math.ceil(r.total / 2) }]));
  await api.putInventories(child.uuid, inv.resource_provider_generation, changed);
}

const PHASES = {
  first: 'first sync',
  steady: 'steady state',
  claimed: 'after a claim + inventory change',
  quietAfter: 'steady after that',
  refreshAfterClaim: 'refresh due, root moved by that claim',
  refreshQuiet: 'refresh due, nothing moved',
  refreshDrift: 'refresh due, a root trait (and a child inventory) changed outside',
  repairedAfter: 'steady after the repair',
} as const;
const QUIET: ReadonlySet<string> = new Set(['steady', 'quietAfter', 'refreshQuiet', 'repairedAfter']);

/**
 * The same scenarios run by nova Zed's report client alone
 * (`docs/nova-baselines.md#placement-report-client`).
 */
const NOVA: Record<string, Record<string, string>> = {
  '1': { first: '5 req, 102 ms', steady: '0 req (RT: 1)', claimed: '6 req incl. 1x409, 37 ms', refreshQuiet: '4 req (RT: 5)' },
  '69': { first: '275 req, 1644 ms', steady: '0 req (RT: 69)', claimed: '210 req incl. 1x409, 1018 ms', refreshQuiet: '208 req (RT: 277)' },
};

export async function runPlacementSyncBench(opts: BenchOptions): Promise<BenchResult> {
  const sizes = opts.quick ? [1, 69] : [1, 69, 300];
  const runs = opts.quick ? 1 : 3;
  const rows: BenchRow[] = [];
  const details: Record<string, unknown> = {};
  for (const size of sizes) {
    const all: Array<Record<string, Measure>> = [];
    for (let i = 0; i < runs; i++) all.push(await oneRun(size));
    details[size] = all;
    for (const phase of Object.keys(PHASES) as Array<keyof typeof PHASES>) {
      const m = (k: keyof Measure): number => median(all.map((r) => r[phase]?.[k] ?? NaN));
      const scenario = `${size} providers, ${PHASES[phase]}`;
      const goal = QUIET.has(phase) ? '0 writes, <= 1 read' : phase === 'refreshDrift' ? 'listing + 3 reads per changed provider, 1 write per changed aspect' : undefined;
      rows.push({
        scenario,
        metric: 'requests (reads/writes/409)',
        value: `${m('reads')}/${m('writes')}/${m('conflicts')}`,
        ...(goal ? { goal } : {}),
        ...(NOVA[String(size)]?.[phase] ? { baseline: NOVA[String(size)]?.[phase] } : {}),
      });
      rows.push({ scenario, metric: 'wall', value: round(m('wallMs')), unit: 'ms' });
      rows.push({ scenario, metric: 'agent CPU', value: round(m('cpuMs')), unit: 'ms' });
    }
  }
  return { name: 'placement-sync', rows, details };
}

if (require.main === module) {
  runPlacementSyncBench({ quick: process.argv.includes('--quick') }).then(
    (r) => console.log(JSON.stringify(r.rows, null, 2)),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
