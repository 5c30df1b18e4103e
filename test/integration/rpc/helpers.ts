// Shared pieces of the RPC integration tests: the real oslo.messaging peer (Debian's python3),
// unique names on the shared broker, an agent RPC stack on a real broker, and cleanup.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'amqplib';
import { parseTransportUrl } from '../../../config/transport-url';
import { DedupeWindow } from '../../../agent/journal/dedupe-window';
import { InMemoryRequestJournal } from '../../../agent/journal/memory';
import { silentLogger, type Logger } from '../../../lib/logging/logger';
import { AmqpBroker } from '../../../agent/rpc/amqp/amqp-broker';
import { RpcClient } from '../../../agent/rpc/endpoint/client';
import { arg } from '../../../agent/rpc/endpoint/args';
import type { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import { NovaError } from '../../../agent/rpc/oslo/errors';
import { RpcServer } from '../../../agent/rpc/endpoint/server';
import type { RabbitOptions } from '../../../agent/rpc/oslo/topology';
import { transientIds } from '../../../agent/rpc/oslo/queue-manager';
import { RABBIT } from '../../unit/agent/rpc/harness';
import { startPrivateRabbit, type PrivateRabbit } from './private-rabbit';

export { RABBIT };
/** The shared dev-stack broker (scripts/stack), or an override. */
export { TRANSPORT_URL } from '../../helpers/stack';
export const PYTHON = '/usr/bin/python3';
export const PEER = join(__dirname, 'peers', 'oslo_peer.py');

export const unique = (prefix: string): string => `${prefix}-${randomBytes(4).toString('hex')}`;

export interface PeerTarget {
  readonly url: string;
  readonly exchange: string;
  readonly topic: string;
  readonly server?: string;
  /** [oslo_messaging_rabbit] options as key=value. */
  readonly rabbit?: readonly string[];
  /** [DEFAULT] options as key=value. */
  readonly defaults?: readonly string[];
  /** The interpreter and peer script (oslo-release.ts); Debian 12's oslo 14 when absent. */
  readonly runtime?: { readonly command: readonly string[]; readonly peer: string };
}

/** The program and its arguments for one peer run. */
function peerCommand(mode: string, t: PeerTarget, extra: string[] = []): [string, string[]] {
  const [program = PYTHON, ...pre] = t.runtime?.command ?? [PYTHON];
  const args = [...pre, t.runtime?.peer ?? PEER, mode, '--url', t.url, '--exchange', t.exchange, '--topic', t.topic];
  if (t.server) args.push('--server', t.server);
  for (const r of t.rabbit ?? []) args.push('--rabbit', r);
  for (const d of t.defaults ?? []) args.push('--default', d);
  return [program, [...args, ...extra]];
}

/** Runs oslo operations in one Python client process; one parsed JSON result per operation. */
export function pythonClient(t: PeerTarget, ops: readonly object[], timeoutMs = 120_000): Promise<Array<Record<string, unknown>>> {
  return new Promise((resolve, reject) => {
    const [program, args] = peerCommand('client', t, ['--ops', JSON.stringify(ops)]);
    // detached: the peer leads its own process group, whose leader oslo 16's queue manager reads
    // in /proc (the test runner's group leader may be a shell that has exited).
    const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const lines = out.trim().split('\n').filter((l) => l !== '');
      if (code !== 0 || lines.length !== ops.length) return reject(new Error(`python client exited ${String(code)}:\n${out}\n${err.slice(-3000)}`));
      resolve(lines.map((l) => JSON.parse(l) as Record<string, unknown>));
    });
  });
}

export interface PythonServer {
  readonly casts: Array<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** Starts a real oslo.messaging RPC server and waits until it consumes. */
export function pythonServer(t: PeerTarget): Promise<PythonServer> {
  return new Promise((resolve, reject) => {
    const [program, args] = peerCommand('server', t);
    const child: ChildProcess = spawn(program, args, { stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    const casts: Array<Record<string, unknown>> = [];
    let err = '';
    let buf = '';
    const exited = new Promise<void>((r) => child.on('exit', () => r()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`python server did not start:\n${err.slice(-3000)}`));
    }, 60_000);
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line === 'READY') {
          clearTimeout(timer);
          resolve({
            casts,
            stop: async () => {
              child.stdin?.end();
              child.kill('SIGTERM');
              let t: NodeJS.Timeout | undefined;
              await Promise.race([exited, new Promise((r) => (t = setTimeout(r, 10_000)))]);
              clearTimeout(t);
              if (child.exitCode === null && child.signalCode === null) {
                child.kill('SIGKILL');
                await exited;
              }
            },
          });
        } else if (line.startsWith('{')) casts.push((JSON.parse(line) as { cast: Record<string, unknown> }).cast);
      }
    });
    child.on('error', reject);
  });
}

