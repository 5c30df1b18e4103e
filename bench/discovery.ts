/**
 * Discovery benchmark: wall time of one discovery pass (fake driver on this machine's real
 * probes, as `compute-agent discover` runs it) and the longest event-loop stall during it.
 *
 * Goals: a pass under 300 ms, no stall over 20 ms (a stall that long would delay RPC and heartbeats). Stall is measured two ways:
 * a 1 ms interval timer (the largest gap between ticks beyond 1 ms) and
 * `perf_hooks.monitorEventLoopDelay` (its max). Each is the worst within a run; the report gives
 * the median over runs (after warm-up runs that are not counted), and the worst run.
 *
 * Run: `node dist/bench/discovery.js [runs]`; prints one JSON object.
 */
import { cpus, loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { silentLogger } from '../lib/logging/logger';
import { discoverOnce } from '../agent/discover';
import { loadConfig } from '../config/loader';

export interface DiscoveryBenchResult {
  readonly benchmark: 'discovery';
  readonly runs: number;
  readonly providers: number;
  /** The very first pass of the process (module loading, cold caches); not in the median. */
  readonly coldWallMs: number;
  readonly wallMs: { readonly median: number; readonly min: number; readonly max: number };
  readonly stallMs: { readonly median: number; readonly max: number; readonly histogramMaxMedian: number };
  readonly probeMs: Readonly<Record<string, number>>;
  readonly goals: { readonly wallMs: 300; readonly stallMs: 20 };
  /**
   * 1-minute load average and CPU count at the end: on a shared machine a stall includes time
   * the process was not scheduled at all.
   */
  readonly machine: { readonly cpus: number; readonly loadAverage: number };
  readonly pass: boolean;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};
const round = (n: number): number => Math.round(n * 100) / 100;

async function onePass(): Promise<{ wall: number; stall: number; histMax: number; providers: number; probes: Record<string, number> }> {
  const { config } = loadConfig({
    files: [],
    env: { COMPUTE_AGENT__DEFAULT__HOST: 'bench-host', COMPUTE_AGENT__DEFAULT__COMPUTE_DRIVER: 'fake' },
    defaultFile: '/nonexistent/compute-agent.conf',
  });
  const hist = monitorEventLoopDelay({ resolution: 1 });
  let last = process.hrtime.bigint();
  let stall = 0;
  const ticker = setInterval(() => {
    const now = process.hrtime.bigint();
    stall = Math.max(stall, Number(now - last) / 1e6 - 1);
    last = now;
  }, 1);
  hist.enable();
  const started = process.hrtime.bigint();
  const result = await discoverOnce({ config, logger: silentLogger(), rootUuid: '00000000-0000-4000-8000-00000000bec4' });
  const wall = Number(process.hrtime.bigint() - started) / 1e6;
  await new Promise((r) => setTimeout(r, 5)); // let the ticker see the tail of the pass
  clearInterval(ticker);
  hist.disable();
  const probes: Record<string, number> = {};
  for (const [name, outcome] of Object.entries(result.facts ?? {})) probes[name] = outcome.ms;
  return { wall, stall: Math.max(stall, 0), histMax: hist.max / 1e6, providers: result.tree.snapshot().length, probes };
}

/** Runs the benchmark: `warmup` uncounted passes, then `runs` measured ones. */
export async function benchDiscovery(runs = 9, warmup = 2): Promise<DiscoveryBenchResult> {
  let coldWallMs = 0;
  for (let i = 0; i < Math.max(warmup, 1); i++) {
    const p = await onePass();
    if (i === 0) coldWallMs = round(p.wall);
  }
  const passes = [];
  for (let i = 0; i < runs; i++) {
    passes.push(await onePass());
    await new Promise((r) => setTimeout(r, 20));
  }
  const walls = passes.map((p) => p.wall);
  const stalls = passes.map((p) => p.stall);
  const probeMs: Record<string, number> = {};
  for (const name of Object.keys(passes[0]?.probes ?? {})) probeMs[name] = round(median(passes.map((p) => p.probes[name] ?? 0)));
  const wallMs = { median: round(median(walls)), min: round(Math.min(...walls)), max: round(Math.max(...walls)) };
  const stallMs = { median: round(median(stalls)), max: round(Math.max(...stalls)), histogramMaxMedian: round(median(passes.map((p) => p.histMax))) };
  return {
    benchmark: 'discovery',
    runs,
    providers: passes[0]?.providers ?? 0,
    coldWallMs,
    wallMs,
    stallMs,
    probeMs,
    goals: { wallMs: 300, stallMs: 20 },
    machine: { cpus: cpus().length, loadAverage: round(loadavg()[0] ?? 0) },
    pass: wallMs.median < 300 && stallMs.median < 20,
  };
}

if (require.main === module) {
  const runs = Number(process.argv[2] ?? '9');
  benchDiscovery(Number.isInteger(runs) && runs > 0 ? runs : 9).then(
    (r) => process.stdout.write(`${JSON.stringify(r, null, 2)}\n`),
    (e: unknown) => {
      process.stderr.write(`discovery benchmark failed: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
