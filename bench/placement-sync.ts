/**
 * Placement traffic of the tracker, side by side with nova's own report client measured in the
 * same run against the same Placement (`nova-report-client.ts`).
 *
 * For hosts of 1, 69 (the shape `trees.ts` builds) and 300 providers, against a private Placement
 * (uwsgi 1x1, SQLite) reset before each side: the first sync, a steady-state sync, a sync after a
 * scheduler-style claim on the root followed by an inventory change, and the cycles when
 * `[compute] resource_provider_association_refresh` is due (the tracker's clock is moved on by the
 * interval): after that claim, on a quiet tree, and after someone else changed one child's
 * inventory and removed one of the root's traits (the re-reads a refresh costs, and the repair).
 * nova's report client runs right after the tracker on each size and run (once on the 300-provider
 * host), over the same tree, for the four scenarios it shares (first, steady, refresh due, claim +
 * inventory change); the rows give both sides and the ratio. Requests by method, wall time, CPU time; medians of the runs. The
 * private Placement is stopped at the end, also when a run fails.
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
import { NovaReportClient, novaTree, type NovaPass, type NovaReport, type NovaScenario } from './nova-report-client';
import { sideBySideRows, summarizeNova } from './side-by-side';
import { nameUuid, SyntheticHost } from './trees';

const PORT = Number(process.env.BENCH_PLACEMENT_PORT ?? '18779');
const STACK_DIR = process.env.BENCH_STACK_DIR ?? '/tmp/compute-agent-bench-stack';
const PLACEMENT_URL = `http://127.0.0.1:${PORT}`;
const STACK = join(__dirname, '..', '..', 'scripts', 'stack');
/** nova's default `resource_provider_association_refresh`. */
const REFRESH_S = 300;
const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });
/** The scheduler's claim on the root both sides see before their inventory change. */
const CLAIM = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 20 };
/** The root's reserved memory after the operator's change. */
const RESERVED_AFTER = 1024;

function stack(...args: string[]): void {
  execFileSync('bash', [STACK, ...args], { env: { ...process.env, PLACEMENT_PORT: String(PORT), STACK_DIR }, stdio: 'ignore' });
}

const freshPlacement = (): void => stack('reset-placement');

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
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(PLACEMENT_URL), counter }));
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
    initialRatios: RATIOS,
    logger: silentLogger(),
    clock,
    associationRefreshSeconds: REFRESH_S,
  });
  const first = await measure(counter, () => tracker.updateFromDriver());
  const steady = await measure(counter, () => tracker.updateFromDriver());
  // A scheduler claims on the root (not counted), then the operator raises reserved memory.
  await api.putAllocations(randomUUID(), {
    allocations: { [root]: { resources: CLAIM } },
    project_id: randomUUID(),
    user_id: randomUUID(),
    consumer_generation: null,
  });
  host.memoryReserved = RESERVED_AFTER;
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

/** nova's report client over the same tree, on the same Placement reset the same way. */
async function novaRun(nova: NovaReportClient, providers: number): Promise<NovaReport | string> {
  const reason = await nova.unavailable();
  if (reason !== undefined) return reason;
  freshPlacement();
  const name = `bench-host-${providers}`;
  const root = nameUuid(name);
  const host = new SyntheticHost(providers);
  const tree = await novaTree(host, name, root, RATIOS);
  host.memoryReserved = RESERVED_AFTER;
  const after = await novaTree(host, name, root, RATIOS);
  const outcome = await nova.measure({
    placement_url: PLACEMENT_URL,
    nodename: name,
    root_uuid: root,
    tree,
    tree_after_claim: after,
    claim: { consumer: randomUUID(), project_id: randomUUID(), user_id: randomUUID(), resources: CLAIM },
    scenarios: ['first', 'steady', 'refresh', 'claimed'],
  });
  return outcome.ran ? outcome.report : outcome.reason;
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

/** The tracker's phases nova's report client runs too, and its name for each. */
const SHARED: Readonly<Partial<Record<keyof typeof PHASES, NovaScenario>>> = { first: 'first', steady: 'steady', claimed: 'claimed', refreshQuiet: 'refresh' };

export async function runPlacementSyncBench(opts: BenchOptions): Promise<BenchResult> {
  const sizes = opts.quick ? [1, 69] : [1, 69, 300];
  const runs = opts.quick ? 1 : 3;
  const nova = new NovaReportClient();
  const rows: BenchRow[] = [];
  const details: Record<string, unknown> = {};
  try {
    for (const size of sizes) {
      const all: Array<Record<string, Measure>> = [];
      const novas: Array<NovaReport | string> = [];
      // nova's passes on the largest host take tens of seconds each and their request counts do
      // not vary from run to run: one run there keeps the full bench within minutes.
      const novaRuns = size > 69 ? 1 : runs;
      for (let i = 0; i < runs; i++) {
        all.push(await oneRun(size));
        if (i < novaRuns) novas.push(await novaRun(nova, size));
      }
      details[size] = { tracker: all, nova: novas };
      const reports = novas.filter((n): n is NovaReport => typeof n !== 'string');
      const skipped = novas.find((n): n is string => typeof n === 'string');
      if (reports[0]) {
        rows.push({
          scenario: `${size} providers, nova's report client`,
          metric: 'setup',
          value: `nova ${reports[0].novaVersion} (python3-nova), the Zed resource tracker's pass: ensure root, GET allocations per provider and consumer, update_from_provider_tree, redriven on a 409; ${reports.length} run(s), medians; its process ${round(median(reports.map((r) => r.vmRssMb)))} MB RSS at the end`,
        });
      }
      for (const phase of Object.keys(PHASES) as Array<keyof typeof PHASES>) {
        const m = (k: keyof Measure): number => median(all.map((r) => r[phase]?.[k] ?? NaN));
        const scenario = `${size} providers, ${PHASES[phase]}`;
        const measured = { reads: m('reads'), writes: m('writes'), conflicts: m('conflicts'), wallMs: m('wallMs'), cpuMs: m('cpuMs') };
        const goal = QUIET.has(phase) ? '0 writes, <= 1 read' : phase === 'refreshDrift' ? 'listing + 3 reads per changed provider, 1 write per changed aspect' : undefined;
        const shared = SHARED[phase];
        if (shared) {
          const passes = reports.map((r) => r.scenarios[shared]).filter((p): p is NovaPass => p !== undefined);
          const summary = summarizeNova(passes) ?? skipped ?? 'nova did not report this scenario';
          rows.push(...sideBySideRows(scenario, measured, summary, { ...(goal ? { requests: goal } : {}), ...(phase === 'first' && size === 69 ? { ratio: 'tracker <= 100 requests, wall <= 0.6x nova' } : {}) }));
          continue;
        }
        rows.push({ scenario, metric: 'requests (reads/writes/409)', value: `${measured.reads}/${measured.writes}/${measured.conflicts}`, ...(goal ? { goal } : {}) });
        rows.push({ scenario, metric: 'wall', value: round(measured.wallMs), unit: 'ms' });
        rows.push({ scenario, metric: 'agent CPU', value: round(measured.cpuMs), unit: 'ms' });
      }
    }
  } finally {
    // The private Placement is this scenario's own: nothing after it needs it. A failure to stop
    // it is said, and does not hide the error that ended the run.
    try {
      stack('down', 'placement');
    } catch (e) {
      process.stderr.write(`placement-sync: stopping Placement on 127.0.0.1:${PORT} failed: ${e instanceof Error ? e.message : String(e)}\n`);
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
