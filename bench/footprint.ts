/**
 * The daemon's footprint, as an operator's `ps` would see it: the built binary as a process on the
 * dev stack (fake driver, node as the unit runs it), its RSS and CPU idle, with 100 instances,
 * and during a burst of 200 spawns; and cold start to ready (process start to the "compute-agent
 * up" line, which is when READY=1 goes to systemd). Medians of several starts. Idle RSS is read
 * 3 s after ready and again once settled (`footprint-memory.ts` says why), split into file-backed
 * and private memory; a second start with `--inspect` gives the V8 heap, external memory and the
 * modules loaded. Goals: RSS < 60 MB idle, < 80 MB with 100 instances.
 * nova-compute for comparison, measured in the same run: the RSS of nova's report client process
 * (`nova-baselines.ts`) after it registered the 69-provider tree and idled as long as the agent.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { agentSpec, removeAgent, type AgentSpec } from './agents';
import { ControlPlane } from './control-plane';
import { heapBreakdown, rssSplit, settledRss, type HeapBreakdown, type RssSplit } from './footprint-memory';
import { freePort } from './inspector';
import { median, round, type BenchOptions, type BenchResult, type BenchRow } from './lib';
import { novaFootprint } from './nova-baselines';
import { cpuSeconds, statusMb } from './proc';

const PLACEMENT_URL = process.env.PLACEMENT_URL ?? 'http://127.0.0.1:8778';
const TRANSPORT_URL = process.env.TRANSPORT_URL ?? 'rabbit://guest:guest@127.0.0.1:5672/';
const BIN = join(__dirname, '..', 'agent', 'cli', 'main.js');
const FLAVOR = { name: 'm1.tiny', vcpus: 1, memory_mb: 512, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };
const UNIT = join(__dirname, '..', '..', 'systemd', 'compute-agent.service');

/**
 * NODE_OPTIONS as the shipped systemd unit sets it, so the bench measures the daemon as it runs.
 * systemd takes the quotes around the whole assignment or around the value alone.
 */
export function unitNodeOptions(unitText: string): string {
  const m = /^Environment="?NODE_OPTIONS=(.*)$/m.exec(unitText);
  return m?.[1]?.trim().replace(/^"|"$/g, '') ?? '';
}

/**
 * The flags the unit's ExecStart gives node before the script (V8's own flags, which NODE_OPTIONS
 * refuses): `ExecStart=/usr/bin/env node --a --b /opt/.../main.js run` gives ['--a', '--b'].
 */
export function unitNodeArgs(unitText: string): string[] {
  const words = /^ExecStart=(.*)$/m.exec(unitText)?.[1]?.trim().split(/\s+/) ?? [];
  const node = words.findIndex((w) => w === 'node' || w.endsWith('/node'));
  if (node < 0) return [];
  const rest = words.slice(node + 1);
  const script = rest.findIndex((w) => !w.startsWith('-'));
  return script < 0 ? rest : rest.slice(0, script);
}

/** How the unit runs node: NODE_OPTIONS and the flags on its command line. */
export interface UnitNode {
  readonly options: string;
  readonly args: readonly string[];
}

export function unitNode(unitText: string): UnitNode {
  return { options: unitNodeOptions(unitText), args: unitNodeArgs(unitText) };
}

const NODE_DEFAULTS: UnitNode = { options: '', args: [] };
const describe = (n: UnitNode): string => [n.options && `NODE_OPTIONS=${n.options}`, n.args.length > 0 && `node ${n.args.join(' ')}`].filter(Boolean).join(', ') || 'Node defaults';

const rssMb = (pid: number): number => statusMb(pid, 'VmRSS');

/** RSS of a bare `node` idling on this machine: the floor any Node daemon starts from. */
async function bareNodeRss(): Promise<RssSplit> {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 1500));
  const rss = rssSplit(child.pid ?? 0);
  child.kill();
  return rss;
}

