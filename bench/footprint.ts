/**
 * The daemon's footprint, as an operator's `ps` would see it: the built binary as a process on the
 * dev stack (fake driver), its RSS and CPU idle, with 100 instances, and during a burst of 200
 * spawns; and cold start to ready (process start to the "compute-agent up" line, which is when
 * READY=1 goes to systemd). Medians of several starts. Goal: RSS < 60 MB idle.
 * nova-compute for comparison, measured in the same run: the RSS of nova's report client process
 * (`nova-baselines.ts`) after it registered the 69-provider tree and idled as long as the agent.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { agentSpec, rootOf, type AgentSpec } from './agents';
import { ControlPlane } from './control-plane';
import { median, round, type BenchOptions, type BenchResult, type BenchRow } from './lib';
import { novaFootprint } from './nova-baselines';
import { NoAuth } from '../tracker/placement/auth';
import { PlacementClient } from '../tracker/placement/client';
import { PlacementHttp } from '../tracker/placement/http';

const PLACEMENT_URL = process.env.PLACEMENT_URL ?? 'http://127.0.0.1:8778';
const TRANSPORT_URL = process.env.TRANSPORT_URL ?? 'rabbit://guest:guest@127.0.0.1:5672/';
const BIN = join(__dirname, '..', 'agent', 'cli', 'main.js');
const FLAVOR = { name: 'm1.tiny', vcpus: 1, memory_mb: 512, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };
const TICK = 100; // clock ticks per second (USER_HZ on Linux)
const UNIT = join(__dirname, '..', '..', 'systemd', 'compute-agent.service');
/** Seconds nova's client idles before its RSS is read: as long as the agent idles below. */
const NOVA_IDLE_S = 3;

/** NODE_OPTIONS as the shipped systemd unit sets it, so the bench measures the daemon as it runs. */
export function unitNodeOptions(unitText: string): string {
  const m = /^Environment=NODE_OPTIONS=(.*)$/m.exec(unitText);
  return m?.[1]?.trim().replace(/^"|"$/g, '') ?? '';
}

export function statusMb(pid: number, field: 'VmRSS' | 'RssAnon'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}
const rssMb = (pid: number): number => statusMb(pid, 'VmRSS');

/** RSS of a bare `node` idling on this machine: the floor any Node daemon starts from. */
async function bareNodeRssMb(): Promise<number> {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 1500));
  const rss = rssMb(child.pid ?? 0);
  child.kill();
  return rss;
}

function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(f[11]) + Number(f[12])) / TICK;
}

