// RabbitMQ restarted mid-stream (stop_app / start_app on a private node): the agent reconnects,
// re-declares its topology and consumers, and every cast published with confirms before, during
// and after the outage is handled exactly once.
import { parseTransportUrl } from '../../../config/transport-url';
import { silentLogger } from '../../../lib/logging/logger';
import { AmqpBroker } from '../../../agent/rpc/amqp/amqp-broker';
import { arg } from '../../../agent/rpc/endpoint/args';
import type { BrokerStatus } from '../../../agent/rpc/amqp/broker';
import { RpcClient } from '../../../agent/rpc/endpoint/client';
import { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import { agentStack, RABBIT, TRANSPORT_URL, privateRabbitSuite } from './helpers';

jest.setTimeout(300_000);

// Durable queues and persistent messages: what sits in a queue survives the restart, as it does
// in a deployment with amqp_durable_queues (transient queues lose their content with the broker).
const rabbit = { ...RABBIT, amqp_durable_queues: true };
const target = { topic: 'compute', server: 'restart-host', version: '6.0' };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const suite = privateRabbitSuite();

test('RabbitMQ restarted mid-stream: reconnect, re-declare, nothing confirmed is lost', async () => {
  const node = suite.node;
  const seen = new Map<number, number>();
  const dispatcher = new Dispatcher()
    .register({ name: 'record', versions: { min: '6.0' }, args: { seq: arg.int() }, handler: async (a) => void seen.set(a.seq, (seen.get(a.seq) ?? 0) + 1) })
    .register({ name: 'ping', versions: { min: '6.0' }, args: {}, journaled: false, handler: async () => 'pong' });
  const agent = await agentStack({ url: node.url, exchange: 'nova', topic: 'compute', server: 'restart-host', dispatcher, rabbit, prefetch: 16 });
  suite.agent = agent;
  const statuses: BrokerStatus['type'][] = [];
  agent.broker.onStatus((s) => statuses.push(s.type));
  await expect(agent.client.call(target, 'ping', {})).resolves.toBe('pong'); // creates the (transient) reply queue

  const publisherBroker = new AmqpBroker({ transport: parseTransportUrl(node.url), rabbit, logger: silentLogger(), initialAttempts: 3 });
  suite.publisherBroker = publisherBroker;
  await publisherBroker.start();
  const publisher = new RpcClient({ broker: publisherBroker, logger: silentLogger(), rabbit, controlExchange: 'nova', defaultTimeoutMs: 30_000 });

  const N = 600;
  let confirmed = 0;
  const stream = (async () => {
    for (let seq = 0; seq < N; seq++) {
      await publisher.cast(target, 'record', { seq });
      confirmed++;
      await sleep(5);
    }
  })();
  while (confirmed < 150) await sleep(10);
  await node.stopApp();
  const whenStopped = confirmed;
  await sleep(1500);
  await node.startApp();
  await stream;
  // The stream really spanned the outage: casts were waiting for their confirm while it lasted.
  expect(whenStopped).toBeLessThan(N - 50);

  const deadline = Date.now() + 120_000;
  while (seen.size < N && Date.now() < deadline) await sleep(50);
  const missing = [...Array(N).keys()].filter((s) => !seen.has(s));
  const twice = [...seen.entries()].filter(([, n]) => n > 1).map(([s]) => s);
  expect({ missing, twice }).toEqual({ missing: [], twice: [] });

  expect(statuses).toEqual(expect.arrayContaining(['disconnected', 'connected']));
  // The fanout and reply queues are transient: they exist again only because they were re-declared.
  const queues = await node.queues();
  expect(queues).toEqual(expect.arrayContaining(['compute', 'compute.restart-host', agent.client.replyQueueName]));
  expect(queues.some((q) => q.startsWith('compute_fanout_'))).toBe(true);
  await expect(agent.client.call(target, 'ping', {})).resolves.toBe('pong');
});

test('failover: the first transport_url host refuses, the next one is used', async () => {
  const node = suite.node;
  const url = node.url.replace('@127.0.0.1:', '@127.0.0.1:1,guest:guest@127.0.0.1:');
  const statuses: BrokerStatus[] = [];
  const b = new AmqpBroker({ transport: parseTransportUrl(url), rabbit: { ...rabbit, rabbit_retry_interval: 1 }, logger: silentLogger(), initialAttempts: 3 });
  b.onStatus((s) => statuses.push(s));
  try {
    await b.start();
    expect(statuses.map((s) => s.type)).toEqual(['connect-failed', 'reconnect-scheduled', 'connected']);
    expect(statuses[0]).toMatchObject({ broker: '127.0.0.1:1', reason: 'ECONNREFUSED' });
    expect(statuses[2]).toMatchObject({ broker: `127.0.0.1:${node.port}` });
  } finally {
    await b.close();
  }
});

test('start gives up after the allowed attempts with every reason', async () => {
  const b = new AmqpBroker({ transport: parseTransportUrl('rabbit://guest:guest@127.0.0.1:1,guest:guest@127.0.0.1:2/'), rabbit: RABBIT, logger: silentLogger(), initialAttempts: 2 });
  await expect(b.start()).rejects.toThrow('no broker accepted a connection (127.0.0.1:1: ECONNREFUSED; 127.0.0.1:2: ECONNREFUSED)');
  await b.close();
  expect(TRANSPORT_URL).toContain('rabbit://');
});
