/**
 * RPC round trips: the agent's RPC server against a real oslo.messaging 14 RPC server (Debian's
 * python3, threading executor) for the same method (`echo`, a ~60 B payload) on the
 * same broker, in one run. Each server runs in its own process; runs alternate between them and
 * the medians are reported. Clients: the real oslo.messaging client (one transport shared by its
 * threads, as a nova service does) and the agent's own client.
 *
 *   npm run build && node dist/bench/rpc.js [--quick]        (prints the JSON result)
 *
 * The oslo server is the baseline, measured in the same run (`docs/nova-baselines.md#oslo-rpc` tells
 * what to expect on an idle machine). Numbers here move with the machine's load: compare the two
 * servers within one run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseTransportUrl } from '../config/transport-url';
import { silentLogger } from '../lib/logging/logger';
import { AmqpBroker } from '../agent/rpc/amqp/amqp-broker';
import { RpcClient } from '../agent/rpc/endpoint/client';
import { defaultRabbit } from './rpc-agent-server';
import { rawRoundTrips } from './rpc-raw-echo';
import { cpuSeconds } from './proc';

/** One row of the result, in the shape of the repo's bench rows. */
export interface RpcBenchRow {
  readonly scenario: string;
  readonly metric: string;
  readonly value: number | string;
  readonly unit?: string;
  readonly baseline?: number | string;
}

export interface RpcBenchResult {
  readonly name: 'rpc';
  readonly rows: readonly RpcBenchRow[];
  readonly details: Record<string, unknown>;
}

interface Sample {
  readonly rate: number;
  readonly p50_ms: number;
  readonly p99_ms: number;
  readonly server_cpu_ms_per_call: number;
}

const PAYLOAD = { payload: { hello: 'world', n: 1, nested: { list: [1, 2, 3] }, pad: 'x'.repeat(8) } };
const PYTHON = '/usr/bin/python3';

function repoRoot(): string {
  let d = __dirname;
  while (!existsSync(join(d, 'package.json'))) {
    const up = dirname(d);
    if (up === d) throw new Error('repository root not found');
    d = up;
  }
  return d;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? NaN) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};
const pct = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
const r2 = (n: number): number => Math.round(n * 100) / 100;

/** CPU time (ms) a process has used, from /proc (clock ticks of 10 ms). */
const cpuMs = (pid: number): number => cpuSeconds(pid) * 1000;

