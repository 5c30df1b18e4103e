/**
 * The `[oslo_messaging_rabbit]` section: the RabbitMQ connection (heartbeats, TLS, reconnection
 * backoff, failover) and the queue declarations (quorum, durable, auto-delete, HA, TTLs), with
 * oslo.messaging's option names. The declarations must match the rest of the deployment, or the
 * broker refuses the agent's queue declarations.
 *
 * It is: declarations only. It is not: the transport that applies them (`agent/rpc/amqp/`).
 */
import { z } from 'zod';
import { bool, choice, float, int, option, optPath } from '../types';

export const rabbitSection = z.object({
  heartbeat_timeout_threshold: option(int(0), {
    help: 'Seconds without broker traffic before the connection is declared dead; 0 disables AMQP heartbeats.',
    default: '60',
    expected: 'an integer >= 0 (seconds)',
  }),
  ssl: option(bool(), { help: 'Connect with TLS (amqps).', default: 'false', expected: 'true or false' }),
  ssl_ca_file: option(optPath(), { help: 'CA bundle for the broker certificate.', default: '', expected: 'an absolute path' }),
  ssl_cert_file: option(optPath(), { help: 'Client certificate (PEM).', default: '', expected: 'an absolute path' }),
  ssl_key_file: option(optPath(), { help: 'Client key (PEM).', default: '', expected: 'an absolute path' }),
  rabbit_quorum_queue: option(bool(), {
    help: 'Declare the RPC queues as quorum queues (x-queue-type=quorum), as oslo does; must match the rest of the deployment.',
    default: 'false',
    expected: 'true or false',
  }),
  amqp_durable_queues: option(bool(), {
    help: 'Declare durable queues and exchanges; must match the rest of the deployment.',
    default: 'false',
    expected: 'true or false',
  }),
  amqp_auto_delete: option(bool(), {
    help: 'Declare auto-delete queues and exchanges; must match the rest of the deployment.',
    default: 'false',
    expected: 'true or false',
  }),
  rabbit_ha_queues: option(bool(), {
    help: 'Declare the RPC queues with x-ha-policy=all (legacy mirrored queues), as oslo does; must match the rest of the deployment. Cannot be combined with rabbit_quorum_queue.',
    default: 'false',
    expected: 'true or false',
  }),
  rabbit_quorum_delivery_limit: option(int(0), {
    help: 'x-delivery-limit of quorum queues (with rabbit_quorum_queue); 0 sets none. Must match the rest of the deployment.',
    default: '0',
    expected: 'an integer >= 0',
  }),
  rabbit_quorum_max_memory_length: option(int(0), {
    help: 'x-max-in-memory-length of quorum queues (with rabbit_quorum_queue); 0 sets none. oslo.messaging 14 spells it rabbit_quroum_max_memory_length.',
    default: '0',
    expected: 'an integer >= 0',
  }),
  rabbit_quorum_max_memory_bytes: option(int(0), {
    help: 'x-max-in-memory-bytes of quorum queues (with rabbit_quorum_queue); 0 sets none. oslo.messaging 14 spells it rabbit_quroum_max_memory_bytes.',
    default: '0',
    expected: 'an integer >= 0',
  }),
  rabbit_transient_queues_ttl: option(int(1), {
    help: 'Seconds an unused reply or fanout queue lives before RabbitMQ deletes it (x-expires).',
    default: '1800',
    expected: 'an integer >= 1 (seconds)',
  }),
  rabbit_qos_prefetch_count: option(int(0), {
    help: 'Unacknowledged RPC requests the broker may push to the agent; 0 means DEFAULT.executor_thread_pool_size (oslo: unlimited).',
    default: '0',
    expected: 'an integer >= 0',
  }),
  rabbit_retry_interval: option(int(1), {
    help: 'Seconds before the first reconnection attempt after the broker connection is lost.',
    default: '1',
    expected: 'an integer >= 1 (seconds)',
  }),
  rabbit_retry_backoff: option(int(0), {
    help: 'Seconds added to the delay for every further reconnection attempt.',
    default: '2',
    expected: 'an integer >= 0 (seconds)',
  }),
  rabbit_interval_max: option(int(1), {
    help: 'Longest delay between reconnection attempts.',
    default: '30',
    expected: 'an integer >= 1 (seconds)',
  }),
  kombu_failover_strategy: option(choice(['round-robin', 'shuffle'] as const), {
    help: 'How the next broker of transport_url is chosen after a connection failure.',
    default: 'round-robin',
    expected: 'round-robin or shuffle',
  }),
  kombu_reconnect_delay: option(float(0), {
    help: 'Seconds to wait before consuming again after the broker cancelled a consumer (queue deleted or failed over).',
    default: '1.0',
    expected: 'a number >= 0 (seconds)',
  }),
  kombu_missing_consumer_retry_timeout: option(int(1), {
    help: 'Seconds the agent keeps retrying a reply whose reply queue does not exist (yet) before abandoning it.',
    default: '60',
    expected: 'an integer >= 1 (seconds)',
  }),
});
