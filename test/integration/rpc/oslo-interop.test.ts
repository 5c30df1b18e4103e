// Both directions against Debian's python3-oslo.messaging 14.0.3 on the shared RabbitMQ:
// oslo client -> agent server, and agent client -> oslo server.
import { arg } from '../../../agent/rpc/endpoint/args';
import { hostMethods } from '../../../agent/compute/adapters/host-methods';
import { registerMethods } from '../../../agent/compute/register';
import { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import { RemoteError } from '../../../agent/rpc/oslo/errors';
import { procUptimeProvider } from '../../../agent/compute/adapters/host-uptime';
import { agentStack, cleanupBroker, pythonClient, pythonServer, registerInteropMethods, TRANSPORT_URL, unique, type AgentStack, type PythonServer } from './helpers';

jest.setTimeout(120_000);

const exchange = unique('test-interop');
const topic = unique('compute-it');
const agentHost = unique('agent');
const pyHost = unique('oslo');
const peer = { url: TRANSPORT_URL, exchange, topic, server: agentHost };

const recorded: Array<Record<string, unknown>> = [];
let agent: AgentStack;
let py: PythonServer;

beforeAll(async () => {
  const dispatcher = registerInteropMethods(registerMethods(new Dispatcher(), hostMethods({ hostUptime: procUptimeProvider() })), recorded)
    .register({ name: 'explode', versions: { min: '6.0' }, args: {}, handler: async () => Promise.reject(new Error('the agent exploded on purpose')) })
    .register({ name: 'slow', versions: { min: '6.0' }, args: { seconds: arg.number() }, journaled: false, handler: async (a) => new Promise((r) => setTimeout(() => r({ slept: a.seconds }), a.seconds * 1000)) });
  // Each is kept as soon as it is up, so afterAll stops it even when the other failed to start.
  await Promise.all([
    agentStack({ url: TRANSPORT_URL, exchange, topic, server: agentHost, dispatcher }).then((x) => (agent = x)),
    pythonServer({ url: TRANSPORT_URL, exchange, topic, server: pyHost }).then((x) => (py = x)),
  ]);
});

afterAll(async () => {
  await Promise.allSettled([agent?.stop(), py?.stop()]);
  await cleanupBroker(TRANSPORT_URL, { queues: [topic, `${topic}.${agentHost}`, `${topic}.${pyHost}`], exchanges: [exchange, `${topic}_fanout`] });
});

describe('oslo.messaging client -> agent', () => {
  test('a cast reaches the agent', async () => {
    const [r] = await pythonClient(peer, [{ op: 'cast', method: 'record', args: { seq: 1, note: 'from oslo' } }]);
    expect(r).toEqual({ ok: true });
    const deadline = Date.now() + 10_000;
    while (recorded.length === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    expect(recorded).toEqual([{ seq: 1, note: 'from oslo' }]);
  });

  test("call('get_host_uptime') returns the agent's uptime line", async () => {
    const [r] = await pythonClient(peer, [{ op: 'call', method: 'get_host_uptime' }]);
    expect(r?.ok).toBe(true);
    expect(r?.result).toMatch(/^ \d\d:\d\d:\d\d up .*load average: [\d.]+, [\d.]+, [\d.]+\n$/);
  });

  test('a handler that raises makes the Python side raise with the agent message', async () => {
    const results = await pythonClient(peer, [
      { op: 'call', method: 'find_instance', args: { uuid: 'f00' } },
      { op: 'call', method: 'explode' },
      { op: 'call', method: 'record', args: { seq: 'two', note: 'x' } },
      { op: 'call', method: 'no_such_thing' },
      { op: 'call', method: 'get_host_uptime', version: '6.99' },
    ]);
    // nova.exception is not importable here, so oslo builds a RemoteError carrying class and message.
    expect(results[0]).toMatchObject({ ok: false, class: 'RemoteError', exc_type: 'InstanceNotFound', value: 'Instance f00 could not be found.' });
    expect(results[1]).toMatchObject({ ok: false, class: 'RemoteError', exc_type: 'Error', value: 'the agent exploded on purpose' });
    // builtins are rebuilt: the caller gets a real TypeError naming the argument.
    expect(results[2]).toMatchObject({ ok: false, class: 'TypeError', module: 'builtins' });
    expect(results[2]?.message).toContain("record() argument 'seq': expected an integer");
    expect(results[3]).toMatchObject({ ok: false, exc_type: 'NoSuchMethod', value: 'Endpoint does not support RPC method no_such_thing' });
    expect(results[4]).toMatchObject({ ok: false, exc_type: 'UnsupportedVersion', value: 'Endpoint does not support RPC version 6.99. Attempted method: get_host_uptime' });
  });

  test('a call longer than its call-monitor timeout completes thanks to heartbeats', async () => {
    const started = Date.now();
    const [r] = await pythonClient(peer, [{ op: 'call', method: 'slow', args: { seconds: 5 }, timeout: 30, cm_timeout: 2 }]);
    expect(r).toEqual({ ok: true, result: { slept: 5 } });
    expect(Date.now() - started).toBeGreaterThan(5000);
  });
});

describe('agent client -> oslo.messaging server', () => {
  const target = { topic, server: pyHost, version: '6.0' };

  test('a call returns the oslo server result', async () => {
    await expect(agent.client.call(target, 'echo', { payload: { hello: 'world' } }, { context: { request_id: 'req-ts' } })).resolves.toEqual({
      echo: { hello: 'world' },
      request_id: 'req-ts',
    });
    await expect(agent.client.call(target, 'get_host_uptime', {})).resolves.toContain('load average');
  });

  test('its failures arrive as RemoteError with class, module, message and kwargs', async () => {
    const e = (await agent.client.call(target, 'fail', { message: 'boom from oslo' }).catch((x: unknown) => x)) as RemoteError;
    expect(e).toBeInstanceOf(RemoteError);
    expect([e.className, e.module, e.remoteMessage, e.args]).toEqual(['ValueError', 'builtins', 'boom from oslo', ['boom from oslo']]);
    expect(e.tb.join('')).toContain('ValueError: boom from oslo');
    await expect(agent.client.call(target, 'fail_custom', { code: 42 })).rejects.toMatchObject({ className: 'HarnessError', module: '__main__', kwargs: { code: 42 } });
    await expect(agent.client.call(target, 'nope', {})).rejects.toMatchObject({ className: 'NoSuchMethod', module: 'oslo_messaging.rpc.dispatcher' });
  });

  test('a slow oslo handler heartbeats past the call-monitor timeout', async () => {
    await expect(agent.client.call(target, 'slow', { seconds: 4 }, { timeoutMs: 30_000, callMonitorTimeout: 2 })).resolves.toEqual({ slept: 4 });
  });

  test('a cast reaches the oslo server', async () => {
    await agent.client.cast(target, 'record', { seq: 7 });
    const deadline = Date.now() + 10_000;
    while (py.casts.length === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    expect(py.casts).toEqual([{ seq: 7 }]);
  });
});