/** Deletes queues and exchanges on a broker; missing ones are fine. */
export async function cleanupBroker(url: string, names: { queues?: readonly string[]; exchanges?: readonly string[] }): Promise<void> {
  const t = parseTransportUrl(url);
  const h = t.hosts[0];
  if (!h) return;
  const conn = await connect({ hostname: h.host, port: h.port, username: h.username ?? 'guest', password: h.password ?? 'guest', vhost: t.virtualHost });
  conn.on('error', () => undefined);
  try {
    for (const q of names.queues ?? []) {
      const ch = await conn.createChannel();
      await ch.deleteQueue(q).catch(() => undefined);
      await ch.close().catch(() => undefined);
    }
    for (const x of names.exchanges ?? []) {
      const ch = await conn.createChannel();
      await ch.deleteExchange(x).catch(() => undefined);
      await ch.close().catch(() => undefined);
    }
  } finally {
    await conn.close().catch(() => undefined);
  }
}

export interface AgentStack {
  readonly broker: AmqpBroker;
  readonly server: RpcServer;
  readonly client: RpcClient;
  readonly stateDir: string;
  stop(): Promise<void>;
}

export interface AgentStackOptions {
  readonly url: string;
  readonly exchange: string;
  readonly topic: string;
  readonly server: string;
  readonly dispatcher: Dispatcher;
  readonly rabbit?: Partial<RabbitOptions>;
  readonly prefetch?: number;
  readonly logger?: Logger;
  readonly maxMessageBytes?: number;
}

/** The agent's RPC server and client on a real broker, as the RpcService wires them. */
export async function agentStack(o: AgentStackOptions): Promise<AgentStack> {
  const rabbit = { ...RABBIT, ...o.rabbit };
  const logger = o.logger ?? silentLogger();
  const stateDir = mkdtempSync(join(tmpdir(), 'ca-rpc-it-'));
  const broker = new AmqpBroker({ transport: parseTransportUrl(o.url), rabbit, logger, initialAttempts: 5, connectionName: `compute-agent-test:${o.server}` });
  await broker.start();
  const fail = async (e: unknown): Promise<never> => {
    await broker.close();
    rmSync(stateDir, { recursive: true, force: true });
    throw e;
  };
  // One naming for both, as the RpcService wires them (the queue manager's counter).
  const ids = transientIds(rabbit);
  const server = new RpcServer({
    broker,
    dispatcher: o.dispatcher,
    journal: new InMemoryRequestJournal(new DedupeWindow({ path: join(stateDir, 'window.json') })),
    logger,
    target: { exchange: o.exchange, topic: o.topic, server: o.server },
    rabbit,
    ids,
    prefetch: o.prefetch ?? 64,
    maxMessageBytes: o.maxMessageBytes ?? 8 << 20,
  });
  await server.start().catch(fail);
  const client = new RpcClient({ broker, logger, rabbit, ids, controlExchange: o.exchange, defaultTimeoutMs: 30_000 });
  return {
    broker,
    server,
    client,
    stateDir,
    stop: async () => {
      await server.stop(5000);
      await client.close();
      await broker.close();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

/** A suite's private RabbitMQ node and what its tests open on it, closed after all of them. */
export interface PrivateRabbitSuite {
  /** The node; throws when it did not start. */
  readonly node: PrivateRabbit;
  agent: AgentStack | undefined;
  publisherBroker: AmqpBroker | undefined;
}

/**
 * Registers a beforeAll that starts a private RabbitMQ (private-rabbit.ts) and an afterAll that
 * stops the suite's agent stack, closes its publisher broker and stops the node.
 */
export function privateRabbitSuite(): PrivateRabbitSuite {
  let node: PrivateRabbit | undefined;
  const suite: PrivateRabbitSuite = {
    get node(): PrivateRabbit {
      if (!node) throw new Error('no private RabbitMQ');
      return node;
    },
    agent: undefined,
    publisherBroker: undefined,
  };
  beforeAll(async () => {
    node = await startPrivateRabbit();
  });
  afterAll(async () => {
    await suite.agent?.stop().catch(() => undefined);
    await suite.publisherBroker?.close().catch(() => undefined);
    await node?.stop();
  });
  return suite;
}

/**
 * The methods both oslo.messaging interop suites serve: `record` keeps each call's arguments in
 * `recorded`; `find_instance` always fails as nova does for a missing instance (InstanceNotFound, 404).
 */
export function registerInteropMethods(dispatcher: Dispatcher, recorded: Array<Record<string, unknown>>): Dispatcher {
  return dispatcher
    .register({ name: 'record', versions: { min: '6.0' }, args: { seq: arg.int(), note: arg.string() }, handler: async (a) => void recorded.push(a) })
    .register({
      name: 'find_instance',
      versions: { min: '6.0' },
      args: { uuid: arg.string() },
      handler: async (a) => {
        throw new NovaError('InstanceNotFound', `Instance ${a.uuid} could not be found.`, { instance_id: a.uuid }, 404);
      },
    });
}
