// What the agent declares equals what a real oslo.messaging 16.1 server and client declared on
// RabbitMQ 4.0.5 for each [oslo_messaging_rabbit] option set in topology-16.1.json: quorum,
// transient quorum, the queue manager, stream fanout (kolla 2025.1's settings), a TTL of 0.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { amqpArguments } from '../../../../agent/rpc/amqp/amqp-channel';
import type { QueueSpec } from '../../../../agent/rpc/amqp/broker';
import { checkRabbitOptions, fanoutExchange, RabbitOptionsError, replyQueue, serverTopology, type RabbitOptions } from '../../../../agent/rpc/oslo/topology';
import { RABBIT } from './harness';

interface CapturedQueue {
  name: string;
  durable: boolean;
  auto_delete: boolean;
  type: string;
  arguments: Array<[string, string, unknown]>;
}
interface Case {
  name: string;
  options: string[];
  exchanges: Array<{ name: string; type: string; durable: boolean; auto_delete: boolean }>;
  queues: CapturedQueue[];
  bindings: Array<{ source: string; queue: string; routing_key: string }>;
  queues_after_server_stop: string[];
}

const fixture = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'fixtures', 'oslo', 'topology-16.1.json'), 'utf8')) as { cases: Case[] };

/** The options of a case as the agent's config loader would type them. */
function optionsOf(c: Case): RabbitOptions {
  const r: Record<string, unknown> = { ...RABBIT };
  for (const kv of c.options) {
    const [k = '', v = ''] = kv.split('=');
    const base = r[k];
    r[k] = typeof base === 'boolean' ? v === 'true' : typeof base === 'number' ? Number(v) : v;
  }
  return r as unknown as RabbitOptions;
}

/** AMQP field-table type names as rabbitmqctl prints them, for the values the agent sends. */
function typed(q: QueueSpec): Array<[string, string, unknown]> {
  return Object.entries(amqpArguments(q.arguments))
    .map(([k, v]): [string, string, unknown] => {
      if (typeof v === 'object' && v !== null && (v as { '!': string })['!'] === 'int') return [k, 'signedint', (v as { value: unknown }).value];
      return [k, typeof v === 'string' ? 'longstr' : typeof v, v];
    })
    .sort((a, b) => a[0].localeCompare(b[0]));
}

/** RabbitMQ 4 lists the default queue type of a classic queue as an argument nobody sent. */
const sent = (q: CapturedQueue): Array<[string, string, unknown]> => q.arguments.filter(([k, , v]) => !(k === 'x-queue-type' && v === 'classic'));

const sortBy = <T>(xs: T[]): T[] => [...xs].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

describe.each(fixture.cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
  const r = optionsOf(c);
  const fanout = c.queues.find((q) => q.name.startsWith('compute_fanout'));
  const reply = c.queues.find((q) => q.name.startsWith('reply_'));
  if (!fanout || !reply) throw new Error(`case ${c.name} lacks a fanout or reply queue`);
  const server = serverTopology({ exchange: 'nova', topic: 'compute', server: 'host1' }, r, { next: () => fanout.name.slice('compute_fanout_'.length), reused: r.use_queue_manager });
  const replySpec = replyQueue(r, { next: () => reply.name.slice('reply_'.length), reused: r.use_queue_manager });

  test('the same exchanges', () => {
    const clientFanout = fanoutExchange('compute', r);
    const ours = [...server.exchanges, clientFanout].map((x) => ({ name: x.name, type: x.type, durable: x.durable, auto_delete: x.autoDelete }));
    expect(sortBy([...new Map(ours.map((x) => [JSON.stringify(x), x])).values()])).toEqual(sortBy(c.exchanges));
  });

  test('the same queues, flags and typed arguments', () => {
    const ours = [...server.queues, replySpec].map((q) => ({ name: q.name, durable: q.durable, auto_delete: q.autoDelete, arguments: typed(q) }));
    const theirs = c.queues.map((q) => ({ name: q.name, durable: q.durable, auto_delete: q.auto_delete, arguments: sent(q).sort((a, b) => a[0].localeCompare(b[0])) }));
    expect(sortBy(ours)).toEqual(sortBy(theirs));
  });

  test('the same bindings', () => {
    const ours = server.bindings.map((b) => ({ source: b.exchange, queue: b.queue, routing_key: b.routingKey }));
    expect(sortBy(ours)).toEqual(sortBy(c.bindings.filter((b) => b.source !== '')));
  });

  test('a stopping server deletes what oslo deletes', () => {
    const kept = server.queues.map((q) => q.name).filter((n) => !server.deleteOnStop.includes(n));
    expect(kept.sort()).toEqual(c.queues_after_server_stop.filter((n) => !n.startsWith('reply_')).sort());
  });

  test('the fanout stream is what the server reads from an offset', () => {
    expect(server.streamQueues).toEqual(fanout.type === 'stream' ? ['compute_fanout'] : []);
  });
});

test('the fixture covers kolla 2025.1: quorum, transient quorum, stream fanout and the queue manager', () => {
  const kolla = fixture.cases.find((c) => c.name === 'kolla-2025.1');
  expect(kolla?.options).toEqual(expect.arrayContaining(['rabbit_quorum_queue=true', 'rabbit_transient_quorum_queue=true', 'rabbit_stream_fanout=true', 'use_queue_manager=true']));
  expect(kolla?.queues.map((q) => q.name).sort()).toEqual(['compute', 'compute.host1', 'compute_fanout', 'reply_node1:nova-compute:1']);
});

test.each([
  ['stream fanout without transient quorum queues', { rabbit_stream_fanout: true, rabbit_qos_prefetch_count: 10 }, /rabbit_stream_fanout needs oslo_messaging_rabbit\.rabbit_transient_quorum_queue = true/],
  ['stream fanout without a prefetch', { rabbit_stream_fanout: true, rabbit_transient_quorum_queue: true }, /rabbit_stream_fanout needs oslo_messaging_rabbit\.rabbit_qos_prefetch_count > 0/],
  ['quorum with HA', { rabbit_quorum_queue: true, rabbit_ha_queues: true }, /rabbit_quorum_queue and oslo_messaging_rabbit\.rabbit_ha_queues cannot both be true/],
  ['transient quorum with HA', { rabbit_transient_quorum_queue: true, rabbit_ha_queues: true }, /rabbit_transient_quorum_queue and oslo_messaging_rabbit\.rabbit_ha_queues cannot both be true/],
])('%s is refused as oslo refuses it, naming the options', (_name, opts, message) => {
  const r = { ...RABBIT, ...opts };
  expect(() => checkRabbitOptions(r)).toThrow(RabbitOptionsError);
  expect(() => checkRabbitOptions(r)).toThrow(message);
  expect(() => serverTopology({ exchange: 'nova', topic: 'compute', server: 'h' }, r)).toThrow(RabbitOptionsError);
});
