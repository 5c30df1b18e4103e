// An RPC server and client on one FakeBroker, for unit tests.
import { DedupeWindow } from '../../../../agent/journal/dedupe-window';
import { InMemoryRequestJournal } from '../../../../agent/journal/memory';
import type { RequestJournal } from '../../../../agent/journal/types';
import { silentLogger } from '../../../../lib/logging/logger';
import { RpcClient } from '../../../../agent/rpc/endpoint/client';
import { Dispatcher } from '../../../../agent/rpc/endpoint/dispatcher';
import { FakeBroker } from '../../../helpers/fake-broker';
import { RpcServer } from '../../../../agent/rpc/endpoint/server';
import type { RabbitOptions } from '../../../../agent/rpc/oslo/topology';
import type { NovaObjectPrimitive } from '../../../../agent/rpc/endpoint/args';

/** The uuid of an Instance primitive, for `orderingKey`. */
export function instanceUuid(instance: NovaObjectPrimitive): string | undefined {
  const uuid = instance['nova_object.data'].uuid;
  return typeof uuid === 'string' ? uuid : undefined;
}

export const RABBIT: RabbitOptions = {
  heartbeat_timeout_threshold: 60,
  heartbeat_rate: 3,
  ssl: false,
  ssl_ca_file: undefined,
  ssl_cert_file: undefined,
  ssl_key_file: undefined,
  rabbit_quorum_queue: false,
  rabbit_transient_quorum_queue: false,
  rabbit_stream_fanout: false,
  use_queue_manager: false,
  hostname: '',
  processname: 'compute-agent',
  amqp_durable_queues: false,
  amqp_auto_delete: false,
  rabbit_ha_queues: false,
  rabbit_quorum_delivery_limit: 0,
  rabbit_quorum_max_memory_length: 0,
  rabbit_quorum_max_memory_bytes: 0,
  rabbit_transient_queues_ttl: 1800,
  rabbit_qos_prefetch_count: 0,
  rabbit_retry_interval: 1,
  rabbit_retry_backoff: 2,
  rabbit_interval_max: 30,
  kombu_failover_strategy: 'round-robin',
  kombu_reconnect_delay: 1,
  kombu_reconnect_splay: 0,
  kombu_missing_consumer_retry_timeout: 1,
};

export const TARGET = { exchange: 'nova', topic: 'compute', server: 'host1' };
export const HOST_QUEUE = 'compute.host1';

export interface Harness {
  readonly broker: FakeBroker;
  readonly server: RpcServer;
  readonly client: RpcClient;
  readonly journal: RequestJournal;
  stop(): Promise<void>;
}

export interface HarnessOptions {
  readonly dispatcher: Dispatcher;
  readonly journal?: RequestJournal;
  readonly prefetch?: number;
  readonly maxInProgress?: number;
  readonly maxMessageBytes?: number;
  readonly deadLetterExchange?: string;
}

export async function startHarness(o: HarnessOptions): Promise<Harness> {
  const broker = new FakeBroker();
  await broker.start();
  const journal = o.journal ?? new InMemoryRequestJournal(new DedupeWindow());
  const logger = silentLogger();
  const server = new RpcServer({
    broker,
    dispatcher: o.dispatcher,
    journal,
    logger,
    target: TARGET,
    rabbit: RABBIT,
    prefetch: o.prefetch ?? 8,
    ...(o.maxInProgress === undefined ? {} : { maxInProgress: o.maxInProgress }),
    maxMessageBytes: o.maxMessageBytes ?? 1 << 20,
    deadLetterExchange: o.deadLetterExchange,
    journalRetryDelayMs: 10,
  });
  await server.start();
  const client = new RpcClient({ broker, logger, rabbit: RABBIT, controlExchange: 'nova', defaultTimeoutMs: 5000 });
  return {
    broker,
    server,
    client,
    journal,
    stop: async () => {
      await server.stop(2000);
      await client.close();
      await broker.close();
    },
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls until `fn` is true (or fails after `ms`). */
export async function until(fn: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(5);
  }
}

/** Decodes every reply the broker confirmed to a queue: [{result, failure, ending}]. */
export function repliesTo(broker: FakeBroker, queue: string): Array<Record<string, unknown>> {
  return broker.published
    .filter((m) => m.exchange === '' && m.routingKey === queue)
    .map((m) => JSON.parse((JSON.parse(m.body.toString()) as Record<string, string>)['oslo.message'] ?? '{}') as Record<string, unknown>);
}
