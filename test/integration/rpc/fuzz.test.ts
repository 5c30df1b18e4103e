// 10 000 fuzzed bodies (random bytes, truncated JSON, wrong types, huge strings) published to
// compute.<host> on the real broker: the agent stays up and answers a valid oslo call right after.
import { parseTransportUrl } from '../../../config/transport-url';
import { silentLogger } from '../../../lib/logging/logger';
import { AmqpBroker } from '../../../agent/rpc/amqp/amqp-broker';
import { hostMethods } from '../../../agent/compute/adapters/host-methods';
import { registerMethods } from '../../../agent/compute/register';
import { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import { arg } from '../../../agent/rpc/endpoint/args';
import { fuzzBodies } from '../../../bench/fuzz-bodies';
import { agentStack, cleanupBroker, pythonClient, RABBIT, TRANSPORT_URL, unique, type AgentStack } from './helpers';

jest.setTimeout(600_000);

const exchange = unique('test-fuzz');
const topic = unique('compute-fuzz');
const host = unique('agent');
const replies = unique('fuzz-replies');
let agent: AgentStack | undefined;
let sender: AmqpBroker | undefined;

afterAll(async () => {
  await agent?.stop();
  await sender?.close();
  await cleanupBroker(TRANSPORT_URL, { queues: [topic, `${topic}.${host}`, replies], exchanges: [exchange, `${topic}_fanout`] });
});

test('10 000 fuzzed bodies, then a valid call from oslo.messaging', async () => {
  const typedArgs: unknown[] = [];
  const dispatcher = registerMethods(new Dispatcher(), hostMethods({ hostUptime: async () => 'still up\n' })).register({
    name: 'typed',
    versions: { min: '6.0' },
    args: { n: arg.int(0, 100) },
    journaled: false,
    handler: async (a) => void typedArgs.push(a.n),
  });
  agent = await agentStack({ url: TRANSPORT_URL, exchange, topic, server: host, dispatcher, maxMessageBytes: 32 * 1024 });
  sender = new AmqpBroker({ transport: parseTransportUrl(TRANSPORT_URL), rabbit: RABBIT, logger: silentLogger(), initialAttempts: 3 });
  const out = sender;
  await out.start();
  await out.declare({ exchanges: [], queues: [{ name: replies, durable: false, autoDelete: false, arguments: { 'x-expires': 600_000 } }], bindings: [] });

  const bodies = fuzzBodies(10_000, 424242, { replyQueue: replies, methods: ['typed', 'get_host_uptime', 'nope'], hugeBytes: 80_000 });
  const props = { contentType: 'application/json', contentEncoding: 'utf-8', deliveryMode: 2, priority: 0, headers: {} };
  const queue = `${topic}.${host}`;
  for (let i = 0; i < bodies.length; i += 500) {
    await Promise.all(bodies.slice(i, i + 500).map((body) => out.publish({ exchange: '', routingKey: queue, body, properties: props })));
  }
  const deadline = Date.now() + 300_000;
  while ((agent.server.stats.received < 10_000 || agent.server.stats.inProgress > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(agent.server.stats.received).toBe(10_000);

  const [r] = await pythonClient({ url: TRANSPORT_URL, exchange, topic, server: host }, [{ op: 'call', method: 'get_host_uptime' }]);
  expect(r).toEqual({ ok: true, result: 'still up\n' });
  expect(typedArgs.every((n) => Number.isInteger(n) && (n as number) >= 0 && (n as number) <= 100)).toBe(true);
  const s = agent.server.stats;
  expect(s.rejected).toBeGreaterThan(5000);
  expect(s.rejected + s.completed + s.duplicates).toBe(10_001);
});
