// A sender-chosen `_unique_id` is remembered by the server's recent ids and the journal's window,
// thousands of them: one longer than MAX_UNIQUE_ID_CHARS is refused as a bad message, not kept.
import { Dispatcher } from '../../../../agent/rpc/endpoint/dispatcher';
import { MAX_UNIQUE_ID_CHARS } from '../../../../agent/rpc/endpoint/server';
import { encodeRequest } from '../../../../agent/rpc/oslo/messages';
import { HOST_QUEUE, repliesTo, startHarness, until, type Harness } from './harness';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

test('a call whose _unique_id is too long is refused with a failure; one at the limit is served', async () => {
  const served: string[] = [];
  const dispatcher = new Dispatcher().register({ name: 'ping', versions: { min: '6.0' }, args: {}, journaled: true, handler: async (_a, call) => void served.push(call.uniqueId) });
  h = await startHarness({ dispatcher });
  await h.broker.declare({ exchanges: [], queues: [{ name: 'replies', durable: false, autoDelete: false, arguments: {} }], bindings: [] });
  const call = (uniqueId: string, msgId: string): Buffer =>
    encodeRequest({ method: 'ping', args: {}, version: '6.0', uniqueId, call: { msgId, replyQueue: 'replies', callMonitorTimeout: null }, context: {} });
  h.broker.inject(HOST_QUEUE, call('x'.repeat(100_000), 'too-long'));
  h.broker.inject(HOST_QUEUE, call('y'.repeat(MAX_UNIQUE_ID_CHARS), 'at-limit'));
  await until(() => repliesTo(h?.broker ?? (undefined as never), 'replies').length === 2);
  expect(served).toEqual(['y'.repeat(MAX_UNIQUE_ID_CHARS)]);
  expect(h.server.stats).toMatchObject({ received: 2, rejected: 1, completed: 1 });
  const refused = repliesTo(h.broker, 'replies').find((r) => r._msg_id === 'too-long');
  const failure = JSON.parse(String(refused?.failure)) as { class: string; message: string };
  expect(failure).toMatchObject({ class: 'ValueError', message: `bad RPC message: "_unique_id" is longer than ${MAX_UNIQUE_ID_CHARS} characters` });
});
