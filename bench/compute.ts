/**
 * The spawn and move paths, measured end to end on the dev stack (real Placement, real RabbitMQ)
 * with two in-process agents on the fake driver:
 *
 * - spawn: N concurrent `build_and_run_instance` casts to one agent, from the cast to its
 *   `instance.create.end` notification: throughput and p50/p99 latency; Placement round trips per
 *   spawn without a scheduler claim (goal: 1 write, 0 reads) and with one (goal: 0-1 reads);
 *   unclaimed spawns/s as a fraction of Placement's own rate for that one write, measured by a
 *   plain client around the spawns in the same run (`claim-ceiling.ts`; goal >= 0.9);
 * - moves: Placement round trips of each transition (cold migration, confirm, revert, live
 *   migration) summed over both agents (goal: one atomic write per transition).
 *
 * nova baselines (from its code, `docs/placement.md#how-nova-moves-allocations`): a move is two
 * writes before the compute is even involved (conductor's move + the scheduler's claim), then a
 * GET + PUT to confirm, and a revert is a GET of two consumers + POST.
 */
import { randomUUID } from 'node:crypto';
import type { Daemon } from '../agent/daemon';
import { RequestCounter } from '../tracker/placement/http';
import { NoAuth } from '../tracker/placement/auth';
import { PlacementClient } from '../tracker/placement/client';
import { PlacementHttp } from '../tracker/placement/http';
import { agentConfig, agentSpec, removeAgent, rootOf, startDaemon, type AgentSpec } from './agents';
import { measureClaimCeiling, type ClaimCeiling } from './claim-ceiling';
import { ControlPlane } from './control-plane';
import { median, percentile, pool, round, type BenchOptions, type BenchResult, type BenchRow } from './lib';

const PLACEMENT_URL = process.env.PLACEMENT_URL ?? 'http://127.0.0.1:8778';
const TRANSPORT_URL = process.env.TRANSPORT_URL ?? 'rabbit://guest:guest@127.0.0.1:5672/';
const FLAVOR = { name: 'm1.small', vcpus: 2, memory_mb: 2048, root_gb: 10, ephemeral_gb: 0, swap: 0, extra_specs: {} };
/** What FLAVOR claims on the root provider: the body a scheduler writes for it. */
const CLAIM = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 10 };

const inst = (): Record<string, unknown> => {
  const uuid = randomUUID();
  return { uuid, display_name: `bench-${uuid.slice(0, 6)}`, project_id: 'bench', user_id: 'bench', flavor: FLAVOR };
};

interface Agent {
  spec: AgentSpec;
  daemon: Daemon;
  counter: RequestCounter;
}

const perOp = (c: RequestCounter, n: number): { reads: number; writes: number } => ({ reads: round(c.reads() / n, 2), writes: round(c.writes() / n, 2) });

interface SpawnPhase {
  readonly latencies: number[];
  readonly seconds: number;
  /** CPU this process used from the first cast to the last create.end (ms). */
  readonly cpuMs: number;
  readonly reads: number;
  readonly writes: number;
}

async function spawnPhase(cp: ControlPlane, a: Agent, n: number, claimed: boolean, api: PlacementClient): Promise<SpawnPhase> {
  const instances = Array.from({ length: n }, inst);
  if (claimed) {
    // A scheduler claimed first (not counted: it is the scheduler's request, not the agent's).
    const root = rootOf(a.spec);
    await pool(instances, 8, async (i) => {
      await api.putAllocations(String(i.uuid), { allocations: { [root]: { resources: CLAIM } }, project_id: 'bench', user_id: 'bench', consumer_generation: null });
    });
  }
  a.counter.reset();
  const sent = new Map<string, number>();
  const cpu0 = process.cpuUsage();
  const t0 = Date.now();
  await Promise.all(
    instances.map((i) => {
      sent.set(String(i.uuid), Date.now());
      return cp.cast(a.spec.host, 'build_and_run_instance', { instance: i, ...(claimed ? { host_list: [{ service_host: a.spec.host, allocation_request: '{}' }] } : {}) });
    }),
  );
  await cp.waitFor('instance.create.end', instances.map((i) => String(i.uuid)), 300000);
  const seconds = (Date.now() - t0) / 1000;
  const used = process.cpuUsage(cpu0);
  const cpuMs = (used.user + used.system) / 1000;
  const latencies: number[] = [];
  cp.events.forEach((e, k) => {
    const at = sent.get(e.uuid);
    if (e.event_type === 'instance.create.end' && at !== undefined) latencies.push((cp.arrivals[k] ?? at) - at);
  });
  const { reads, writes } = perOp(a.counter, n);
  for (const i of instances) await cp.cast(a.spec.host, 'terminate_instance', { instance: { uuid: i.uuid } });
  await cp.waitFor('instance.delete.end', instances.map((i) => String(i.uuid)), 300000);
  return { latencies, seconds, cpuMs, reads, writes };
}

