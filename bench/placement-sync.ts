/**
 * Placement traffic of the tracker, side by side with nova's report client (anchors measured on
 * this machine kind with nova Zed: `docs/nova-baselines.md#placement-report-client`).
 *
 * For hosts of 1, 69 (nova's benchmark shape) and 300 providers, against a private, fresh
 * Placement per run (uwsgi 1x1, SQLite, as the anchors): the first sync, a steady-state sync, and a
 * sync after a scheduler-style claim on the root followed by an inventory change. Requests by
 * method, wall time, CPU time of this process; medians of the runs.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { silentLogger } from '../lib/logging/logger';
import { NoAuth } from '../tracker/placement/auth';
import { PlacementClient } from '../tracker/placement/client';
import { PlacementHttp, RequestCounter } from '../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../tracker/tracker';
import { median, round, type BenchOptions, type BenchResult, type BenchRow } from './lib';
import { nameUuid, SyntheticHost } from './trees';

const PORT = Number(process.env.BENCH_PLACEMENT_PORT ?? '18779');
const STACK = join(__dirname, '..', '..', 'scripts', 'stack');

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
  const tracker = new ResourceTracker({
    api,
    driver: host,
    nodename: name,
    rootUuid: root,
    initialRatios: initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 }),
    logger: silentLogger(),
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
  return { first, steady, claimed, quietAfter };
}

/**
 * The same scenarios run by nova Zed's report client alone
 * (`docs/nova-baselines.md#placement-report-client`).
 */
const NOVA: Record<string, Record<string, string>> = {
  '1': { first: '5 req, 102 ms', steady: '0 req (RT: 1)', claimed: '6 req incl. 1x409, 37 ms' },
  '69': { first: '275 req, 1644 ms', steady: '0 req (RT: 69)', claimed: '210 req incl. 1x409, 1018 ms' },
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
    for (const phase of ['first', 'steady', 'claimed', 'quietAfter'] as const) {
      const m = (k: keyof Measure): number => median(all.map((r) => r[phase]?.[k] ?? NaN));
      const scenario = `${size} providers, ${phase === 'claimed' ? 'after a claim + inventory change' : phase === 'quietAfter' ? 'steady after that' : phase === 'first' ? 'first sync' : 'steady state'}`;
      const goal = phase === 'steady' || phase === 'quietAfter' ? '0 writes, <= 1 read' : undefined;
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
