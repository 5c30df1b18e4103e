// 10 000 hostile bodies on the fake broker: the server never throws, never hands a handler a badly
// typed argument, answers what it can, and serves a valid call right after.
import { arg } from '../../../../agent/rpc/endpoint/args';
import { Dispatcher } from '../../../../agent/rpc/endpoint/dispatcher';
import { fuzzBodies } from '../../../../bench/fuzz-bodies';
import { HOST_QUEUE, repliesTo, startHarness, until, type Harness } from './harness';

let h: Harness | undefined;
afterAll(async () => {
  await h?.stop();
});

test('10 000 fuzzed bodies, then a valid call', async () => {
  const seen: unknown[] = [];
  const dispatcher = new Dispatcher()
    .register({ name: 'typed', versions: { min: '6.0' }, args: { n: arg.int(0, 100) }, journaled: false, handler: async (a) => seen.push(a.n) })
    .register({ name: 'get_host_uptime', versions: { min: '6.0' }, args: {}, journaled: false, handler: async () => 'up' });
  h = await startHarness({ dispatcher, maxMessageBytes: 64 * 1024, prefetch: 64 });
  await h.broker.declare({ exchanges: [], queues: [{ name: 'fuzz-replies', durable: false, autoDelete: false, arguments: {} }], bindings: [] });
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown): void => void unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  try {
    const bodies = fuzzBodies(10_000, 20261122, { replyQueue: 'fuzz-replies', methods: ['typed', 'get_host_uptime', 'nope'], hugeBytes: 200_000 });
    for (const b of bodies) h.broker.inject(HOST_QUEUE, b);
    await until(() => h?.broker.queueDepth(HOST_QUEUE) === 0 && h.server.stats.inProgress === 0, 60_000);
    await expect(h.client.call({ topic: 'compute', server: 'host1', version: '6.0' }, 'get_host_uptime', {})).resolves.toBe('up');
    expect(unhandled).toEqual([]);
    expect(seen.every((n) => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 100)).toBe(true);
    const s = h.server.stats;
    expect(s.received).toBe(10_001);
    expect(s.rejected + s.completed + s.duplicates).toBe(10_001);
    // Every failure reply names a problem; no reply is empty.
    const failures = repliesTo(h.broker, 'fuzz-replies').filter((r) => r.failure !== null);
    expect(failures.length).toBeGreaterThan(100);
    for (const f of failures) expect((JSON.parse(f.failure as string) as { message: string }).message.length).toBeGreaterThan(5);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
}, 120_000);
