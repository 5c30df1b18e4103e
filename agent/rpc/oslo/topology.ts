/**
 * The exchanges and queues oslo.messaging 16's rabbit driver declares, computed from
 * `[oslo_messaging_rabbit]` exactly as oslo computes them (`impl_rabbit.py`
 * `_get_queue_arguments`, `declare_topic_consumer`, `declare_fanout_consumer`,
 * `declare_direct_consumer`, `topic_send`, `fanout_send`), so the agent and nova can declare the
 * same names on one broker without PRECONDITION_FAILED. oslo 14 declares the same for the options
 * it has.
 *
 * An RPC server for `(topic, server)` declares the topic exchange `control_exchange`, the queues
 * `<topic>` and `<topic>.<server>` bound with their own names as keys, and the fanout exchange
 * `<topic>_fanout` with a queue bound to it: a private `<topic>_fanout_<id>`, or with
 * `rabbit_stream_fanout` the one stream `<topic>_fanout` every server reads. A caller declares one
 * `reply_<id>` queue on the default exchange. `<id>` is a uuid4 hex or, with `use_queue_manager`,
 * `<hostname>:<processname>:<n>` (`queue-manager.ts`). Reply and fanout queues are quorum queues
 * (durable) with `rabbit_transient_quorum_queue`. Captured topologies:
 * `test/fixtures/oslo/topology.json` (oslo 14), `topology-16.1.json` (oslo 16.1, per option set).
 *
 * Not here: connecting or declaring (the Broker port does that).
 */
import type { AgentConfig } from '../../../config/schema';
import { rabbitContradictions } from '../../../config/sections/rabbit';
import type { ExchangeSpec, QueueArguments, QueueSpec, Topology } from '../amqp/broker';
import { randomIds, type TransientIds } from './queue-manager';

export type RabbitOptions = AgentConfig['oslo_messaging_rabbit'];

/** Options oslo refuses together (quorum with HA, stream fanout without its prerequisites). */
export class RabbitOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RabbitOptionsError';
  }
}

/** @throws RabbitOptionsError naming the contradictory options. */
export function checkRabbitOptions(r: RabbitOptions): void {
  const problems = rabbitContradictions(r);
  if (problems.length > 0) throw new RabbitOptionsError(problems.join('; '));
}

/** oslo's `durable` flag for the topic exchange and topic queues. */
export function topicDurable(r: RabbitOptions): boolean {
  return r.amqp_durable_queues || r.rabbit_quorum_queue;
}

/**
 * Queue arguments as oslo's `_get_queue_arguments(ha, ttl, quorum, quorum_config, stream=False)`.
 * @throws RabbitOptionsError for quorum together with HA.
 */
export function queueArguments(r: RabbitOptions, ttlSeconds: number, quorum: boolean): QueueArguments {
  if (quorum && r.rabbit_ha_queues) {
    throw new RabbitOptionsError('oslo_messaging_rabbit.rabbit_quorum_queue (or rabbit_transient_quorum_queue) and rabbit_ha_queues cannot both be true');
  }
  const args: Record<string, string | number> = {};
  if (r.rabbit_ha_queues) args['x-ha-policy'] = 'all';
  if (quorum) {
    args['x-queue-type'] = 'quorum';
    if (r.rabbit_quorum_delivery_limit) args['x-delivery-limit'] = r.rabbit_quorum_delivery_limit;
    if (r.rabbit_quorum_max_memory_length) args['x-max-in-memory-length'] = r.rabbit_quorum_max_memory_length;
    if (r.rabbit_quorum_max_memory_bytes) args['x-max-in-memory-bytes'] = r.rabbit_quorum_max_memory_bytes;
  }
  if (ttlSeconds > 0) args['x-expires'] = ttlSeconds * 1000;
  return args;
}

/** The fanout stream's arguments: oslo replaces everything else, and the TTL becomes a retention age. */
export function streamArguments(r: RabbitOptions): QueueArguments {
  const ttl = r.rabbit_transient_queues_ttl;
  return ttl > 0 ? { 'x-queue-type': 'stream', 'x-max-age': `${ttl}s` } : { 'x-queue-type': 'stream' };
}

