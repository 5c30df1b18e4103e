// Refused messages under a hostile burst: failure replies in flight stay bounded (a reply to a
// missing reply queue is retried for a while and holds its body), and what the sender wrote is
// clipped in the log line.
import { systemClock } from '../../../../lib/clock';
import { createLogger } from '../../../../lib/logging/logger';
import type { Delivery } from '../../../../agent/rpc/amqp/broker';
import { NoSuchMethodError } from '../../../../agent/rpc/oslo/errors';
import { clip, clippedFailure, LOGGED_CHARS, Refusals } from '../../../../agent/rpc/endpoint/refusals';
import { Replier } from '../../../../agent/rpc/endpoint/replier';
import { FakeBroker } from '../../../helpers/fake-broker';

function delivery(body: Buffer, acks: { n: number }): Delivery {
  return {
    queue: 'compute.host1',
    exchange: '',
    routingKey: 'compute.host1',
    body,
    properties: {},
    redelivered: false,
    ack: () => (acks.n++, true),
    reject: () => true,
  };
}

async function setup(maxReplies: number): Promise<{ broker: FakeBroker; refusals: Refusals; lines: string[]; work: Array<Promise<void>>}> {
  const broker = new FakeBroker();
  await broker.start();
  const lines: string[] = [];
  const { logger } = createLogger({ sink: { write: (l) => void lines.push(l) } });
  // Replies to a missing queue are retried until the test ends.
  const replier = new Replier({ broker, logger, clock: systemClock, retryTimeoutMs: 60_000, retryIntervalMs: 5 });
  const work: Array<Promise<void>> = [];
  const refusals = new Refusals({ broker, replier, logger, deadLetterExchange: undefined, maxReplies, track: (p) => void work.push(p) });
  return { broker, refusals, lines, work };
}

test('a burst of refused calls to a missing reply queue keeps at most maxReplies failure replies in flight', async () => {
  const { broker, refusals, lines } = await setup(4);
  const acks = { n: 0 };
  for (let i = 0; i < 100; i++) {
    refusals.refuse(delivery(Buffer.alloc(10), acks), new NoSuchMethodError('nope'), { msgId: `m${i}`, replyQueue: 'gone' }, 'nope');
  }
  expect(refusals.refused).toBe(100);
  expect(refusals.pendingReplies).toBe(4);
  // Every message is settled at once: the broker's prefetch is not held by replies.
  expect(acks.n).toBe(100);
  const skipped = lines.filter((l) => l.includes('too many failure replies in flight'));
  expect(skipped).toHaveLength(96);
  await broker.close();
});

test('a failure reply that was sent frees its place', async () => {
  const { broker, refusals, work } = await setup(1);
  await broker.declare({ exchanges: [], queues: [{ name: 'replies', durable: false, autoDelete: false, arguments: {} }], bindings: [] });
  for (let i = 0; i < 5; i++) {
    refusals.refuse(delivery(Buffer.alloc(10), { n: 0 }), new NoSuchMethodError('nope'), { msgId: `m${i}`, replyQueue: 'replies' }, 'nope');
    await Promise.all(work);
  }
  expect(refusals.pendingReplies).toBe(0);
  expect(broker.published.filter((m) => m.routingKey === 'replies')).toHaveLength(5);
  await broker.close();
});

test('a huge method name is clipped in the log line', async () => {
  const { broker, refusals, lines } = await setup(1);
  const method = `m${'a'.repeat(100_000)}`;
  refusals.refuse(delivery(Buffer.alloc(100_010), { n: 0 }), new NoSuchMethodError(method), undefined, method);
  expect(lines).toHaveLength(1);
  const line = JSON.parse(lines[0] ?? '{}') as { method: string; reason: string; bytes: number };
  expect(line.bytes).toBe(100_010);
  expect(line.method).toBe(clip(method, LOGGED_CHARS));
  expect(line.method).toContain('(100001 characters)');
  expect(line.reason.length).toBeLessThan(LOGGED_CHARS + 40);
  expect(lines[0]?.length).toBeLessThan(2000);
  await broker.close();
});

test('clip keeps short strings and says how long a long one was', () => {
  expect(clip('abc', 5)).toBe('abc');
  expect(clip('abcdefgh', 5)).toBe('abcde... (8 characters)');
});

test("a refused call's failure quotes a huge method name clipped, in message, traceback and args", () => {
  const method = `m${'a'.repeat(100_000)}`;
  const f = clippedFailure(new NoSuchMethodError(method));
  expect(f.className).toBe('NoSuchMethod');
  expect(f.message.startsWith('Endpoint does not support RPC method maaa')).toBe(true);
  expect(f.message).toContain('characters)');
  expect(JSON.stringify(f).length).toBeLessThan(4000);
  expect(clippedFailure(new NoSuchMethodError('nope')).message).toBe('Endpoint does not support RPC method nope');
});
