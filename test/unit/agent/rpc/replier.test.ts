// Replies to a reply queue that does not exist (yet): retried as oslo does, then abandoned and
// remembered; a queue that appears within the window gets its reply.
import { createLogger } from '../../../../lib/logging/logger';
import { FakeBroker } from '../../../helpers/fake-broker';
import { Replier } from '../../../../agent/rpc/endpoint/replier';
import { systemClock } from '../../../../lib/clock';
import { sleep } from './harness';

async function setup(): Promise<{ broker: FakeBroker; replier: Replier; logs: string[] }> {
  const broker = new FakeBroker();
  await broker.start();
  const logs: string[] = [];
  const { logger } = createLogger({ level: 'debug', sink: { write: (l) => void logs.push(l) } });
  return { broker, logs, replier: new Replier({ broker, logger, clock: systemClock, retryTimeoutMs: 400, retryIntervalMs: 50 }) };
}

const to = { msgId: 'm1', replyQueue: 'reply_late' };
const queue = { name: 'reply_late', durable: false, autoDelete: false, arguments: {} };

test('a queue that appears within the retry window gets the reply', async () => {
  const { broker, replier } = await setup();
  const sent = replier.reply(to, { ok: true, result: 'r' });
  await sleep(120);
  await broker.declare({ exchanges: [], queues: [queue], bindings: [] });
  await sent;
  expect(broker.queueDepth('reply_late')).toBe(1);
  await broker.close();
});

test('a queue that never appears: abandoned after the window, later replies dropped at once', async () => {
  const { broker, replier, logs } = await setup();
  const t0 = Date.now();
  await replier.reply(to, { ok: true, result: 'r' });
  expect(Date.now() - t0).toBeGreaterThanOrEqual(380);
  expect(logs.join('')).toContain('reply abandoned: the reply queue does not exist');
  const attempts = broker.published.length;
  expect(attempts).toBeGreaterThan(3);
  const t1 = Date.now();
  await replier.reply({ ...to, msgId: 'm2' }, { ok: false, failure: { className: 'E', module: 'm', message: 'x', tb: [], args: [], kwargs: {} } });
  expect(Date.now() - t1).toBeLessThan(50);
  expect(broker.published.length).toBe(attempts);
  expect(await replier.heartbeat(to)).toBe(false);
  await broker.close();
});

test('a result JSON cannot carry becomes a failure reply', async () => {
  const { broker, replier } = await setup();
  await broker.declare({ exchanges: [], queues: [queue], bindings: [] });
  await replier.reply(to, { ok: true, result: { big: BigInt(1) } });
  const body = JSON.parse(broker.published[0]?.body.toString() ?? '{}') as Record<string, string>;
  const inner = JSON.parse(body['oslo.message'] ?? '{}') as { failure: string };
  expect(JSON.parse(inner.failure)).toMatchObject({ class: 'ValueError', module: 'builtins' });
  await broker.close();
});

test('a broker outage longer than the window: the reply waits for the broker, then is delivered', async () => {
  const { broker, replier, logs } = await setup();
  await broker.declare({ exchanges: [], queues: [queue], bindings: [] });
  broker.dropConnection();
  const sent = replier.reply(to, { ok: true, result: 'r' });
  await sleep(700); // beyond the 400 ms missing-queue window
  broker.reconnect();
  await sent;
  expect(broker.queueDepth('reply_late')).toBe(1);
  expect(logs.join('')).not.toContain('reply abandoned');
  await broker.close();
});
