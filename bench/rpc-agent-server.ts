/**
 * The agent's RPC server as a process of its own, for `bench/rpc.ts`: the same AmqpBroker,
 * RpcServer and journal the daemon runs, serving `echo` (the oslo echo server's method and
 * result) and `get_host_uptime`. Prints READY once consuming; stops on SIGTERM or when stdin
 * closes.
 *
 *   node dist/bench/rpc-agent-server.js <transport_url> <exchange> <topic> <server> [--journaled]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../config/loader';
import { parseTransportUrl } from '../config/transport-url';
import { DedupeWindow } from '../agent/journal/dedupe-window';
import { InMemoryRequestJournal } from '../agent/journal/memory';
import { silentLogger } from '../lib/logging/logger';
import { AmqpBroker } from '../agent/rpc/amqp/amqp-broker';
import { arg } from '../agent/rpc/endpoint/args';
import { hostMethods } from '../agent/compute/adapters/host-methods';
import { registerMethods } from '../agent/compute/register';
import { Dispatcher } from '../agent/rpc/endpoint/dispatcher';
import { RpcServer } from '../agent/rpc/endpoint/server';
import type { RabbitOptions } from '../agent/rpc/oslo/topology';
import { procUptimeProvider } from '../agent/compute/adapters/host-uptime';

/** The [oslo_messaging_rabbit] options with their defaults (no file, no environment). */
export function defaultRabbit(): RabbitOptions {
  return loadConfig({ env: {}, defaultFile: '/nonexistent/compute-agent.conf' }).config.oslo_messaging_rabbit;
}

async function main(): Promise<void> {
  const [url, exchange, topic, server] = process.argv.slice(2);
  if (!url || !exchange || !topic || !server) throw new Error('usage: rpc-agent-server <transport_url> <exchange> <topic> <server> [--journaled]');
  const journaled = process.argv.includes('--journaled');
  const logger = silentLogger();
  const rabbit = defaultRabbit();
  const state = mkdtempSync(join(tmpdir(), 'ca-bench-'));
  const broker = new AmqpBroker({ transport: parseTransportUrl(url), rabbit: rabbit, logger, initialAttempts: 3 });
  const dispatcher = registerMethods(new Dispatcher(), hostMethods({ hostUptime: procUptimeProvider() })).register({
    name: 'echo',
    versions: { min: '6.0' },
    args: { payload: arg.any() },
    journaled,
    handler: async (a, call) => ({ echo: a.payload, request_id: call.context.request_id ?? null }),
  });
  const rpc = new RpcServer({
    broker,
    dispatcher,
    journal: new InMemoryRequestJournal(new DedupeWindow({ path: join(state, 'window.json') })),
    logger,
    target: { exchange, topic, server },
    rabbit: rabbit,
    prefetch: 64,
    maxMessageBytes: 8 << 20,
  });
  await broker.start();
  await rpc.start();
  process.stdout.write('READY\n');
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.stdin.on('end', () => resolve());
    process.stdin.resume();
  });
  await rpc.stop(5000);
  await broker.close();
  rmSync(state, { recursive: true, force: true });
}

if (require.main === module) {
  main().catch((e: unknown) => {
    process.stderr.write(`rpc-agent-server: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  });
}
