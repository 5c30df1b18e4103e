/**
 * Fleet simulation: N simulated hosts (the real tracker and auditor over the
 * fake driver, sharded over child processes) against one real Placement on PostgreSQL with several
 * uwsgi workers, while a scheduler-style claimer allocates until the fleet is full. Reports time to
 * converge, Placement requests per host per minute in steady state, the agents' and the claimer's
 * 409 rates, and over-allocations (which must be 0). `bench/fleet/run.ts` has the phases.
 * Placement's own CPU per phase (`fleet/placement-cpu.ts`) prices an agent request and a claim,
 * and gives the cores a fleet's Placement keeps busy (`fleet/sizing.ts`).
 *
 * Flags (after `npm run bench --`): `--fleet-hosts=N[,N...]` (200; 10 with --quick; `200,1000` runs both
 * on one Placement and compares their claim rates),
 * `--fleet-shards=N` child processes (4), `--fleet-interval=S` compressed audit interval (10; must
 * divide 60), `--fleet-window=S` steady window (30), `--fleet-claimers=N` claimer workers (4),
 * `--fleet-claim-seconds=S` longest claim phase (60), `--fleet-placement-workers=N` uwsgi
 * processes (4), `--fleet-drift-every=N` every Nth host grows its disk as claims start (4; 0 none),
 * `--fleet-max-candidates=N` Placement's `max_allocation_candidates` (2025.1 only: run with
 * OPENSTACK_RELEASE=2025.1; 0, the default, leaves Placement's own: no limit). Placement runs privately on 127.0.0.1:$BENCH_FLEET_PLACEMENT_PORT (18790), database
 * placement_18790_<release>, and is stopped at the end; the default dev stack is not touched.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { round, type BenchOptions, type BenchResult, type BenchRow } from './lib';
import { measuredPerHostPerMinute, novaEstimate, percent, perHostPerMinute, REAL_INTERVAL_SECONDS, type NovaHostPasses } from './fleet/report';
import { PlacementCpu } from './fleet/placement-cpu';
import { novaHostCounts } from './nova-baselines';
import { runFleet, type FleetOutcome } from './fleet/run';
import { busyCores, coresNeeded, placementCost, type PlacementCost } from './fleet/sizing';

const PORT = Number(process.env.BENCH_FLEET_PLACEMENT_PORT ?? '18790');
const STACK = join(__dirname, '..', '..', 'scripts', 'stack');

function flag(name: string, fallback: number): number {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (!arg) return fallback;
  const n = Number(arg.slice(name.length + 3));
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number, not ${arg}`);
  return n;
}

function stackEnv(workers: number, hosts: number, maxCandidates: number): NodeJS.ProcessEnv {
  // A first sync of every host at once opens hundreds of connections; uwsgi's default backlog
  // of 100 resets the rest. The kernel caps the backlog at somaxconn.
  const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8').trim()) || 128;
  return {
    ...process.env,
    PLACEMENT_PORT: String(PORT),
    STACK_DIR: '/tmp/compute-agent-bench-stack',
    PLACEMENT_DB: 'postgres',
    PLACEMENT_WORKERS: String(workers),
    PLACEMENT_LISTEN: String(Math.min(somaxconn, Math.max(128, 2 * hosts))),
    PLACEMENT_MAX_CANDIDATES: maxCandidates > 0 ? String(maxCandidates) : '',
  };
}

function stack(env: NodeJS.ProcessEnv, ...args: string[]): void {
  stackOutput(env, ...args);
}

function stackOutput(env: NodeJS.ProcessEnv, ...args: string[]): string {
  try {
    return execFileSync('bash', [STACK, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
  } catch (e) {
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim().split('\n').pop() ?? '';
    throw new Error(`scripts/stack ${args.join(' ')} failed: ${stderr}`);
  }
}

/** The outcome as table rows. */
export function fleetRows(r: FleetOutcome, o: { interval: number; window: number; placementWorkers: number; claimers: number; placement: string }, novaHost: NovaHostPasses | string): BenchRow[] {
  const s = `fleet, ${r.hosts} hosts`;
  const nova = typeof novaHost === 'string' ? undefined : novaEstimate(novaHost, r.hosts);
  const skipped = typeof novaHost === 'string' ? `nova skipped: ${novaHost}` : '';
  const steady = perHostPerMinute(r.steady.agents.requests, r.steady.audits);
  const claiming = perHostPerMinute(r.claimPhase.agents.requests, r.claimPhase.audits);
  const phases = [r.convergePhase, r.claimPhase, r.settle, r.steady];
  const agentWrites = phases.reduce((n, p) => n + p.agents.writes, 0);
  const agentConflicts = phases.reduce((n, p) => n + p.agents.conflicts, 0);
  const scaled = `audits every ${o.interval} s for ${o.window} s (${r.steady.audits} audits), scaled to one audit per ${REAL_INTERVAL_SECONDS} s`;
  return [
    { scenario: s, metric: 'setup', value: `${r.providersPerHost} providers per host, ${r.shards || 'no'} child processes, ${o.placement}, claimer with ${o.claimers} workers` },
    { scenario: s, metric: 'time to converge (every tree in Placement; the claimer already claiming)', value: `${round(r.convergeSeconds)} s${r.converged ? '' : ' (NOT converged)'}` },
    {
      scenario: s,
      metric: 'first sync: requests per host (reads/writes), retries',
      value: `${round(r.convergePhase.agents.reads / r.hosts)}/${round(r.convergePhase.agents.writes / r.hosts)}, ${r.firstSyncRetries} retries, ${r.firstSyncFailed} failed`,
    },
    {
      scenario: s,
      metric: `Placement requests / host / min, steady (${scaled})`,
      value: round(steady, 2),
      goal: '<= 1',
      baseline: nova ? `${round(nova.perHostPerMinute, 1)} (${nova.derivation})` : skipped,
    },
    {
      scenario: s,
      metric: 'Placement requests / min from the whole fleet, steady (same scaling)',
      value: Math.round(steady * r.hosts),
      baseline: nova ? `${Math.round(nova.fleetPerMinute)} (estimate, as above)` : skipped,
    },
    { scenario: s, metric: `as measured at the ${o.interval} s interval`, value: `${round(measuredPerHostPerMinute(r.steady.agents.requests, r.hosts, r.steady.seconds), 1)} req/host/min, ${r.steady.agents.writes} writes` },
    { scenario: s, metric: 'Placement requests / host / min while claims land (same scaling)', value: round(claiming, 2) },
    { scenario: s, metric: `agents' 409s / writes (whole run; ${r.claimPhase.drifted} hosts change inventory while claims land)`, value: `${agentConflicts} / ${agentWrites} (${percent(agentConflicts, agentWrites)} %)` },
    {
      scenario: s,
      metric: `claimer: ${r.claimer.claimed} claims in ${round(r.claimPhase.seconds)} s (${round(r.claimer.claimed / r.claimPhase.seconds)}/s), ${r.hostsFull} of ${r.hosts} hosts full; 409s / allocation writes`,
      value: `${r.claimer.conflicts} / ${r.claimer.puts} (${percent(r.claimer.conflicts, r.claimer.puts)} %), ${r.claimer.gaveUp} gave up`,
    },
    { scenario: s, metric: 'claimer: GET /allocation_candidates p50 / p99, PUT /allocations p50 / p99', value: `${r.claimer.candidatesMs.p50} / ${r.claimer.candidatesMs.p99} ms, ${r.claimer.putMs.p50} / ${r.claimer.putMs.p99} ms` },
    { scenario: s, metric: `over-allocations (usage > (total - reserved) x ratio, ${r.providersChecked} providers)`, value: r.overAllocations.length, goal: '0' },
    { scenario: s, metric: 'scenario wall time', value: round(r.wallSeconds), unit: 's' },
  ];
}

