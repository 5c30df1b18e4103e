// RpcService wiring from a configuration, on the fake broker.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../../../config/loader';
import { createLogger } from '../../../../lib/logging/logger';
import { FakeBroker } from '../../../helpers/fake-broker';
import { AgentMetrics } from '../../../../agent/ops/metrics';
import type { BrokerStatus } from '../../../../agent/rpc/amqp/broker';
import { RpcService } from '../../../../agent/rpc/service';
import { hostMethods } from '../../../../agent/compute/adapters/host-methods';
import { COMPUTE_TOPIC } from '../../../../agent/compute/method-table';
import { registerMethods } from '../../../../agent/compute/register';
import { Dispatcher } from '../../../../agent/rpc/endpoint/dispatcher';
import { RABBIT } from './harness';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ca-svc-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function config(extra = ''): ReturnType<typeof loadConfig>['config'] {
  const f = join(dir, 'a.conf');
  writeFileSync(f, `[DEFAULT]\nhost = h1\nstate_path = ${dir}\ncontrol_exchange = nova\n${extra}`);
  return loadConfig({ files: [f], env: {} }).config;
}

test('the unit-test rabbit options are the schema defaults (but a short reply window)', () => {
  expect({ ...config().oslo_messaging_rabbit, kombu_missing_consumer_retry_timeout: 1 }).toEqual(RABBIT);
});

test('serves compute.<host> with get_host_uptime; a corrupt dedupe window is a warning, not a failure', async () => {
  writeFileSync(join(dir, 'rpc-dedupe-window.json'), 'torn');
  const lines: string[] = [];
  const { logger } = createLogger({ sink: { write: (l) => void lines.push(l) } });
  const broker = new FakeBroker();
  const svc = new RpcService({ config: config('executor_thread_pool_size = 3\n'), logger, broker, dispatcher: registerMethods(new Dispatcher(), hostMethods({ hostUptime: async () => 'up' })), topic: COMPUTE_TOPIC });
  await svc.start();
  expect(broker.queueNames()).toEqual(expect.arrayContaining(['compute', 'compute.h1']));
  await expect(svc.client.call({ topic: 'compute', server: 'h1', version: '6.0' }, 'get_host_uptime', {})).resolves.toBe('up');
  const text = lines.join('');
  expect(text).toContain('RPC de-duplication window unreadable; starting empty');
  expect(text).toContain('"prefetch":3');
  expect(text).toContain('"msg":"broker connected"');
  const reply = svc.client.replyQueueName ?? '';
  expect(reply).toMatch(/^reply_[0-9a-f]{32}$/);
  await svc.stop(1000);
  expect(broker.isConnected).toBe(false);
  // Random names are never declared again: the private fanout queue and the reply queue go.
  expect(broker.queueNames().filter((q) => q === reply || q.startsWith('compute_fanout'))).toEqual([]);
});

test('rabbit_qos_prefetch_count wins over the pool size; a dead-letter exchange is declared', async () => {
  const lines: string[] = [];
  const { logger } = createLogger({ sink: { write: (l) => void lines.push(l) } });
  const broker = new FakeBroker();
  const svc = new RpcService({ config: config('rpc_dead_letter_exchange = agent-dlx\n[oslo_messaging_rabbit]\nrabbit_qos_prefetch_count = 7\n'), logger, broker, dispatcher: new Dispatcher(), topic: 'compute' });
  await svc.start();
  expect(lines.join('')).toContain('"prefetch":7');
  expect(broker.hasQueue('agent-dlx')).toBe(true);
  await svc.stop(1000);
});

/** The fake broker, with a hand on the status listeners the service subscribed. */
class StatusFakeBroker extends FakeBroker {
  readonly subscribed: Array<(s: BrokerStatus) => void> = [];
  override onStatus(listener: (s: BrokerStatus) => void): () => void {
    this.subscribed.push(listener);
    return super.onStatus(listener);
  }
}

