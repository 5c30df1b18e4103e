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
  await svc.stop(1000);
  expect(broker.isConnected).toBe(false);
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
