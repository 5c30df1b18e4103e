// The RPC server on a FakeBroker: replies, failures, heartbeats, ordering, bounds, stop.
import { arg } from '../../../../agent/rpc/endpoint/args';
import { Dispatcher } from '../../../../agent/rpc/endpoint/dispatcher';
import { NovaError, RemoteError } from '../../../../agent/rpc/oslo/errors';
import { HOST_QUEUE, instanceUuid, repliesTo, sleep, startHarness, until, type Harness } from './harness';

const target = { topic: 'compute', server: 'host1', version: '6.0' };
const inst = (uuid: string): Record<string, unknown> => ({
  'nova_object.name': 'Instance',
  'nova_object.namespace': 'nova',
  'nova_object.version': '2.8',
  'nova_object.data': { uuid },
});

interface Event {
  readonly key: string;
  readonly n: number;
  readonly at: 'start' | 'end';
}

function dispatcher(events: Event[] = [], running = { now: 0, max: 0 }): Dispatcher {
  return new Dispatcher()
    .register({ name: 'echo', versions: { min: '6.0' }, args: { payload: arg.any() }, journaled: false, handler: async (a, c) => ({ echo: a.payload, cast: !c.isCall }) })
    .register({
      name: 'fail',
      versions: { min: '6.0' },
      args: { kind: arg.string() },
      handler: async (a) => {
        if (a.kind === 'nova') throw new NovaError('InstanceNotFound', 'Instance x could not be found.', { instance_id: 'x' }, 404);
        throw new Error('unexpected');
      },
    })
    .register({
      name: 'slow',
      versions: { min: '6.0' },
      args: { ms: arg.int(0, 60000) },
      handler: async (a, c) => {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, a.ms);
          c.signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
        });
        return c.signal.aborted ? 'interrupted' : 'done';
      },
    })
    .register({
      name: 'act',
      versions: { min: '6.0' },
      args: { instance: arg.novaObject('Instance'), n: arg.int(), ms: arg.int() },
      orderingKey: (a) => instanceUuid(a.instance),
      handler: async (a) => {
        const key = instanceUuid(a.instance) ?? '';
        events.push({ key, n: a.n, at: 'start' });
        running.now++;
        running.max = Math.max(running.max, running.now);
        await sleep(a.ms);
        running.now--;
        events.push({ key, n: a.n, at: 'end' });
        return a.n;
      },
    });
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

test('a call is answered on the reply queue, as oslo answers', async () => {
  h = await startHarness({ dispatcher: dispatcher() });
  await expect(h.client.call(target, 'echo', { payload: { a: [1, 2] } })).resolves.toEqual({ echo: { a: [1, 2] }, cast: false });
  const reply = h.broker.published.find((m) => m.exchange === '' && m.routingKey === h?.client.replyQueueName);
  expect(reply).toMatchObject({ mandatory: true, properties: { contentType: 'application/json', contentEncoding: 'utf-8', deliveryMode: 2, priority: 0, headers: {} } });
  expect(h.server.stats).toMatchObject({ received: 1, completed: 1, rejected: 0 });
});

test('a cast runs its handler and sends nothing back', async () => {
  const events: Event[] = [];
  h = await startHarness({ dispatcher: dispatcher(events) });
  await h.client.cast(target, 'act', { instance: inst('a'), n: 1, ms: 1 });
  await until(() => events.length === 2);
  expect(h.broker.published.filter((m) => m.exchange === '')).toHaveLength(0);
});

test('failures: typed nova errors keep class and module, others arrive as compute_agent errors', async () => {
  h = await startHarness({ dispatcher: dispatcher() });
  const nova = await h.client.call(target, 'fail', { kind: 'nova' }).catch((e: unknown) => e);
  expect(nova).toBeInstanceOf(RemoteError);
  expect(nova).toMatchObject({ className: 'InstanceNotFound', module: 'nova.exception', remoteMessage: 'Instance x could not be found.', kwargs: { instance_id: 'x', code: 404 } });
  await expect(h.client.call(target, 'fail', { kind: 'js' })).rejects.toMatchObject({ className: 'Error', module: 'compute_agent', remoteMessage: 'unexpected' });
  await expect(h.client.call(target, 'nope', {})).rejects.toMatchObject({ className: 'NoSuchMethod', module: 'oslo_messaging.rpc.dispatcher' });
  await expect(h.client.call({ ...target, version: '6.1' }, 'echo', { payload: 1 })).rejects.toMatchObject({ className: 'UnsupportedVersion' });
  await expect(h.client.call(target, 'slow', { ms: 'soon' })).rejects.toMatchObject({
    className: 'TypeError',
    module: 'builtins',
    remoteMessage: "slow() argument 'ms': expected an integer in [0, 60000], got the string \"soon\"",
  });
});

test('a handler gets its decoded arguments and, in its call info, the arguments as sent', async () => {
  const d = new Dispatcher().register({
    name: 'parse',
    versions: { min: '6.0' },
    args: { n: arg.from('a number as text', (v) => (typeof v === 'string' && v !== '' && !Number.isNaN(Number(v)) ? Number(v) : arg.refuse())) },
    handler: async (a, c) => ({ decoded: a.n, sent: c.args }),
  });
  h = await startHarness({ dispatcher: d });
  await expect(h.client.call(target, 'parse', { n: '42' })).resolves.toEqual({ decoded: 42, sent: { n: '42' } });
});

