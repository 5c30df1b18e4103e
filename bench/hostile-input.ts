/**
 * Memory under hostile input: the built daemon (fake driver, node as the unit runs it) on
 * the dev stack, under its own host name and control exchange, gets rounds of malformed RPC bodies
 * on `compute.<host>`: 10 000 a round, 1 250 of them 100 kB (unknown methods with huge names
 * called with a reply queue that does not exist, huge arguments, calls cut short, random bytes),
 * the rest from the fuzz generator. RSS is sampled during the round for the peak; after the round
 * (queue empty, a valid call answered, a few seconds idle) RSS is read as it is left, then a full
 * GC is forced through the inspector and RSS, V8 heap used and external + ArrayBuffer memory are
 * read: heap and external that grow are retained objects; RSS that grows while they stay is the
 * allocator keeping freed pages.
 *
 * Goal: the peak is bounded by the prefetch and the largest accepted body, not by the burst, and
 * RSS stays flat from the second round on. Nothing is asserted. `--hostile-rounds=N` (4; 2 with
 * `--quick`), `--hostile-bodies=N` a round (10 000; 1 000 with `--quick`). The daemon runs with
 * `--inspect` on a loopback port (a few MB).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { connect } from 'amqplib';
import { agentSpec, removeAgent } from './agents';
import { ControlPlane } from './control-plane';
import { stop, unitNode, type UnitNode } from './footprint';
import { fuzzBodies, hugeBodies } from './fuzz-bodies';
import { collectAndMeasure, freePort } from './inspector';
import { round, type BenchOptions, type BenchResult, type BenchRow } from './lib';
import { statusMb } from './proc';

const PLACEMENT_URL = process.env.PLACEMENT_URL ?? 'http://127.0.0.1:8778';
const TRANSPORT_URL = process.env.TRANSPORT_URL ?? 'rabbit://guest:guest@127.0.0.1:5672/';
const BIN = join(__dirname, '..', 'agent', 'cli', 'main.js');
const UNIT = join(__dirname, '..', '..', 'systemd', 'compute-agent.service');
const HUGE_BYTES = 100_000;
const METHODS = ['get_host_uptime', 'build_and_run_instance', 'terminate_instance', 'nope'];
const SETTLE_MS = 5000;

const MB = 2 ** 20;

export interface RoundSample {
  readonly round: number;
  readonly seconds: number;
  readonly peakRssMb: number;
  /** RSS a few seconds after the round, as the daemon left it. */
  readonly rssMb: number;
  /** After a forced full GC. */
  readonly gc: { readonly rssMb: number; readonly heapUsedMb: number; readonly heapTotalMb: number; readonly externalMb: number; readonly arrayBuffersMb: number };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Starts the daemon with its log in `logFile` (an operator's journal, not a pipe the bench must drain). */
async function startDaemon(configFile: string, logFile: string, inspectPort: number, node: UnitNode): Promise<ChildProcess> {
  const fd = openSync(logFile, 'a');
  const args = [`--inspect=127.0.0.1:${inspectPort}`, BIN, 'run', '--config-file', configFile];
  const child = spawn(process.execPath, [...node.args, ...args], { stdio: ['ignore', fd, fd], env: { ...process.env, NODE_OPTIONS: node.options } });
  closeSync(fd);
  const t0 = Date.now();
  while (!readFileSync(logFile, 'utf8').includes('"msg":"compute-agent up"')) {
    if (child.exitCode !== null || Date.now() - t0 > 60000) throw new Error(`agent did not start; see ${logFile}`);
    await sleep(50);
  }
  return child;
}

/** One round's bodies: one 100 kB body in every eight, spread through the round. */
function roundBodies(n: number, seed: number, replyQueue: string, missingQueue: string, quick: boolean): Buffer[] {
  const huge = n / 8;
  const small = fuzzBodies(n - huge, seed, { replyQueue, methods: METHODS, hugeBytes: quick ? 2000 : 4000 });
  const big = hugeBodies(huge, seed + 1, HUGE_BYTES, { replyQueue: missingQueue, methods: METHODS });
  return small.flatMap((b, i) => (i % 7 === 6 && big.length ? [b, big.pop() as Buffer] : [b])).concat(big);
}

export async function runHostileInputBench(opts: BenchOptions & { readonly rounds?: number }): Promise<BenchResult> {
  const flag = (name: string): number | undefined => {
    const v = process.argv.find((x) => x.startsWith(`--hostile-${name}=`))?.slice(`--hostile-${name}=`.length);
    return v === undefined ? undefined : Number(v);
  };
  const rounds = opts.rounds ?? flag('rounds') ?? (opts.quick ? 2 : 4);
  const perRound = Math.ceil((flag('bodies') ?? (opts.quick ? 1000 : 10_000)) / 8) * 8;
  const exchange = `bench-hi-${randomUUID().slice(0, 8)}`;
  const spec = agentSpec(`bench-hostile-${exchange.slice(-8)}`, exchange, { placementUrl: PLACEMENT_URL, transportUrl: TRANSPORT_URL });
  const queue = `compute.${spec.host}`;
  const replyQueue = `${exchange}-replies`;
  const inspectPort = await freePort();
  const node = unitNode(readFileSync(UNIT, 'utf8'));
  const cp = new ControlPlane(exchange, TRANSPORT_URL);
  const conn = await connect(TRANSPORT_URL.replace(/^rabbit:/, 'amqp:'));
  const samples: RoundSample[] = [];
  let child: ChildProcess | undefined;
  try {
    await cp.start();
    const ch = await conn.createConfirmChannel();
    // Fuzzed calls answer here; keeping only the newest replies keeps the broker small.
    await ch.assertQueue(replyQueue, { durable: false, arguments: { 'x-max-length': 100, 'x-expires': 600_000 } });
    child = await startDaemon(spec.file, join(spec.dir, 'agent.log'), inspectPort, node);
    const pid = child.pid ?? 0;
    await cp.call(spec.host, 'get_host_uptime', {});
    const sample = async (r: number, seconds: number, peak: number): Promise<RoundSample> => {
      await sleep(SETTLE_MS);
      const rssMb = statusMb(pid, 'VmRSS');
      const m = await collectAndMeasure(inspectPort);
      const gc = { rssMb: round(statusMb(pid, 'VmRSS')), heapUsedMb: round(m.heapUsed / MB), heapTotalMb: round(m.heapTotal / MB), externalMb: round(m.external / MB), arrayBuffersMb: round(m.arrayBuffers / MB) };
      return { round: r, seconds: round(seconds), peakRssMb: round(Math.max(peak, rssMb)), rssMb: round(rssMb), gc };
    };
    samples.push(await sample(0, 0, 0));
    for (let r = 1; r <= rounds; r++) {
      const bodies = roundBodies(perRound, 1000 * r, replyQueue, `${exchange}-no-such-queue`, opts.quick);
      let peak = 0;
      const sampler = setInterval(() => (peak = Math.max(peak, statusMb(pid, 'VmRSS'))), 100);
      const t0 = Date.now();
      const props = { contentType: 'application/json', contentEncoding: 'utf-8', deliveryMode: 2 };
      for (let i = 0; i < bodies.length; i += 500) {
        for (const body of bodies.slice(i, i + 500)) ch.sendToQueue(queue, body, props);
        await ch.waitForConfirms();
      }
      while ((await ch.checkQueue(queue)).messageCount > 0) await sleep(100);
      await cp.call(spec.host, 'get_host_uptime', {});
      const seconds = (Date.now() - t0) / 1000;
      clearInterval(sampler);
      samples.push(await sample(r, seconds, peak));
      process.stderr.write(`bench: hostile-input round ${r}: ${JSON.stringify(samples[samples.length - 1])}\n`);
    }
    return { name: 'hostile-input', rows: rowsOf(samples, perRound), details: { node, hugeBytes: HUGE_BYTES, methods: METHODS, settleMs: SETTLE_MS, samples } };
  } finally {
    if (child) await stop(child);
    await conn.close().catch(() => undefined);
    await cp.close();
    await removeAgent(spec, PLACEMENT_URL);
  }
}

function rowsOf(samples: readonly RoundSample[], perRound: number): BenchRow[] {
  const s = `daemon, ${perRound} malformed bodies a round (1 in 8 of ${HUGE_BYTES / 1000} kB)`;
  const rows: BenchRow[] = samples.map((x) => ({
    scenario: s,
    metric: x.round === 0 ? 'idle: RSS; after a full GC: RSS / heap used / external' : `after round ${x.round}: RSS (peak in the round); after a full GC: RSS / heap used / external`,
    value: `${x.rssMb}${x.round === 0 ? '' : ` (${x.peakRssMb})`}; ${x.gc.rssMb} / ${x.gc.heapUsedMb} / ${x.gc.externalMb} MB`,
  }));
  const second = samples.find((x) => x.round === 2);
  const last = samples[samples.length - 1];
  if (second && last && last.round > second.round) {
    const perRoundMb = (a: number, b: number): number => round((b - a) / (last.round - second.round), 2);
    rows.push({ scenario: s, metric: `RSS growth per round from round 2 to ${last.round} (as left; after a full GC)`, value: `${perRoundMb(second.rssMb, last.rssMb)}; ${perRoundMb(second.gc.rssMb, last.gc.rssMb)} MB`, goal: '~0 (flat)' });
  }
  return rows;
}

if (require.main === module) {
  runHostileInputBench({ quick: process.argv.includes('--quick') }).then(
    (r) => console.log(JSON.stringify(r.rows, null, 2)),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