/** Rounds of the same spawn phase as one: times, CPU and latencies added up, counts per spawn averaged. */
function mergeRounds(rounds: readonly SpawnPhase[]): SpawnPhase {
  const sum = (f: (p: SpawnPhase) => number): number => rounds.reduce((x, p) => x + f(p), 0);
  return {
    latencies: rounds.flatMap((p) => p.latencies),
    seconds: sum((p) => p.seconds),
    cpuMs: sum((p) => p.cpuMs),
    reads: round(sum((p) => p.reads) / rounds.length, 2),
    writes: round(sum((p) => p.writes) / rounds.length, 2),
  };
}

async function movePhase(cp: ControlPlane, a: Agent, b: Agent, n: number): Promise<Record<string, { reads: number; writes: number }>> {
  const both = (): void => {
    a.counter.reset();
    b.counter.reset();
  };
  const sum = (): RequestCounter => {
    const c = new RequestCounter();
    for (const [k, v] of [...a.counter.snapshot(), ...b.counter.snapshot()]) {
      const [m = '', r = '', s = ''] = k.split(' ');
      for (let i = 0; i < v; i++) c.add(m, r, s === 'error' ? 'error' : Number(s));
    }
    return c;
  };
  const instances = Array.from({ length: 2 * n }, inst);
  for (const i of instances) await cp.cast(a.spec.host, 'build_and_run_instance', { instance: i });
  await cp.waitFor('instance.create.end', instances.map((i) => String(i.uuid)));
  const migs = instances.map((i) => ({ i, m: { uuid: randomUUID(), migration_type: 'migration', source_compute: a.spec.host, dest_compute: b.spec.host } }));
  const out: Record<string, { reads: number; writes: number }> = {};
  both();
  for (const { i, m } of migs) await cp.cast(b.spec.host, 'prep_resize', { instance: i, flavor: FLAVOR, migration: m });
  await cp.waitFor('instance.resize_finish.end', migs.map((x) => String(x.i.uuid)));
  out['cold migration (prep, resize, finish)'] = perOp(sum(), migs.length);
  both();
  for (const { i, m } of migs.slice(0, n)) await cp.cast(a.spec.host, 'confirm_resize', { instance: { uuid: i.uuid }, migration: m });
  await cp.waitFor('instance.resize_confirm.end', migs.slice(0, n).map((x) => String(x.i.uuid)));
  await new Promise((r) => setTimeout(r, 300));
  out.confirm = perOp(sum(), n);
  both();
  for (const { i, m } of migs.slice(n)) await cp.cast(b.spec.host, 'revert_resize', { instance: { uuid: i.uuid }, migration: m });
  await cp.waitFor('instance.resize_revert.end', migs.slice(n).map((x) => String(x.i.uuid)));
  out.revert = perOp(sum(), n);
  // Live: the reverted ones are on a again; move them to b.
  both();
  const lives = migs.slice(n).map(({ i }) => ({ i, m: { uuid: randomUUID(), migration_type: 'live-migration', source_compute: a.spec.host, dest_compute: b.spec.host } }));
  for (const { i, m } of lives) {
    const data = await cp.call<Record<string, unknown>>(b.spec.host, 'check_can_live_migrate_destination', { instance: i, migration: m });
    await cp.cast(a.spec.host, 'live_migration', { instance: { uuid: i.uuid }, dest: b.spec.host, migration: m, migrate_data: data });
  }
  await cp.waitFor('instance.live_migration_post.end', lives.map((x) => String(x.i.uuid)));
  out['live migration (check, migrate, post)'] = perOp(sum(), n);
  for (const d of [a, b]) for (const r of d.daemon.compute?.instances() ?? []) await cp.cast(d.spec.host, 'terminate_instance', { instance: { uuid: r.uuid } });
  await cp.waitFor('instance.delete.end', instances.map((i) => String(i.uuid)));
  return out;
}