test('a call longer than its call-monitor timeout completes thanks to heartbeats', async () => {
  h = await startHarness({ dispatcher: dispatcher() });
  await expect(h.client.call(target, 'slow', { ms: 2300 }, { callMonitorTimeout: 2 })).resolves.toBe('done');
  const beats = repliesTo(h.broker, h.client.replyQueueName ?? '').filter((r) => r.ending === false);
  expect(beats.length).toBeGreaterThanOrEqual(2);
  expect(beats[0]).toMatchObject({ result: null, failure: null, ending: false });
});

test('requests for one instance run in arrival order; other instances run alongside', async () => {
  const events: Event[] = [];
  const running = { now: 0, max: 0 };
  h = await startHarness({ dispatcher: dispatcher(events, running), prefetch: 16 });
  for (let n = 0; n < 5; n++) {
    for (const key of ['A', 'B', 'C']) await h.client.cast(target, 'act', { instance: inst(key), n, ms: 10 + ((n * 7) % 13) });
  }
  await until(() => events.length === 30);
  for (const key of ['A', 'B', 'C']) {
    const mine = events.filter((e) => e.key === key);
    expect(mine.map((e) => `${e.at}${e.n}`)).toEqual(['start0', 'end0', 'start1', 'end1', 'start2', 'end2', 'start3', 'end3', 'start4', 'end4']);
  }
  expect(running.max).toBe(3);
});

test('prefetch bounds the requests in progress', async () => {
  const events: Event[] = [];
  const running = { now: 0, max: 0 };
  h = await startHarness({ dispatcher: dispatcher(events, running), prefetch: 2 });
  for (let n = 0; n < 8; n++) await h.client.cast(target, 'act', { instance: inst(`i${n}`), n, ms: 15 });
  await until(() => events.length === 16);
  expect(running.max).toBe(2);
});

test('bad casts are dropped or dead-lettered with the reason; the queue keeps flowing', async () => {
  h = await startHarness({ dispatcher: dispatcher(), deadLetterExchange: 'agent-dlx' });
  h.broker.inject(HOST_QUEUE, Buffer.from('not json at all'));
  await h.client.cast(target, 'nope', {});
  await expect(h.client.call(target, 'echo', { payload: 'still here' })).resolves.toMatchObject({ echo: 'still here' });
  await until(() => h?.broker.queueDepth('agent-dlx') === 2);
  const dead = h.broker.published.filter((m) => m.exchange === 'agent-dlx');
  expect(dead.map((m) => m.properties.headers?.['x-compute-agent-reason'])).toEqual(['bad RPC message: body is not JSON (Unexpected token \'o\', "not json at all" is not valid JSON)', 'Endpoint does not support RPC method nope']);
  expect(h.server.stats.rejected).toBe(2);
});

test('an oversized call is answered with a failure naming the limit', async () => {
  h = await startHarness({ dispatcher: dispatcher(), maxMessageBytes: 2048 });
  await expect(h.client.call(target, 'echo', { payload: 'x'.repeat(4096) })).rejects.toMatchObject({
    className: 'ValueError',
    remoteMessage: expect.stringContaining('exceeds the agent\'s limit of 2048 bytes'),
  });
});

test('a message without _unique_id is still served (oslo tolerates it)', async () => {
  const events: Event[] = [];
  h = await startHarness({ dispatcher: dispatcher(events) });
  const body = JSON.stringify({ 'oslo.version': '2.0', 'oslo.message': JSON.stringify({ method: 'act', args: { instance: inst('z'), n: 0, ms: 1 }, version: '6.0' }) });
  h.broker.inject(HOST_QUEUE, Buffer.from(body));
  h.broker.inject(HOST_QUEUE, Buffer.from(body));
  await until(() => events.length === 4);
});

test('stop waits for requests in progress, then interrupts what is left, and deletes the fanout queue', async () => {
  h = await startHarness({ dispatcher: dispatcher() });
  const fanout = (): string[] => h?.broker.queueNames().filter((q) => q.startsWith('compute_fanout_')) ?? [];
  expect(fanout()).toHaveLength(1);
  const quick = h.client.call(target, 'slow', { ms: 100 });
  const long = h.client.call(target, 'slow', { ms: 30000 });
  await until(() => h?.server.stats.inProgress === 2);
  const stopped = h.server.stop(300);
  await expect(quick).resolves.toBe('done');
  await expect(long).resolves.toBe('interrupted');
  await stopped;
  expect(fanout()).toEqual([]);
  expect(h.broker.hasQueue(HOST_QUEUE)).toBe(true);
});

test('a fanout cast reaches the server through its private queue', async () => {
  h = await startHarness({ dispatcher: dispatcher() });
  await h.client.cast({ topic: 'compute', fanout: true, version: '6.0' }, 'echo', { payload: 1 });
  await until(() => h?.server.stats.completed === 1);
  expect(h.broker.published.find((m) => m.exchange === 'compute_fanout')?.routingKey).toBe('');
});
