// The client against hand-written responders on the fake broker: timeouts, heartbeats, the
// legacy two-part reply, duplicate replies, reconnects.
import { silentLogger } from '../../../../lib/logging/logger';
import type { Delivery } from '../../../../agent/rpc/amqp/broker';
import { RpcClient } from '../../../../agent/rpc/endpoint/client';
import { RpcTimeoutError } from '../../../../agent/rpc/oslo/errors';
import { FakeBroker } from '../../../helpers/fake-broker';
import { decodeRequest, encodeReply, type RpcRequest } from '../../../../agent/rpc/oslo/messages';
import { osloProperties } from '../../../../agent/rpc/oslo/properties';
import { serverTopology } from '../../../../agent/rpc/oslo/topology';
import { RABBIT, sleep } from './harness';

const target = { topic: 'compute', server: 'h', version: '6.0' };

async function setup(respond: (req: RpcRequest, send: (r: Parameters<typeof encodeReply>[0]) => Promise<void>) => void): Promise<{ broker: FakeBroker; client: RpcClient; calls: RpcRequest[] }> {
  const broker = new FakeBroker();
  await broker.start();
  const topo = serverTopology({ exchange: 'nova', topic: 'compute', server: 'h' }, RABBIT, { next: () => 'x', reused: false });
  await broker.declare(topo);
  const calls: RpcRequest[] = [];
  await broker.consume({
    queues: ['compute.h'],
    prefetch: 10,
    onDelivery: (d: Delivery) => {
      d.ack();
      const req = decodeRequest(d.body, 1 << 20);
      calls.push(req);
      const to = req.reply;
      respond(req, async (r) => {
        if (!to) return;
        await broker.publish({ exchange: '', routingKey: to.replyQueue, body: encodeReply(r), properties: osloProperties(), mandatory: true });
      });
    },
  });
  const client = new RpcClient({ broker, logger: silentLogger(), rabbit: RABBIT, controlExchange: 'nova', defaultTimeoutMs: 1000 });
  return { broker, client, calls };
}

test('the request carries what oslo puts in a call', async () => {
  const { broker, client, calls } = await setup((req, send) => void send({ msgId: req.reply?.msgId ?? '', result: 42, failure: null, ending: true }));
  await expect(client.call(target, 'm', { a: 1 }, { timeoutMs: 3000, callMonitorTimeout: 30, context: { request_id: 'req-1' } })).resolves.toBe(42);
  const published = broker.published.find((m) => m.exchange === 'nova');
  expect(published).toMatchObject({ routingKey: 'compute.h', properties: { expiration: '3000', deliveryMode: 2 } });
  expect(calls[0]).toMatchObject({ method: 'm', args: { a: 1 }, version: '6.0', callMonitorTimeout: 30, context: { request_id: 'req-1' } });
  expect(calls[0]?.reply?.replyQueue).toBe(client.replyQueueName);
  expect(client.replyQueueName).toMatch(/^reply_[0-9a-f]{32}$/);
  await client.close();
  expect(broker.hasQueue(client.replyQueueName ?? '')).toBe(false);
});

test('no reply: RpcTimeoutError after the timeout', async () => {
  const { client } = await setup(() => undefined);
  const err = await client.call(target, 'm', {}, { timeoutMs: 150 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RpcTimeoutError);
  expect((err as RpcTimeoutError).monitor).toBe(false);
});

test('heartbeats extend a call past its call-monitor timeout; silence ends it', async () => {
  const { client } = await setup((req, send) => {
    const msgId = req.reply?.msgId ?? '';
    if (req.method === 'silent') return;
    void (async () => {
      for (let i = 0; i < 5; i++) {
        await sleep(400);
        await send({ msgId, result: null, failure: null, ending: false });
      }
      await send({ msgId, result: 'late', failure: null, ending: true });
    })();
  });
  await expect(client.call(target, 'beating', {}, { timeoutMs: 10_000, callMonitorTimeout: 1 })).resolves.toBe('late');
  const err = (await client.call(target, 'silent', {}, { timeoutMs: 10_000, callMonitorTimeout: 1 }).catch((e: unknown) => e)) as RpcTimeoutError;
  expect(err).toBeInstanceOf(RpcTimeoutError);
  expect(err.monitor).toBe(true);
  expect(err.waitedMs).toBeLessThan(2000);
});

test('the legacy two-part reply (result, then an empty ending) and duplicate replies', async () => {
  const { client } = await setup((req, send) => {
    const msgId = req.reply?.msgId ?? '';
    void (async () => {
      await send({ msgId, result: 'first', failure: null, ending: false, uniqueId: 'dup' });
      await send({ msgId, result: 'ignored duplicate', failure: null, ending: false, uniqueId: 'dup' });
      await send({ msgId, result: null, failure: null, ending: true });
    })();
  });
  await expect(client.call(target, 'm', {})).resolves.toBe('first');
});

test('a call sent while the broker is away is published after the reconnect', async () => {
  const { broker, client } = await setup((req, send) => void send({ msgId: req.reply?.msgId ?? '', result: 'ok', failure: null, ending: true }));
  await client.call(target, 'warm', {});
  broker.dropConnection();
  const pending = client.call(target, 'm', {}, { timeoutMs: 3000 });
  await sleep(100);
  broker.reconnect();
  await expect(pending).resolves.toBe('ok');
});

test('fanout calls are refused; fanout casts go to <topic>_fanout', async () => {
  const { broker, client } = await setup(() => undefined);
  await expect(client.call({ topic: 'compute', fanout: true }, 'm', {})).rejects.toThrow('fanout');
  await client.cast({ topic: 'compute', fanout: true }, 'm', {});
  expect(broker.published.at(-1)).toMatchObject({ exchange: 'compute_fanout', routingKey: '' });
  await expect(client.call(target, 'm', {}, { timeoutMs: 0 })).rejects.toThrow(RangeError);
});

test('the timeout covers a first call made while the broker is away', async () => {
  const broker = new FakeBroker();
  const client = new RpcClient({ broker, logger: silentLogger(), rabbit: RABBIT, controlExchange: 'nova', defaultTimeoutMs: 1000 });
  const started = Date.now();
  await expect(client.call(target, 'm', {}, { timeoutMs: 200 })).rejects.toBeInstanceOf(RpcTimeoutError);
  expect(Date.now() - started).toBeLessThan(1000);
  await broker.close();
});