async function start(spec: AgentSpec, node: UnitNode, extraArgs: readonly string[] = []): Promise<{ child: ChildProcess; readyMs: number }> {
  const t0 = Date.now();
  const env = { ...process.env, NODE_OPTIONS: node.options };
  const child = spawn(process.execPath, [...node.args, ...extraArgs, BIN, 'run', '--config-file', spec.file], { stdio: ['ignore', 'pipe', 'pipe'], env });
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

/** The heap breakdown of a daemon started with `--inspect` (which costs a few MB of its own), once settled. */
async function inspectedBreakdown(spec: AgentSpec, node: UnitNode, settleSeconds: number): Promise<HeapBreakdown> {
  const port = await freePort();
  const { child } = await start(spec, node, [`--inspect=127.0.0.1:${port}`]);
  try {
    await settledRss(child.pid ?? 0, settleSeconds);
    return await heapBreakdown(port);
  } finally {
    await stop(child);
  }
}

const split = (s: RssSplit): string => `${round(s.file)} / ${round(s.anon)} MB`;

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
  const node = unitNode(readFileSync(UNIT, 'utf8'));
  const settle = opts.quick ? 20 : 30;
  try {
    await cp.start();
    // Node's own defaults first, for comparison with the unit's settings.
    const plain = await start(spec, NODE_DEFAULTS);
    const defaults = (await settledRss(plain.child.pid ?? 0, settle)).settled;
    await stop(plain.child);
    const breakdown = await inspectedBreakdown(spec, node, settle);
    for (let i = 0; i < starts; i++) {
      const s = await start(spec, node);
      readies.push(s.readyMs);
      if (i < starts - 1) await stop(s.child);
      else child = s.child;
    }
    const pid = child?.pid ?? 0;
    await new Promise((r) => setTimeout(r, 3000));
    const afterStart = rssSplit(pid);
    const c0 = cpuSeconds(pid);
    const { settled: idle, series } = await settledRss(pid, settle);
    const idleCpu = (cpuSeconds(pid) - c0) / settle;
    const bare = await bareNodeRss();
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
    const nova = await novaFootprint(PLACEMENT_URL, settle);
    const novaRss = typeof nova === 'string' ? `skipped: ${nova}` : `${round(nova.rssMb)} MB (nova ${nova.novaVersion} report client process, this run)`;
    const asShipped = `daemon, fake driver, ${describe(node)} as the unit runs it`;
    const b = breakdown;
    const rows: BenchRow[] = [
      { scenario: 'daemon, fake driver', metric: 'cold start to ready (median)', value: round(median(readies)), unit: 'ms' },
      { scenario: asShipped, metric: `RSS idle (settled, ${settle} s after ready)`, value: round(idle.rss), unit: 'MB', goal: '< 60 MB', baseline: novaRss },
      { scenario: asShipped, metric: 'RSS 3 s after ready (start-up garbage not yet returned)', value: round(afterStart.rss), unit: 'MB' },
      { scenario: 'daemon, fake driver, Node defaults', metric: `RSS idle (settled, ${settle} s after ready)`, value: round(defaults.rss), unit: 'MB' },
      { scenario: asShipped, metric: 'RSS idle: file-backed (node binary, libraries; shared) / private anonymous', value: split(idle) },
      { scenario: 'bare `node -e setTimeout`', metric: 'RSS (file-backed / private anonymous)', value: `${round(bare.rss)} MB (${split(bare)})` },
      { scenario: `${asShipped}, --inspect, after a full GC`, metric: 'V8 heap used / committed; external (of it ArrayBuffers)', value: `${round(b.heapUsed)} / ${round(b.heapTotal)} MB; ${round(b.external)} (${round(b.arrayBuffers)}) MB` },
      { scenario: `${asShipped}, --inspect, after a full GC`, metric: 'private memory outside the V8 heap (malloc, stacks, inspector)', value: round(b.split.anon - b.heapTotal), unit: 'MB' },
      { scenario: `${asShipped}, --inspect`, metric: 'modules loaded: own + node_modules / node built-ins', value: `${b.modules - b.packageModules} + ${b.packageModules} / ${b.builtins}` },
      { scenario: 'daemon, fake driver', metric: `CPU idle (over the ${settle} s settling)`, value: round(idleCpu * 100, 2), unit: '% of a core' },
      { scenario: `daemon with ${n} instances`, metric: 'RSS', value: round(rss100), unit: 'MB', goal: '< 80 MB' },
      // CPU per spawn, not only per second: the burst's length is Placement's, which other load moves.
      { scenario: `daemon during a burst of ${burst.length} spawns`, metric: 'RSS peak / CPU', value: `${round(peak)} MB / ${round(burstCpu * 100)} % of a core, ${round((burstCpu * burstSeconds * 1000) / burst.length, 2)} ms per spawn` },
    ];
    return { name: 'footprint', rows, details: { nova, node, defaults, readies, afterStart, idle, series, breakdown, bare, idleCpu, rss100, peak, burstCpu, burstSeconds } };
  } finally {
    if (child) await stop(child);
    await cp.close();
    await removeAgent(spec, PLACEMENT_URL);
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