/** The control exchange as publishers and servers declare it (topic). */
export function topicExchange(exchange: string, r: RabbitOptions): ExchangeSpec {
  return { name: exchange, type: 'topic', durable: topicDurable(r), autoDelete: r.amqp_auto_delete };
}

/**
 * `<topic>_fanout`: fanout, auto-delete, durable with transient quorum queues (servers also say
 * durable for stream fanout, which requires transient quorum queues anyway).
 */
export function fanoutExchange(topic: string, r: RabbitOptions): ExchangeSpec {
  return { name: `${topic}_fanout`, type: 'fanout', durable: r.rabbit_transient_quorum_queue || r.rabbit_stream_fanout, autoDelete: true };
}

/** A caller's reply queue `reply_<id>` on the default exchange (x-expires; quorum and durable with transient quorum). */
export function replyQueue(r: RabbitOptions, ids: TransientIds = randomIds): QueueSpec {
  const quorum = r.rabbit_transient_quorum_queue;
  return { name: `reply_${ids.next()}`, durable: quorum, autoDelete: false, arguments: queueArguments(r, r.rabbit_transient_queues_ttl, quorum) };
}

export interface ServerTopology extends Topology {
  /** `<topic>`, `<topic>.<server>` and the fanout queue: what the server consumes. */
  readonly consumeQueues: readonly string[];
  /** Of those, the stream queues (read from an offset). */
  readonly streamQueues: readonly string[];
  /**
   * The queues to delete on a clean stop, as oslo does: the private fanout queue, unless it is the
   * shared stream or a queue manager name the next start reuses.
   */
  readonly deleteOnStop: readonly string[];
}

export interface ServerTarget {
  readonly exchange: string;
  readonly topic: string;
  readonly server: string;
}

/**
 * Everything an RPC server for `target` declares.
 * @throws RabbitOptionsError for contradictory options.
 */
export function serverTopology(target: ServerTarget, r: RabbitOptions, ids: TransientIds = randomIds): ServerTopology {
  checkRabbitOptions(r);
  const { exchange, topic, server } = target;
  const durable = topicDurable(r);
  const topicArgs = queueArguments(r, 0, r.rabbit_quorum_queue);
  const shared: QueueSpec = { name: topic, durable, autoDelete: r.amqp_auto_delete, arguments: topicArgs };
  const own: QueueSpec = { name: `${topic}.${server}`, durable, autoDelete: r.amqp_auto_delete, arguments: topicArgs };
  const stream = r.rabbit_stream_fanout;
  const fanout: QueueSpec = stream
    ? { name: `${topic}_fanout`, durable: true, autoDelete: false, arguments: streamArguments(r) }
    : {
        name: `${topic}_fanout_${ids.next()}`,
        durable: r.rabbit_transient_quorum_queue,
        autoDelete: false,
        arguments: queueArguments(r, r.rabbit_transient_queues_ttl, r.rabbit_transient_quorum_queue),
      };
  const fx = fanoutExchange(topic, r);
  return {
    exchanges: [topicExchange(exchange, r), fx],
    queues: [shared, own, fanout],
    bindings: [
      { queue: shared.name, exchange, routingKey: shared.name },
      { queue: own.name, exchange, routingKey: own.name },
      { queue: fanout.name, exchange: fx.name, routingKey: topic },
    ],
    consumeQueues: [shared.name, own.name, fanout.name],
    streamQueues: stream ? [fanout.name] : [],
    deleteOnStop: stream || ids.reused ? [] : [fanout.name],
  };
}

/**
 * Where the agent keeps requests it could not process, when `rpc_dead_letter_exchange` is set:
 * a durable topic exchange and a durable queue of the same name bound with `#`.
 */
export function deadLetterTopology(name: string): Topology {
  return {
    exchanges: [{ name, type: 'topic', durable: true, autoDelete: false }],
    queues: [{ name, durable: true, autoDelete: false, arguments: {} }],
    bindings: [{ queue: name, exchange: name, routingKey: '#' }],
  };
}