async function start(spec: AgentSpec, nodeOptions: string): Promise<{ child: ChildProcess; readyMs: number }> {
  const t0 = Date.now();
  const env = { ...process.env, NODE_OPTIONS: nodeOptions };
  const child = spawn(process.execPath, [BIN, 'run', '--config-file', spec.file], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  while (!out.includes('"msg":"compute-agent up"')) {
    if (child.exitCode !== null || Date.now() - t0 > 60000) throw new Error(`agent did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return { child, readyMs: Date.now() - t0 };
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await gone;
}

async function spawnMany(cp: ControlPlane, host: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => randomUUID());
  await Promise.all(ids.map((uuid) => cp.cast(host, 'build_and_run_instance', { instance: { uuid, display_name: 'fp', project_id: 'bench', user_id: 'bench', flavor: FLAVOR } })));
  await cp.waitFor('instance.create.end', ids, 300000);
  return ids;
}

export async function runFootprintBench(opts: BenchOptions): Promise<BenchResult> {
  const starts = opts.quick ? 1 : 3;
  const exchange = `bench-fp-${randomUUID().slice(0, 8)}`;
  const spec = agentSpec(`bench-fp-${exchange.slice(-8)}`, exchange, { placementUrl: PLACEMENT_URL, transportUrl: TRANSPORT_URL });
  const cp = new ControlPlane(exchange, TRANSPORT_URL);
  const readies: number[] = [];
  let child: ChildProcess | undefined;
  const nodeOptions = unitNodeOptions(readFileSync(UNIT, 'utf8'));
  let defaultsRss = NaN;
  try {
    await cp.start();
    // Node's own defaults first, for comparison with the unit's settings.
    const plain = await start(spec, '');
    await new Promise((r) => setTimeout(r, 3000));
    defaultsRss = rssMb(plain.child.pid ?? 0);
    await stop(plain.child);
    for (let i = 0; i < starts; i++) {
      const s = await start(spec, nodeOptions);
      readies.push(s.readyMs);
      if (i < starts - 1) await stop(s.child);
      else child = s.child;
    }
    const pid = child?.pid ?? 0;
    await new Promise((r) => setTimeout(r, 3000));
    const idleRss = rssMb(pid);
    const idlePrivate = statusMb(pid, 'RssAnon');
    const bare = await bareNodeRssMb();
    const c0 = cpuSeconds(pid);
    const window = opts.quick ? 3 : 10;
    await new Promise((r) => setTimeout(r, window * 1000));
    const idleCpu = (cpuSeconds(pid) - c0) / window;
    const hundred = await spawnMany(cp, spec.host, opts.quick ? 20 : 100);
    await new Promise((r) => setTimeout(r, 2000));
    const rss100 = rssMb(pid);
    // A burst of spawns, sampling RSS and CPU while it runs.
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100);
    const c1 = cpuSeconds(pid);
    const t1 = Date.now();
    const burst = await spawnMany(cp, spec.host, opts.quick ? 40 : 200);
    const burstSeconds = (Date.now() - t1) / 1000;
    clearInterval(sampler);
    const burstCpu = (cpuSeconds(pid) - c1) / burstSeconds;
    for (const uuid of [...hundred, ...burst]) await cp.cast(spec.host, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', [...hundred, ...burst], 300000);
    const n = hundred.length;
    const nova = await novaFootprint(PLACEMENT_URL, NOVA_IDLE_S);
    const novaRss = typeof nova === 'string' ? `skipped: ${nova}` : `${round(nova.rssMb)} MB (nova ${nova.novaVersion} report client process, this run)`;
    const asShipped = `daemon, fake driver, NODE_OPTIONS=${nodeOptions || '(none)'} as the unit sets it`;
    const rows: BenchRow[] = [
      { scenario: 'daemon, fake driver', metric: 'cold start to ready (median)', value: round(median(readies)), unit: 'ms' },
      { scenario: asShipped, metric: 'RSS idle', value: round(idleRss), unit: 'MB', goal: '< 60 MB', baseline: novaRss },
      { scenario: 'daemon, fake driver, Node defaults', metric: 'RSS idle', value: round(defaultsRss), unit: 'MB' },
      { scenario: 'daemon, fake driver', metric: 'private (anonymous) memory idle', value: round(idlePrivate), unit: 'MB' },
      { scenario: 'bare `node -e setTimeout`', metric: 'RSS', value: round(bare), unit: 'MB' },
      { scenario: 'daemon, fake driver', metric: 'CPU idle', value: round(idleCpu * 100, 2), unit: '% of a core' },
      { scenario: `daemon with ${n} instances`, metric: 'RSS', value: round(rss100), unit: 'MB' },
      { scenario: `daemon during a burst of ${burst.length} spawns`, metric: 'RSS peak / CPU', value: `${round(peak)} MB / ${round(burstCpu * 100)} % of a core` },
    ];
    return { name: 'footprint', rows, details: { nova, nodeOptions, defaultsRss, readies, idleRss, idlePrivate, bare, idleCpu, rss100, peak, burstCpu, burstSeconds } };
  } finally {
    if (child) await stop(child);
    await cp.close();
    try {
      const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(PLACEMENT_URL) }));
      const root = rootOf(spec);
      for (const p of [...(await api.providersInTree(root))].reverse()) await api.deleteProvider(p.uuid);
    } catch {
      /* best effort */
    }
  }
}

if (require.main === module) {
  runFootprintBench({ quick: process.argv.includes('--quick') }).then(
    (r) => console.log(JSON.stringify(r.rows, null, 2)),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