test('a reconnection after an outage: one info line with the time from the broker’s return to consuming, and the /metrics histograms', async () => {
  const lines: string[] = [];
  const { logger } = createLogger({ sink: { write: (l) => void lines.push(l) } });
  const metrics = new AgentMetrics(Date.now, false);
  const broker = new StatusFakeBroker();
  const svc = new RpcService({
    config: config(),
    logger,
    broker,
    dispatcher: new Dispatcher(),
    topic: 'compute',
    onRecovery: (r) => metrics.brokerRecovered(r.outageMs / 1000, r.sinceLastFailureMs / 1000),
  });
  for (const l of broker.subscribed) l({ type: 'connected', broker: 'mq:5672', recovery: { outageMs: 18_750, sinceLastFailureMs: 1_390, failedAttempts: 18 } });
  const recovered = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((r) => r.msg === 'broker connection recovered; consuming again');
  expect(recovered).toEqual([expect.objectContaining({ level: 'info', broker: 'mq:5672', outage_s: 18.75, back_to_consuming_s: 1.39, failed_attempts: 18 })]);
  const { body } = await metrics.render();
  expect(body).toContain('compute_agent_broker_back_to_consuming_seconds_bucket{le="2"} 1');
  expect(body).toContain('compute_agent_broker_back_to_consuming_seconds_bucket{le="1"} 0');
  expect(body).toContain('compute_agent_broker_outage_seconds_sum 18.75');
  // The first connection is no outage: the plain line, nothing observed.
  for (const l of broker.subscribed) l({ type: 'connected', broker: 'mq:5672' });
  expect(lines.join('')).toContain('"msg":"broker connected"');
  expect((await metrics.render()).body).toContain('compute_agent_broker_outage_seconds_count 1');
  await svc.stop(1000);
});

test('rpc_ping_enabled answers oslo_rpc_server_ping; off, the method does not exist', async () => {
  const { logger } = createLogger({ sink: { write: () => undefined } });
  for (const enabled of [true, false]) {
    const broker = new FakeBroker();
    const svc = new RpcService({ config: config(`rpc_ping_enabled = ${String(enabled)}\n`), logger, broker, dispatcher: new Dispatcher(), topic: 'compute' });
    await svc.start();
    const answer = svc.client.call({ topic: 'compute', server: 'h1', version: '1.0' }, 'oslo_rpc_server_ping', {});
    if (enabled) await expect(answer).resolves.toBe('pong');
    else await expect(answer).rejects.toMatchObject({ className: 'UnsupportedVersion' });
    await svc.stop(1000);
  }
});

test("kolla 2025.1's messaging: the stream fanout and queue manager names, shared by server and client", async () => {
  const { logger } = createLogger({ sink: { write: () => undefined } });
  const broker = new FakeBroker();
  const node = `node-${process.pid}-${Date.now()}`;
  const rabbit = `[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\nrabbit_transient_quorum_queue = true\nrabbit_stream_fanout = true\nuse_queue_manager = true\nrabbit_qos_prefetch_count = 10\nhostname = ${node}\n`;
  const svc = new RpcService({ config: config(rabbit), logger, broker, dispatcher: registerMethods(new Dispatcher(), hostMethods({ hostUptime: async () => 'up' })), topic: 'compute' });
  try {
    await svc.start();
    await expect(svc.client.call({ topic: 'compute', server: 'h1', version: '6.0' }, 'get_host_uptime', {})).resolves.toBe('up');
    expect(broker.queueNames()).toEqual(expect.arrayContaining(['compute', 'compute.h1', 'compute_fanout', `reply_${node}:compute-agent:1`]));
    await svc.stop(1000);
    // Kept as oslo keeps them: the stream is shared, the reply name comes back at the next start.
    expect(broker.queueNames()).toEqual(expect.arrayContaining(['compute_fanout', `reply_${node}:compute-agent:1`]));
  } finally {
    rmSync(`/dev/shm/${node}_compute-agent_qmanager`, { force: true });
  }
});

test('the queue manager names queues after DEFAULT.host unless hostname is set, so agents sharing a machine never share a reply queue', async () => {
  const { logger } = createLogger({ sink: { write: () => undefined } });
  const host = `h-${process.pid}-${Date.now()}`;
  const names: string[][] = [];
  try {
    for (const extra of ['', 'processname = other\n']) {
      const broker = new FakeBroker();
      const f = join(dir, 'qm.conf');
      writeFileSync(f, `[DEFAULT]\nhost = ${host}\nstate_path = ${dir}\ncontrol_exchange = nova\nrpc_ping_enabled = true\n[oslo_messaging_rabbit]\nuse_queue_manager = true\n${extra}`);
      const svc = new RpcService({ config: loadConfig({ files: [f], env: {} }).config, logger, broker, dispatcher: new Dispatcher(), topic: 'compute' });
      await svc.start();
      // The reply queue is declared with the first call; the server's fanout queue took 1.
      await svc.client.call({ topic: 'compute', server: host, version: '1.0' }, 'oslo_rpc_server_ping', {});
      names.push(broker.queueNames().filter((q) => q.startsWith('reply_')));
      await svc.stop(1000);
    }
    expect(names).toEqual([[`reply_${host}:compute-agent:2`], [`reply_${host}:other:2`]]);
  } finally {
    for (const p of ['compute-agent', 'other']) rmSync(`/dev/shm/${host}_${p}_qmanager`, { force: true });
  }
});
