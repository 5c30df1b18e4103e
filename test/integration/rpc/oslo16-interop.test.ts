// Both directions against Debian 13's oslo.messaging 16.1 on RabbitMQ 4 (oslo-release.ts), with
// kolla-ansible 2025.1's messaging: quorum queues, transient quorum queues, stream fanout and the
// queue manager. Casts, calls, failures, fanout over the one shared stream, and the ping endpoint;
// rabbit_ha_queues is refused by RabbitMQ 4. Skipped, saying why, where there is no 2025.1 root.
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { hostMethods } from '../../../agent/compute/adapters/host-methods';
import { registerMethods } from '../../../agent/compute/register';
import { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import { registerPing } from '../../../agent/rpc/endpoint/ping';
import { BrokerIncompatibleError } from '../../../agent/rpc/amqp/broker';
import { RemoteError } from '../../../agent/rpc/oslo/errors';
import { agentStack, cleanupBroker, pythonClient, pythonServer, registerInteropMethods, unique, type AgentStack, type PythonServer } from './helpers';
import { peer2025, type PeerRuntime } from './oslo-release';

jest.setTimeout(180_000);

const found = peer2025();
const runtime: PeerRuntime | undefined = 'unavailable' in found ? undefined : found;
if (!runtime) console.warn(`oslo.messaging 16.1 interop skipped: ${'unavailable' in found ? found.unavailable : ''}`);
const suite = runtime ? describe : describe.skip;

const exchange = unique('test-oslo16');
const topic = unique('compute16');
const agentHost = unique('agent');
const pyHost = unique('oslo');
const agentNode = unique('agent-node');
const pyNode = unique('py-node');
const KOLLA = { rabbit_quorum_queue: true, rabbit_transient_quorum_queue: true, rabbit_stream_fanout: true, use_queue_manager: true, rabbit_qos_prefetch_count: 10 };
const pyRabbit = [...Object.entries(KOLLA).map(([k, v]) => `${k}=${String(v)}`), `hostname=${pyNode}`, 'processname=nova-compute'];
const url = runtime?.url ?? '';
const peer = { url, exchange, topic, server: agentHost, rabbit: pyRabbit, runtime };

const recorded: Array<Record<string, unknown>> = [];
let agent: AgentStack;
let py: PythonServer;

const waitFor = async (cond: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 15_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((res) => setTimeout(res, 20));
  }
};

