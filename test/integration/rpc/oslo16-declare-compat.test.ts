// The agent joins a RabbitMQ 4 broker where a real oslo.messaging 16.1 server already declared
// everything (oslo-release.ts), under the option sets topology-16.1.json was captured with: no
// PRECONDITION_FAILED, and both answer calls and a fanout cast. Skipped, saying why, where there
// is no 2025.1 root.
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { arg } from '../../../agent/rpc/endpoint/args';
import { hostMethods } from '../../../agent/compute/adapters/host-methods';
import { registerMethods } from '../../../agent/compute/register';
import { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import type { RabbitOptions } from '../../../agent/rpc/oslo/topology';
import { agentStack, cleanupBroker, pythonClient, pythonServer, unique } from './helpers';
import { peer2025, type PeerRuntime } from './oslo-release';

jest.setTimeout(180_000);

const found = peer2025();
const runtime: PeerRuntime | undefined = 'unavailable' in found ? undefined : found;
if (!runtime) console.warn(`oslo.messaging 16.1 declaration checks skipped: ${'unavailable' in found ? found.unavailable : ''}`);
const maybe = runtime ? test : test.skip;
afterAll(() => runtime && rmSync(dirname(runtime.peer), { recursive: true, force: true }));

const QUORUM = { rabbit_quorum_queue: true, rabbit_transient_quorum_queue: true };
const cases: Array<[string, Partial<RabbitOptions>]> = [
  ['defaults', {}],
  ['quorum and transient quorum queues', QUORUM],
  ['transient quorum, no TTL, queue manager', { ...QUORUM, rabbit_transient_queues_ttl: 0, use_queue_manager: true }],
  ['kolla 2025.1: quorum, transient quorum, stream fanout, queue manager', { ...QUORUM, rabbit_stream_fanout: true, use_queue_manager: true, rabbit_qos_prefetch_count: 10 }],
];

maybe.each(cases)('%s: oslo 16.1 declares first, the agent joins, both serve', async (_name, options) => {
  if (!runtime) return;
  const url = runtime.url;
  const exchange = unique('test-compat16');
  const topic = unique('compute-compat16');
  const [pyHost, agentHost, pyNode, agentNode] = [unique('oslo'), unique('agent'), unique('py-node'), unique('agent-node')];
  const pyRabbit = [...Object.entries(options).map(([k, v]) => `${k}=${String(v)}`), `hostname=${pyNode}`, 'processname=nova-compute'];
  const py = await pythonServer({ url, exchange, topic, server: pyHost, rabbit: pyRabbit, runtime });
  const recorded: unknown[] = [];
  const dispatcher = registerMethods(new Dispatcher(), hostMethods({ hostUptime: async () => 'agent uptime' })).register({
    name: 'record',
    versions: { min: '6.0' },
    args: { seq: arg.int() },
    handler: async (a) => void recorded.push(a),
  });
  let agent;
  try {
    agent = await agentStack({ url, exchange, topic, server: agentHost, dispatcher, rabbit: { ...options, hostname: agentNode, processname: 'compute-agent' } });
    const [fromPy, fromAgent, fanout] = await pythonClient({ url, exchange, topic, rabbit: pyRabbit, runtime }, [
      { op: 'call', method: 'get_host_uptime', server: pyHost },
      { op: 'call', method: 'get_host_uptime', server: agentHost },
      { op: 'cast', method: 'record', fanout: true, args: { seq: 1 } },
    ]);
    expect(fromPy?.ok).toBe(true);
    expect(fromAgent).toEqual({ ok: true, result: 'agent uptime' });
    expect(fanout).toEqual({ ok: true });
    const deadline = Date.now() + 15_000;
    while ((recorded.length === 0 || py.casts.length === 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect([recorded, py.casts]).toEqual([[{ seq: 1 }], [{ seq: 1 }]]);
    await expect(agent.client.call({ topic, server: pyHost, version: '6.0' }, 'echo', { payload: 1 })).resolves.toMatchObject({ echo: 1 });
  } finally {
    const reply = agent?.client.replyQueueName;
    await agent?.stop();
    await py.stop();
    const pyReplies = [1, 2, 3].map((n) => `reply_${pyNode}:nova-compute:${n}`);
    await cleanupBroker(url, {
      queues: [topic, `${topic}.${pyHost}`, `${topic}.${agentHost}`, `${topic}_fanout`, ...(reply ? [reply] : []), ...pyReplies, `${topic}_fanout_${pyNode}:nova-compute:1`, `${topic}_fanout_${agentNode}:compute-agent:1`],
      exchanges: [exchange, `${topic}_fanout`],
    });
    for (const f of [`${agentNode}_compute-agent`, `${pyNode}_nova-compute`]) rmSync(`/dev/shm/${f}_qmanager`, { force: true });
  }
});