/** Placement's price of an agent request (steady window) and of a landed claim (claim phase), as the run measured them. */
function costOf(r: FleetOutcome): PlacementCost {
  return placementCost(
    { cpuSeconds: r.steady.placementCpu, agentRequests: r.steady.agents.requests },
    { cpuSeconds: r.claimPhase.placementCpu, agentRequests: r.claimPhase.agents.requests, claims: r.claimer.claimed },
  );
}

/** Placement's CPU in the claim phase and the steady window, and the cores that come to. */
export function placementRows(r: FleetOutcome, o: { interval: number }): BenchRow[] {
  const s = `fleet, ${r.hosts} hosts`;
  if (Number.isNaN(r.steady.placementCpu)) return [];
  const claiming = busyCores(r.claimPhase.placementCpu, r.claimPhase.seconds);
  const steady = busyCores(r.steady.placementCpu, r.steady.seconds);
  const cost = costOf(r);
  const claimRate = r.claimer.claimed / r.claimPhase.seconds;
  const atRealInterval = perHostPerMinute(r.steady.agents.requests, r.steady.audits);
  return [
    {
      scenario: s,
      metric: 'Placement CPU (uwsgi + PostgreSQL): cores busy while claims land / in the steady window',
      value: `${round(claiming, 2)} / ${round(steady, 2)} (audits every ${o.interval} s)`,
    },
    { scenario: s, metric: 'Placement CPU per agent request (steady) / per landed claim (candidates, write, retries)', value: `${round(cost.perAgentRequestMs, 1)} / ${round(cost.perClaimMs)} ms` },
    {
      scenario: s,
      metric: `Placement cores to serve this fleet at one audit per ${REAL_INTERVAL_SECONDS} s while ${round(claimRate)} claims/s land (at these prices; a floor)`,
      value: round(coresNeeded(cost, r.hosts, atRealInterval, claimRate), 2),
    },
  ];
}

