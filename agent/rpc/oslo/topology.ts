/**
 * The exchanges and queues oslo.messaging's rabbit driver declares, computed from
 * `[oslo_messaging_rabbit]` exactly as oslo computes them (`impl_rabbit.py`
 * `_get_queue_arguments`, `declare_topic_consumer`, `declare_fanout_consumer`,
 * `declare_direct_consumer`, `topic_send`, `fanout_send`), so the agent and nova can declare the
 * same names on one broker without PRECONDITION_FAILED.
 *
 * An RPC server for `(topic, server)` declares the topic exchange `control_exchange`, the queues
 * `<topic>` and `<topic>.<server>` bound with their own names as keys, and the fanout exchange
 * `<topic>_fanout` with a private queue `<topic>_fanout_<uuid4hex>`. A caller declares one
 * `reply_<uuid4hex>` queue on the default exchange. Captured topology: `test/fixtures/oslo/topology.json`.
 *
 * Not here: connecting or declaring (the Broker port does that).
 */
import type { AgentConfig } from '../../../config/schema';
import type { ExchangeSpec, QueueArguments, QueueSpec, Topology } from '../amqp/broker';
import { newId } from './messages';

export type RabbitOptions = AgentConfig['oslo_messaging_rabbit'];

/** `rabbit_quorum_queue` and `rabbit_ha_queues` are both set; oslo refuses that too. */
export class RabbitOptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RabbitOptionsError';
  }
}

/** oslo's `durable` flag for the topic exchange and topic queues. */
export function topicDurable(r: RabbitOptions): boolean {
  return r.amqp_durable_queues || r.rabbit_quorum_queue;
}

/**
 * Queue arguments as oslo's `_get_queue_arguments(ha, ttl, quorum, quorum_config)`.
 * @throws RabbitOptionsError for quorum together with HA.
 */
export function queueArguments(r: RabbitOptions, ttlSeconds: number, quorum: boolean): QueueArguments {
  if (quorum && r.rabbit_ha_queues) {
    throw new RabbitOptionsError('oslo_messaging_rabbit: rabbit_quorum_queue and rabbit_ha_queues cannot both be enabled');
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

/** The control exchange as publishers and servers declare it (topic). */
export function topicExchange(exchange: string, r: RabbitOptions): ExchangeSpec {
  return { name: exchange, type: 'topic', durable: topicDurable(r), autoDelete: r.amqp_auto_delete };
}

/** `<topic>_fanout`: fanout, not durable, auto-delete, as oslo declares it on both sides. */
export function fanoutExchange(topic: string): ExchangeSpec {
  return { name: `${topic}_fanout`, type: 'fanout', durable: false, autoDelete: true };
}

/** A caller's reply queue `reply_<uuid4hex>` (not durable, not auto-delete, x-expires). */
export function replyQueue(r: RabbitOptions, name = `reply_${newId()}`): QueueSpec {
  return { name, durable: false, autoDelete: false, arguments: queueArguments(r, r.rabbit_transient_queues_ttl, false) };
}

export interface ServerTopology extends Topology {
  /** `<topic>`, `<topic>.<server>`, `<topic>_fanout_<id>`: what the server consumes. */
  readonly consumeQueues: readonly string[];
  /** The private fanout queue, deleted on a clean stop as oslo does. */
  readonly fanoutQueue: string;
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
export function serverTopology(target: ServerTarget, r: RabbitOptions, fanoutId: string = newId()): ServerTopology {
  const { exchange, topic, server } = target;
  const durable = topicDurable(r);
  const topicArgs = queueArguments(r, 0, r.rabbit_quorum_queue);
  const shared: QueueSpec = { name: topic, durable, autoDelete: r.amqp_auto_delete, arguments: topicArgs };
  const own: QueueSpec = { name: `${topic}.${server}`, durable, autoDelete: r.amqp_auto_delete, arguments: topicArgs };
  const fanoutQueue = `${topic}_fanout_${fanoutId}`;
  const fanout: QueueSpec = {
    name: fanoutQueue,
    durable: false,
    autoDelete: false,
    arguments: queueArguments(r, r.rabbit_transient_queues_ttl, false),
  };
  const fx = fanoutExchange(topic);
  return {
    exchanges: [topicExchange(exchange, r), fx],
    queues: [shared, own, fanout],
    bindings: [
      { queue: shared.name, exchange, routingKey: shared.name },
      { queue: own.name, exchange, routingKey: own.name },
      { queue: fanoutQueue, exchange: fx.name, routingKey: topic },
    ],
    consumeQueues: [shared.name, own.name, fanoutQueue],
    fanoutQueue,
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
