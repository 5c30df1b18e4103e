// The agent joins a broker where a real oslo.messaging server already declared the exchange, the
// shared topic queue and the fanout exchange, under several [oslo_messaging_rabbit] settings: no
// PRECONDITION_FAILED, and both answer. A mismatched setting is refused with the broker's reason.
import { hostMethods } from '../../../agent/compute/adapters/host-methods';
import { registerMethods } from '../../../agent/compute/register';
import { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import { TopologyError } from '../../../agent/rpc/amqp/broker';
import { agentStack, cleanupBroker, pythonClient, pythonServer, TRANSPORT_URL, unique } from './helpers';

jest.setTimeout(180_000);

const uptime = (): Dispatcher => registerMethods(new Dispatcher(), hostMethods({ hostUptime: async () => 'agent uptime' }));

const cases: Array<[string, Record<string, unknown>, string[]]> = [
  ['defaults', {}, []],
  ['amqp_durable_queues', { amqp_durable_queues: true }, ['amqp_durable_queues=true']],
  ['rabbit_quorum_queue with a delivery limit', { rabbit_quorum_queue: true, rabbit_quorum_delivery_limit: 5 }, ['rabbit_quorum_queue=true', 'rabbit_quorum_delivery_limit=5']],
  ['rabbit_ha_queues', { rabbit_ha_queues: true }, ['rabbit_ha_queues=true']],
];

test.each(cases)('%s: oslo declares first, the agent joins, both serve', async (_name, agentRabbit, pyRabbit) => {
  const exchange = unique('test-compat');
  const topic = unique('compute-compat');
  const [pyHost, agentHost] = [unique('oslo'), unique('agent')];
  const py = await pythonServer({ url: TRANSPORT_URL, exchange, topic, server: pyHost, rabbit: pyRabbit });
  let agent;
  try {
    agent = await agentStack({ url: TRANSPORT_URL, exchange, topic, server: agentHost, dispatcher: uptime(), rabbit: agentRabbit });
    const [fromPy, fromAgent] = await pythonClient({ url: TRANSPORT_URL, exchange, topic, rabbit: pyRabbit }, [
      { op: 'call', method: 'get_host_uptime', server: pyHost },
      { op: 'call', method: 'get_host_uptime', server: agentHost },
    ]);
    expect(fromPy?.ok).toBe(true);
    expect(fromAgent).toEqual({ ok: true, result: 'agent uptime' });
  } finally {
    await agent?.stop();
    await py.stop();
    await cleanupBroker(TRANSPORT_URL, { queues: [topic, `${topic}.${pyHost}`, `${topic}.${agentHost}`], exchanges: [exchange, `${topic}_fanout`] });
  }
});

test('a setting that differs from the deployment is refused with the broker reason', async () => {
  const exchange = unique('test-compat');
  const topic = unique('compute-compat');
  const pyHost = unique('oslo');
  const py = await pythonServer({ url: TRANSPORT_URL, exchange, topic, server: pyHost, rabbit: ['amqp_durable_queues=true'] });
  try {
    const err = await agentStack({ url: TRANSPORT_URL, exchange, topic, server: unique('agent'), dispatcher: uptime() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TopologyError);
    expect((err as Error).message).toMatch(/^PRECONDITION_FAILED - inequivalent arg 'durable' for exchange/);
  } finally {
    await py.stop();
    await cleanupBroker(TRANSPORT_URL, { queues: [topic, `${topic}.${pyHost}`], exchanges: [exchange, `${topic}_fanout`] });
  }
});