/** Whole numbers, comma-separated (`--fleet-hosts=200,1000`). */
function flagList(name: string, fallback: number): number[] {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (!arg) return [fallback];
  const ns = arg.slice(name.length + 3).split(',').map(Number);
  if (ns.length === 0 || ns.some((n) => !Number.isInteger(n) || n <= 0)) throw new Error(`--${name} must be whole numbers separated by commas, not ${arg}`);
  return ns;
}

export async function runFleetBench(opts: BenchOptions): Promise<BenchResult> {
  const sizes = flagList('fleet-hosts', opts.quick ? 10 : 200);
  const placementWorkers = flag('fleet-placement-workers', 4);
  const interval = flag('fleet-interval', opts.quick ? 5 : 10);
  const window = flag('fleet-window', opts.quick ? 10 : 30);
  const claimers = flag('fleet-claimers', 4);
  // One Placement for every size, with the backlog the largest needs (`up` with another backlog restarts it).
  const maxCandidates = flag('fleet-max-candidates', 0);
  const env = stackEnv(placementWorkers, Math.max(...sizes), maxCandidates);
  const stackVars = stackOutput(env, 'env');
  const release = /^OPENSTACK_RELEASE=(.*)$/m.exec(stackVars)?.[1] ?? 'unknown';
  const database = /^PLACEMENT_PG_DB=(.*)$/m.exec(stackVars)?.[1];
  if (!database) throw new Error(`scripts/stack env named no PLACEMENT_PG_DB for a PostgreSQL Placement: ${stackVars.trim()}`);
  const placement = `Placement ${release} on PostgreSQL with ${placementWorkers} uwsgi workers${maxCandidates > 0 ? `, max_allocation_candidates ${maxCandidates}` : ''}`;
  const cpu = new PlacementCpu(join(String(env.STACK_DIR), `placement-${PORT}`, 'uwsgi.pid'), database);
  stack(env, 'up', 'placement');
  try {
    const rows: BenchRow[] = [];
    const runs: Array<Record<string, unknown>> = [];
    const outcomes: FleetOutcome[] = [];
    for (const hosts of sizes) {
      stack(env, 'purge-placement');
      const r = await runFleet({
        hosts,
        shards: flag('fleet-shards', opts.quick ? 1 : 4),
        placementUrl: `http://127.0.0.1:${PORT}`,
        auditInterval: interval,
        windowSeconds: window,
        claimers,
        driftEvery: flag('fleet-drift-every', 4),
        claimSeconds: flag('fleet-claim-seconds', opts.quick ? 30 : 60),
        placementCpu: cpu,
        log: (line) => process.stderr.write(`${line}\n`),
      });
      // nova's report client on one host of the same shape, holding as many instances as a fleet
      // host ended with, on the same Placement (its own host, removed afterwards).
      const novaHost = await novaHostCounts(`http://127.0.0.1:${PORT}`, r.providersPerHost, Math.round(r.claimer.claimed / Math.max(1, r.hosts)));
      const { overAllocations, ...rest } = r;
      rows.push(...fleetRows(r, { interval, window, placementWorkers, claimers, placement }, novaHost), ...placementRows(r, { interval }));
      runs.push({ ...rest, overAllocations: overAllocations.slice(0, 20), novaHost });
      outcomes.push(r);
    }
    rows.push(...claimRateRows(outcomes));
    const details = { runs, placementWorkers, interval, window };
    return { name: 'fleet', rows, details: runs.length === 1 ? { ...runs[0], placementWorkers, interval, window } : details };
  } finally {
    cpu.stop();
    stack(env, 'down', 'placement');
  }
}

/**
 * Each larger fleet's claim rate against the first (smallest listed) size's, run just before on
 * the same Placement, and the cores Placement would need to give the larger fleet the smaller one's
 * claim rate, at the prices (CPU per request and per claim) the larger run measured.
 */
export function claimRateRows(outcomes: readonly FleetOutcome[]): BenchRow[] {
  const [base, ...rest] = outcomes;
  if (!base) return [];
  const rate = (r: FleetOutcome): number => r.claimer.claimed / r.claimPhase.seconds;
  return rest.flatMap((r) => {
    const scenario = `fleet, ${r.hosts} vs ${base.hosts} hosts`;
    const rows: BenchRow[] = [
      { scenario, metric: 'claims/s, ratio (the claimer kept fed as the fleet grows)', value: `${round(rate(r) / rate(base), 2)} (${round(rate(r), 1)} / ${round(rate(base), 1)} claims/s)`, goal: '>= 0.8' },
    ];
    if (!Number.isNaN(r.steady.placementCpu)) {
      const cost = costOf(r);
      const cores = coresNeeded(cost, r.hosts, perHostPerMinute(r.steady.agents.requests, r.steady.audits), rate(base));
      rows.push({ scenario, metric: `Placement cores busy for ${r.hosts} hosts at ${round(rate(base), 1)} claims/s (the ${base.hosts}-host rate; a floor, at the ${r.hosts}-host run's prices)`, value: round(cores, 2) });
    }
    return rows;
  });
}