suite('oslo.messaging 16.1 on RabbitMQ 4 with kolla 2025.1 messaging', () => {
  beforeAll(async () => {
    const dispatcher = registerInteropMethods(registerPing(registerMethods(new Dispatcher(), hostMethods({ hostUptime: async () => 'agent uptime' }))), recorded);
    // Each is kept as soon as it is up, so afterAll stops it even when the other failed to start.
    await Promise.all([
      agentStack({ url, exchange, topic, server: agentHost, dispatcher, rabbit: { ...KOLLA, hostname: agentNode, processname: 'compute-agent' } }).then((x) => (agent = x)),
      pythonServer({ url, exchange, topic, server: pyHost, rabbit: pyRabbit, defaults: ['rpc_ping_enabled=true'], runtime }).then((x) => (py = x)),
    ]);
  });

  afterAll(async () => {
    const replies = [agent?.client.replyQueueName ?? '', ...[1, 2, 3, 4, 5, 6, 7, 8].map((n) => `reply_${pyNode}:nova-compute:${n}`)];
    await Promise.allSettled([agent?.stop(), py?.stop()]);
    await cleanupBroker(url, { queues: [topic, `${topic}.${agentHost}`, `${topic}.${pyHost}`, `${topic}_fanout`, ...replies], exchanges: [exchange, `${topic}_fanout`] });
    for (const f of [`${agentNode}_compute-agent`, `${pyNode}_nova-compute`]) rmSync(`/dev/shm/${f}_qmanager`, { force: true });
    if (runtime) rmSync(dirname(runtime.peer), { recursive: true, force: true });
  });

  describe('oslo.messaging 16.1 client -> agent', () => {
    test('a cast reaches the agent', async () => {
      const [r] = await pythonClient(peer, [{ op: 'cast', method: 'record', args: { seq: 1, note: 'from oslo 16' } }]);
      expect(r).toEqual({ ok: true });
      await waitFor(() => recorded.length > 0, 'the cast');
      expect(recorded).toEqual([{ seq: 1, note: 'from oslo 16' }]);
    });

    test('a call returns the result; a failure raises on the oslo side with the agent class and message', async () => {
      const [ok, failed] = await pythonClient(peer, [
        { op: 'call', method: 'get_host_uptime' },
        { op: 'call', method: 'find_instance', args: { uuid: 'f00' } },
      ]);
      expect(ok).toEqual({ ok: true, result: 'agent uptime' });
      expect(failed).toMatchObject({ ok: false, class: 'RemoteError', exc_type: 'InstanceNotFound', value: 'Instance f00 could not be found.' });
    });

    test('a fanout cast over the shared stream reaches the agent and the oslo server', async () => {
      const before = [recorded.length, py.casts.length];
      const [r] = await pythonClient(peer, [{ op: 'cast', method: 'record', fanout: true, args: { seq: 2, note: 'fanout from oslo 16' } }]);
      expect(r).toEqual({ ok: true });
      await waitFor(() => recorded.length > (before[0] ?? 0) && py.casts.length > (before[1] ?? 0), 'the fanout cast on both servers');
      expect(recorded.slice(before[0])).toEqual([{ seq: 2, note: 'fanout from oslo 16' }]);
      expect(py.casts.slice(before[1])).toEqual([{ seq: 2, note: 'fanout from oslo 16' }]);
    });

    test("oslo_rpc_server_ping answers 'pong' (rpc_ping_enabled)", async () => {
      const [r] = await pythonClient(peer, [{ op: 'call', method: 'oslo_rpc_server_ping', version: '1.0' }]);
      expect(r).toEqual({ ok: true, result: 'pong' });
    });
  });

  describe('agent client -> oslo.messaging 16.1 server', () => {
    const target = { topic, server: pyHost, version: '6.0' };

    test("a call returns the oslo server's result, through a queue manager reply queue", async () => {
      await expect(agent.client.call(target, 'echo', { payload: { hello: 'oslo 16' } }, { context: { request_id: 'req-16' } })).resolves.toEqual({
        echo: { hello: 'oslo 16' },
        request_id: 'req-16',
      });
      expect(agent.client.replyQueueName).toBe(`reply_${agentNode}:compute-agent:1`);
    });

    test('its failures arrive as RemoteError with class, module and message', async () => {
      const e = (await agent.client.call(target, 'fail', { message: 'boom from oslo 16' }).catch((x: unknown) => x)) as RemoteError;
      expect(e).toBeInstanceOf(RemoteError);
      expect([e.className, e.module, e.remoteMessage]).toEqual(['ValueError', 'builtins', 'boom from oslo 16']);
    });

    test('a cast reaches the oslo server', async () => {
      const before = py.casts.length;
      await agent.client.cast(target, 'record', { seq: 7 });
      await waitFor(() => py.casts.length > before, 'the cast');
      expect(py.casts.slice(before)).toEqual([{ seq: 7 }]);
    });

    test('a fanout cast over the shared stream reaches the oslo server and the agent', async () => {
      const before = [recorded.length, py.casts.length];
      await agent.client.cast({ topic, fanout: true, version: '6.0' }, 'record', { seq: 8, note: 'fanout from the agent' });
      await waitFor(() => recorded.length > (before[0] ?? 0) && py.casts.length > (before[1] ?? 0), 'the fanout cast on both servers');
      expect(py.casts.slice(before[1])).toEqual([{ seq: 8, note: 'fanout from the agent' }]);
      expect(recorded.slice(before[0])).toEqual([{ seq: 8, note: 'fanout from the agent' }]);
    });

    test("the oslo server's ping endpoint answers the agent", async () => {
      await expect(agent.client.call({ topic, server: pyHost, version: '1.0' }, 'oslo_rpc_server_ping', {})).resolves.toBe('pong');
    });
  });

  test('another oslo.messaging 16.1 server starts beside the agent on the same topic and answers', async () => {
    const other = unique('oslo2');
    const second = await pythonServer({ url, exchange, topic, server: other, rabbit: pyRabbit, runtime });
    try {
      const [r] = await pythonClient({ ...peer, server: other }, [{ op: 'call', method: 'echo', args: { payload: 'second' } }]);
      expect(r).toMatchObject({ ok: true, result: { echo: 'second' } });
    } finally {
      await second.stop();
      await cleanupBroker(url, { queues: [`${topic}.${other}`] });
    }
  });

  test('rabbit_ha_queues is refused by RabbitMQ 4 before anything is declared', async () => {
    const err = await agentStack({ url, exchange: unique('test-ha'), topic: unique('compute-ha'), server: unique('agent'), dispatcher: new Dispatcher(), rabbit: { rabbit_ha_queues: true } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerIncompatibleError);
    expect((err as Error).message).toMatch(/oslo_messaging_rabbit\.rabbit_ha_queues = true, but RabbitMQ 4\.\d+\.\d+ has no classic mirrored queues/);
  });
});
