// What the agent declares equals what a real oslo RPC server declared (topology.json: oslo 14).
import { deadLetterTopology, queueArguments, RabbitOptionsError, replyQueue, serverTopology } from '../../../../agent/rpc/oslo/topology';
import type { TransientIds } from '../../../../agent/rpc/oslo/queue-manager';
import { osloFixture } from './fixtures';
import { RABBIT } from './harness';

interface Captured {
  exchanges: Array<{ name: string; type: string; durable: boolean; auto_delete: boolean }>;
  queues: Array<{ name: string; durable: boolean; auto_delete: boolean; arguments: Array<[string, string, unknown]> }>;
  bindings: Array<{ source_name: string; destination_name: string; routing_key: string }>;
  client_reply_queue_example: { durable: boolean; auto_delete: boolean; arguments: Array<[string, string, unknown]> };
}

const captured = osloFixture('topology') as unknown as Captured;
const fanoutId = (captured.queues.find((q) => q.name.startsWith('compute_fanout_'))?.name ?? '').slice('compute_fanout_'.length);
const ids = (id: string): TransientIds => ({ next: () => id, reused: false });

test('default options: the same exchanges, queues, arguments and bindings as oslo', () => {
  const t = serverTopology({ exchange: 'nova', topic: 'compute', server: 'host1' }, RABBIT, ids(fanoutId));
  const ours = {
    exchanges: t.exchanges.map((x) => ({ name: x.name, type: x.type, durable: x.durable, auto_delete: x.autoDelete })),
    queues: t.queues.map((q) => ({ name: q.name, durable: q.durable, auto_delete: q.autoDelete, arguments: Object.entries(q.arguments) })),
    bindings: t.bindings.map((b) => ({ source_name: b.exchange, destination_name: b.queue, routing_key: b.routingKey })),
  };
  const theirs = {
    exchanges: captured.exchanges.filter((x) => x.name !== '').map(({ name, type, durable, auto_delete }) => ({ name, type, durable, auto_delete })),
    queues: captured.queues.map((q) => ({ name: q.name, durable: q.durable, auto_delete: q.auto_delete, arguments: q.arguments.map(([k, , v]) => [k, v]) })),
    bindings: captured.bindings.map(({ source_name, destination_name, routing_key }) => ({ source_name, destination_name, routing_key })),
  };
  const sort = <T>(xs: T[]): T[] => [...xs].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  expect(sort(ours.exchanges)).toEqual(sort(theirs.exchanges));
  expect(sort(ours.queues)).toEqual(sort(theirs.queues));
  expect(sort(ours.bindings)).toEqual(sort(theirs.bindings));
  expect(t.consumeQueues).toEqual(['compute', 'compute.host1', `compute_fanout_${fanoutId}`]);
});

test('reply queue as oslo clients declare it', () => {
  const q = replyQueue(RABBIT);
  const example = captured.client_reply_queue_example;
  expect(q.name).toMatch(/^reply_[0-9a-f]{32}$/);
  expect([q.durable, q.autoDelete, Object.entries(q.arguments)]).toEqual([example.durable, example.auto_delete, example.arguments.map(([k, , v]) => [k, v])]);
});

test('durable, quorum and HA options change exactly what oslo changes', () => {
  const durable = serverTopology({ exchange: 'nova', topic: 'compute', server: 'h' }, { ...RABBIT, amqp_durable_queues: true }, ids('f'));
  expect(durable.exchanges[0]).toMatchObject({ durable: true });
  expect(durable.queues.map((q) => q.durable)).toEqual([true, true, false]);
  const quorum = serverTopology({ exchange: 'nova', topic: 'compute', server: 'h' }, { ...RABBIT, rabbit_quorum_queue: true, rabbit_quorum_delivery_limit: 5, rabbit_quorum_max_memory_bytes: 1024 }, ids('f'));
  expect(quorum.queues[1]).toMatchObject({ durable: true, arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 5, 'x-max-in-memory-bytes': 1024 } });
  expect(quorum.queues[2]?.arguments).toEqual({ 'x-expires': 1800000 });
  expect(queueArguments({ ...RABBIT, rabbit_ha_queues: true }, 60, false)).toEqual({ 'x-ha-policy': 'all', 'x-expires': 60000 });
  expect(() => queueArguments({ ...RABBIT, rabbit_ha_queues: true }, 0, true)).toThrow(RabbitOptionsError);
  expect(serverTopology({ exchange: 'nova', topic: 'compute', server: 'h' }, { ...RABBIT, amqp_auto_delete: true }, ids('f')).queues[0]).toMatchObject({ autoDelete: true });
});

test('dead-letter topology is durable and catches every routing key', () => {
  expect(deadLetterTopology('dlx')).toEqual({
    exchanges: [{ name: 'dlx', type: 'topic', durable: true, autoDelete: false }],
    queues: [{ name: 'dlx', durable: true, autoDelete: false, arguments: {} }],
    bindings: [{ queue: 'dlx', exchange: 'dlx', routingKey: '#' }],
  });
});