export async function runComputeBench(opts: BenchOptions): Promise<BenchResult> {
  const n = opts.quick ? 20 : 200;
  const moves = opts.quick ? 3 : 10;
  const exchange = `bench-${randomUUID().slice(0, 8)}`;
  const ends = { placementUrl: PLACEMENT_URL, transportUrl: TRANSPORT_URL };
  const cp = new ControlPlane(exchange, TRANSPORT_URL);
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(PLACEMENT_URL) }));
  const agents: Agent[] = [];
  try {
    await cp.start();
    for (const h of ['a', 'b']) {
      const spec = agentSpec(`bench-${h}-${exchange.slice(-8)}`, exchange, ends);
      const counter = new RequestCounter();
      agents.push({ spec, counter, daemon: await startDaemon(spec, undefined, counter) });
    }
    const [a, b] = agents as [Agent, Agent];
    // The n casts reach Placement as at most `inFlight` claims at once: the agent takes no more
    // requests than its prefetch. Placement's ceiling is measured at that concurrency (at n, a
    // plain client mostly measures uwsgi's listen backlog overflowing), on the same Placement and
    // provider, before and after each round of unclaimed spawns: the shared stack's load drifts,
    // and the ceilings around the spawns are what they had to work with.
    const config = agentConfig(a.spec);
    const prefetch = config.oslo_messaging_rabbit.rabbit_qos_prefetch_count > 0 ? config.oslo_messaging_rabbit.rabbit_qos_prefetch_count : config.DEFAULT.executor_thread_pool_size;
    const inFlight = Math.min(n, prefetch);
    const root = rootOf(a.spec);
    const ceiling = (): Promise<ClaimCeiling> => measureClaimCeiling({ placementUrl: PLACEMENT_URL, provider: root, resources: CLAIM, writes: n, concurrency: inFlight });
    const ceilings = [await ceiling()];
    const rounds: SpawnPhase[] = [];
    // Three rounds: on a shared two-core machine Placement's own rate moves by a tenth from one
    // ceiling run to the next, and each round is held to the two ceilings around it.
    for (let r = 0; r < (opts.quick ? 1 : 3); r++) {
      rounds.push(await spawnPhase(cp, a, n, false, api));
      ceilings.push(await ceiling());
    }
    const unclaimed = mergeRounds(rounds);
    const claimed = await spawnPhase(cp, a, n, true, api);
    const moveCounts = await movePhase(cp, a, b, moves);
    const unclaimedRate = (n * rounds.length) / unclaimed.seconds;
    const claimedRate = n / claimed.seconds;
    const ceilingRate = ceilings.reduce((x, c) => x + c.perSecond, 0) / ceilings.length;
    const failed = ceilings.reduce((x, c) => x + c.failed, 0);
    const roundFractions = rounds.map((p, k) => round(n / p.seconds / (((ceilings[k]?.perSecond ?? 0) + (ceilings[k + 1]?.perSecond ?? 0)) / 2), 2));
    const spawnRows = (label: string, p: SpawnPhase): BenchRow[] => [
      { scenario: `spawn, ${n} concurrent casts, ${label}`, metric: 'cast to create.end p50 / p99', value: `${round(median(p.latencies))} / ${round(percentile(p.latencies, 99))} ms` },
      { scenario: `spawn, ${n} concurrent casts, ${label}`, metric: 'CPU of this process per spawn (the agents and the bench\'s caster)', value: round(p.cpuMs / p.latencies.length, 2), unit: 'ms' },
    ];
    const rows: BenchRow[] = [
      { scenario: `spawn, ${n} concurrent casts, no scheduler claim`, metric: `throughput (${rounds.length} round(s))`, value: `${round(unclaimedRate)} spawns/s (${rounds.map((r) => round(n / r.seconds)).join(' / ')})` },
      {
        scenario: `Placement alone, ${inFlight} concurrent PUT /allocations (scheduler's body, plain client)`,
        metric: `claim writes/s, mean of ${ceilings.length} runs around ${rounds.length} round(s) of spawns`,
        value: `${round(ceilingRate)} (${ceilings.map((c) => c.perSecond).join(' / ')})${failed ? `, ${failed} failed` : ''}`,
        baseline: 'the ceiling an unclaimed spawn (one such write) is held to',
      },
      {
        scenario: `spawn, ${n} concurrent casts, no scheduler claim`,
        metric: 'spawns/s as a fraction of the claim-write ceiling (each round against the ceilings around it)',
        value: `${round(unclaimedRate / ceilingRate, 2)} (${roundFractions.join(' / ')})`,
        goal: '>= 0.9',
      },
      ...spawnRows('no scheduler claim', unclaimed),
      { scenario: `spawn, ${n} concurrent casts, scheduler claimed`, metric: 'throughput (one read each, no write)', value: round(claimedRate), unit: 'spawns/s' },
      ...spawnRows('scheduler claimed', claimed),
      { scenario: 'spawn, no scheduler claim', metric: 'Placement reads / writes per spawn', value: `${unclaimed.reads} / ${unclaimed.writes}`, goal: '0 / 1', baseline: 'nova-compute with RT: claim by scheduler + GET allocations' },
      { scenario: 'spawn, scheduler claimed', metric: 'Placement reads / writes per spawn', value: `${claimed.reads} / ${claimed.writes}`, goal: '0-1 / 0' },
    ];
    for (const [k, v] of Object.entries(moveCounts)) {
      rows.push({ scenario: `move: ${k}`, metric: 'Placement reads / writes per transition (both agents)', value: `${v.reads} / ${v.writes}`, goal: 'one atomic write' });
    }
    return { name: 'compute', rows, details: { unclaimed: rounds.map((r) => ({ ...r, latencies: undefined })), latencies: unclaimed.latencies, claimed, ceilings, inFlight, moves: moveCounts } };
  } finally {
    for (const x of agents) await x.daemon.stop('bench end');
    await cp.close();
    for (const x of agents) await removeAgent(x.spec, PLACEMENT_URL);
  }
}

if (require.main === module) {
  runComputeBench({ quick: process.argv.includes('--quick') }).then(
    (r) => console.log(JSON.stringify(r.rows, null, 2)),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
