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

/**
 * A name for oslo's queue manager: part of queue names (`reply_<hostname>:<processname>:N`) and of
 * the counter file name in /dev/shm, so no '/' and no whitespace.
 */
const queueNamePart = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (v === '' || /^[^/\s]{1,128}$/.test(v)) return v;
    ctx.addIssue({ code: 'custom', message: 'not usable in a queue or file name' });
    return z.NEVER;
  });

export const rabbitSection = z.object({
  heartbeat_timeout_threshold: option(int(0), {
    help: 'Seconds without broker traffic before the connection is declared dead; 0 disables AMQP heartbeats.',
    default: '60',
    expected: 'an integer >= 0 (seconds)',
  }),
  heartbeat_rate: option(int(1), {
    help:
      'How many times per heartbeat_timeout_threshold the connection is checked: the AMQP heartbeat interval negotiated ' +
      'with the broker is heartbeat_timeout_threshold / heartbeat_rate, and the connection is declared dead after two ' +
      'to three intervals without traffic.',
    default: '3',
    expected: 'an integer >= 1',
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
  rabbit_transient_quorum_queue: option(bool(), {
    help: 'Declare the reply and fanout queues as quorum queues too (durable, x-queue-type=quorum), as oslo does; must match the rest of the deployment.',
    default: 'false',
    expected: 'true or false',
  }),
  rabbit_stream_fanout: option(bool(), {
    help:
      'Fanout through one shared stream queue <topic>_fanout (x-queue-type=stream) instead of a queue per server, as oslo ' +
      'does. Needs rabbit_transient_quorum_queue = true and rabbit_qos_prefetch_count > 0; must match the rest of the deployment.',
    default: 'false',
    expected: 'true or false',
  }),
  use_queue_manager: option(bool(), {
    help:
      'Name the reply and fanout queues <hostname>:<processname>:<n> (counter in /dev/shm, restarting at 1 when the ' +
      'agent restarts) instead of random names, so a restarted agent reuses its queues, as oslo does.',
    default: 'false',
    expected: 'true or false',
  }),
  hostname: option(queueNamePart(), {
    help:
      'Host name in queue manager queue names (with use_queue_manager). Empty: DEFAULT.host (oslo takes the machine\'s ' +
      'hostname; the compute host name is as unique, and stays unique when several agents share a machine).',
    default: '',
    defaultShown: '<DEFAULT.host>',
    expected: "a name without '/' or spaces",
  }),
  processname: option(queueNamePart(), {
    help: 'Process name in queue manager queue names (with use_queue_manager).',
    default: 'compute-agent',
    expected: "a name without '/' or spaces",
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
  rabbit_transient_queues_ttl: option(int(0), {
    help:
      'Seconds an unused reply or fanout queue lives before RabbitMQ deletes it (x-expires); 0 sets no x-expires (then a ' +
      'broker policy must remove them). With rabbit_stream_fanout, also how long the fanout stream keeps messages (x-max-age); 0 keeps them forever.',
    default: '1800',
    expected: 'an integer >= 0 (seconds)',
  }),
  rabbit_qos_prefetch_count: option(int(0), {
    help: 'Unacknowledged RPC requests the broker may push to the agent; 0 means DEFAULT.executor_thread_pool_size (oslo: unlimited). Must be > 0 with rabbit_stream_fanout.',
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
  kombu_reconnect_splay: option(float(0), {
    help: 'Up to this many more seconds, chosen at random, added to kombu_reconnect_delay, so agents cancelled together do not consume again in lockstep.',
    default: '0.0',
    expected: 'a number >= 0 (seconds)',
  }),
  kombu_missing_consumer_retry_timeout: option(int(1), {
    help: 'Seconds the agent keeps retrying a reply whose reply queue does not exist (yet) before abandoning it.',
    default: '60',
    expected: 'an integer >= 1 (seconds)',
  }),
});

export type RabbitSection = z.output<typeof rabbitSection>;

/**
 * Option combinations oslo.messaging refuses (its RuntimeErrors): each problem names the options.
 * Empty when the section is consistent.
 */
export function rabbitContradictions(r: RabbitSection): string[] {
  const out: string[] = [];
  const p = 'oslo_messaging_rabbit.';
  if (r.rabbit_ha_queues && r.rabbit_quorum_queue) out.push(`${p}rabbit_quorum_queue and ${p}rabbit_ha_queues cannot both be true: a queue is quorum or classic mirrored, not both`);
  if (r.rabbit_ha_queues && r.rabbit_transient_quorum_queue) {
    out.push(`${p}rabbit_transient_quorum_queue and ${p}rabbit_ha_queues cannot both be true: a queue is quorum or classic mirrored, not both`);
  }
  if (r.rabbit_stream_fanout && !r.rabbit_transient_quorum_queue) out.push(`${p}rabbit_stream_fanout needs ${p}rabbit_transient_quorum_queue = true`);
  if (r.rabbit_stream_fanout && r.rabbit_qos_prefetch_count <= 0) out.push(`${p}rabbit_stream_fanout needs ${p}rabbit_qos_prefetch_count > 0 (a stream is consumed with a prefetch)`);
  return out;
}