async function startServer(cmd: string, args: string[]): Promise<{ child: ChildProcess; stop: () => Promise<void> }> {
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${cmd} did not start: ${err.slice(-2000)}`)), 60_000);
    child.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('READY')) {
        clearTimeout(t);
        resolve();
      }
    });
    child.on('exit', (code) => reject(new Error(`${cmd} exited ${String(code)}: ${err.slice(-2000)}`)));
  });
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  return {
    child,
    stop: async () => {
      child.stdin?.end();
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The oslo.messaging client's own measurement (oslo_peer.py bench). */
function osloClient(peer: string, url: string, exchange: string, topic: string, server: string, count: number, threads: number): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const ops = [{ op: 'bench', method: 'echo', args: PAYLOAD, count, threads, warmup: 20 }];
    const c = spawn(PYTHON, [peer, 'client', '--url', url, '--exchange', exchange, '--topic', topic, '--server', server, '--ops', JSON.stringify(ops)]);
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.on('exit', () => {
      const r = JSON.parse(out.trim() || '{}') as { ok?: boolean; rate: number; p50_ms: number; p99_ms: number; message?: string };
      if (!r.ok) return reject(new Error(`oslo client failed: ${out}`));
      resolve({ rate: r.rate, p50_ms: r.p50_ms, p99_ms: r.p99_ms, server_cpu_ms_per_call: NaN });
    });
  });
}

/** The agent's client: `concurrency` callers sharing one client (one reply queue). */
async function agentClient(client: RpcClient, server: string, topic: string, count: number, concurrency: number): Promise<Sample> {
  const target = { topic, server, version: '6.0' };
  for (let i = 0; i < 20; i++) await client.call(target, 'echo', PAYLOAD);
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    [...Array(concurrency).keys()].map(async () => {
      while (next < count) {
        next++;
        const s = performance.now();
        await client.call(target, 'echo', PAYLOAD);
        lat.push(performance.now() - s);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { rate: count / seconds, p50_ms: pct(lat, 0.5), p99_ms: pct(lat, 0.99), server_cpu_ms_per_call: NaN };
}

export interface RpcBenchOptions {
  readonly quick?: boolean;
  readonly url?: string;
  readonly runs?: number;
}

/** Runs the comparison; resolves to a JSON-able result. Needs the broker and a built `dist/`. */
export async function runRpcBench(opts: RpcBenchOptions = {}): Promise<RpcBenchResult> {
  const url = opts.url ?? process.env.TRANSPORT_URL ?? 'rabbit://guest:guest@127.0.0.1:5672/';
  const runs = opts.runs ?? (opts.quick ? 1 : 3);
  const seq = opts.quick ? 100 : 1000;
  const conc = opts.quick ? 200 : 2000;
  const root = repoRoot();
  const peer = join(root, 'test', 'integration', 'rpc', 'peers', 'oslo_peer.py');
  const agentJs = join(root, 'dist', 'bench', 'rpc-agent-server.js');
  const rawJs = join(root, 'dist', 'bench', 'rpc-raw-echo.js');
  if (!existsSync(agentJs)) throw new Error(`${agentJs} is missing: run npm run build first`);
  const id = randomBytes(3).toString('hex');
  const [exchange, topic] = [`bench-rpc-${id}`, `bench-compute-${id}`];
  const hosts = { agent: `agent-${id}`, 'agent-journaled': `agentj-${id}`, oslo: `oslo-${id}` } as const;
  type ServerName = keyof typeof hosts;
  const servers: Record<ServerName, Awaited<ReturnType<typeof startServer>>> = {
    agent: await startServer(process.execPath, [agentJs, url, exchange, topic, hosts.agent]),
    'agent-journaled': await startServer(process.execPath, [agentJs, url, exchange, topic, hosts['agent-journaled'], '--journaled']),
    oslo: await startServer(PYTHON, [peer, 'server', '--url', url, '--exchange', exchange, '--topic', topic, '--server', hosts.oslo]),
  };
  // The broker's own round trip, with no RPC layer, at the size of an oslo request for PAYLOAD.
  const amqpUrl = url.replace(/^rabbit:\/\//, 'amqp://').split(',')[0] ?? url;
  const rawQueue = `bench-raw-${id}`;
  const rawServer = await startServer(process.execPath, [rawJs, amqpUrl, rawQueue]);
  const rawBody = Buffer.from(JSON.stringify({ 'oslo.version': '2.0', 'oslo.message': JSON.stringify({ method: 'echo', args: PAYLOAD, version: '6.0', _unique_id: id.repeat(5), _msg_id: id.repeat(5), _reply_q: `reply_${id.repeat(5)}` }) }));
  const raw: Sample[] = [];
  const broker = new AmqpBroker({ transport: parseTransportUrl(url), rabbit: defaultRabbit(), logger: silentLogger(), initialAttempts: 3 });
  await broker.start();
  const client = new RpcClient({ broker, logger: silentLogger(), rabbit: defaultRabbit(), controlExchange: exchange, defaultTimeoutMs: 60_000 });
  const modes = [
    { key: 'oslo client, sequential', calls: seq, run: (s: ServerName) => osloClient(peer, url, exchange, topic, hosts[s], seq, 1) },
    { key: 'oslo client, 8 threads shared', calls: conc, run: (s: ServerName) => osloClient(peer, url, exchange, topic, hosts[s], conc, 8) },
    { key: 'agent client, sequential', calls: seq, run: (s: ServerName) => agentClient(client, hosts[s], topic, seq, 1) },
    { key: 'agent client, 8 concurrent', calls: conc, run: (s: ServerName) => agentClient(client, hosts[s], topic, conc, 8) },
  ];
  const samples: Record<string, Record<string, Sample[]>> = {};
  try {
    for (let run = 0; run < runs; run++) {
      const order: ServerName[] = run % 2 === 0 ? ['agent', 'oslo', 'agent-journaled'] : ['oslo', 'agent', 'agent-journaled'];
      raw.push({ ...(await rawRoundTrips(amqpUrl, rawQueue, rawBody, seq)), p99_ms: NaN, server_cpu_ms_per_call: NaN });
      for (const mode of modes) {
        for (const s of order) {
          const pid = servers[s].child.pid ?? 0;
          const cpu0 = cpuMs(pid);
          const sample = await mode.run(s);
          const perCall = (cpuMs(pid) - cpu0) / (mode.calls + 20);
          ((samples[mode.key] ??= {})[s] ??= []).push({ ...sample, server_cpu_ms_per_call: perCall });
        }
      }
    }
  } finally {
    await client.close();
    await broker.close();
    await Promise.allSettled([...Object.values(servers), rawServer].map((s) => s.stop()));
    await cleanup(url, exchange, topic, Object.values(hosts));
  }
  const rows: RpcBenchRow[] = [];
  const details: Record<string, unknown> = { runs, sequential_calls: seq, concurrent_calls: conc, payload_bytes: JSON.stringify(PAYLOAD).length, samples, raw };
  const floor = 'broker floor: bare amqplib echo, no RPC layer, sequential';
  rows.push({ scenario: floor, metric: 'round trips/s', value: r2(median(raw.map((x) => x.rate))), baseline: 'a sequential call cannot beat this' });
  rows.push({ scenario: floor, metric: 'p50', value: r2(median(raw.map((x) => x.p50_ms))), unit: 'ms' });
  for (const mode of modes) {
    const m = samples[mode.key] ?? {};
    const med = (s: ServerName, f: keyof Sample): number => r2(median((m[s] ?? []).map((x) => x[f])));
    for (const s of ['agent', 'agent-journaled'] as const) {
      const scenario = `${mode.key} -> ${s} server`;
      rows.push({ scenario, metric: 'calls/s', value: med(s, 'rate'), baseline: `oslo server ${med('oslo', 'rate')}` });
      rows.push({ scenario, metric: 'p50', value: med(s, 'p50_ms'), unit: 'ms', baseline: `oslo server ${med('oslo', 'p50_ms')} ms` });
      rows.push({ scenario, metric: 'p99', value: med(s, 'p99_ms'), unit: 'ms', baseline: `oslo server ${med('oslo', 'p99_ms')} ms` });
      rows.push({ scenario, metric: 'server CPU per call', value: med(s, 'server_cpu_ms_per_call'), unit: 'ms', baseline: `oslo server ${med('oslo', 'server_cpu_ms_per_call')} ms` });
    }
  }
  return { name: 'rpc', rows, details };
}

async function cleanup(url: string, exchange: string, topic: string, hosts: readonly string[]): Promise<void> {
  const b = new AmqpBroker({ transport: parseTransportUrl(url), rabbit: defaultRabbit(), logger: silentLogger(), initialAttempts: 2 });
  try {
    await b.start();
    for (const q of [topic, ...hosts.map((h) => `${topic}.${h}`)]) await b.deleteQueue(q);
    for (const x of [exchange, `${topic}_fanout`]) await b.deleteExchange(x);
  } finally {
    await b.close();
  }
}

if (require.main === module) {
  runRpcBench({ quick: process.argv.includes('--quick') }).then(
    (r) => console.log(JSON.stringify(r, null, 2)),
    (e: unknown) => {
      console.error(`bench rpc: ${e instanceof Error ? e.message : String(e)}`);
      process.exitCode = 1;
    },
  );
}
