/**
 * Wiring of the RPC side of the agent from its configuration: one Broker connection, the RPC
 * server for the caller's topic (`<topic>` / `<topic>.<host>` / fanout on `control_exchange`), the
 * client for outgoing calls, and the request journal with its persisted de-duplication window in
 * `state_path`. The caller gives it the dispatcher (the methods it serves) and starts and stops it.
 *
 * Not here: which methods are served (the caller's dispatcher), process signals or start-up order
 * (the daemon), protocol details (the modules it wires).
 */
import { join } from 'node:path';
import type { AgentConfig } from '../../config/schema';
import { DedupeWindow, DEDUPE_WINDOW_FILE } from '../journal/dedupe-window';
import { InMemoryRequestJournal } from '../journal/memory';
import type { RequestJournal } from '../journal/types';
import type { Logger } from '../../lib/logging/logger';
import { systemClock, type Clock } from '../../lib/clock';
import { AmqpBroker } from './amqp/amqp-broker';
import type { Broker, BrokerRecovery, BrokerStatus } from './amqp/broker';
import { RpcClient } from './endpoint/client';
import type { Dispatcher } from './endpoint/dispatcher';
import { registerPing } from './endpoint/ping';
import { RpcServer } from './endpoint/server';
import { transientIds } from './oslo/queue-manager';

export interface RpcServiceDeps {
  readonly config: AgentConfig;
  readonly logger: Logger;
  /** Defaults to an AmqpBroker on `transport_url`. */
  readonly broker?: Broker;
  /** Defaults to an InMemoryRequestJournal with the window persisted in `state_path`. */
  readonly journal?: RequestJournal;
  /** The methods served; they may be registered until `serve()`. */
  readonly dispatcher: Dispatcher;
  /** The topic served, e.g. nova's `compute`. */
  readonly topic: string;
  /** Connection attempts before `start` fails (the daemon's start-up budget). */
  readonly connectAttempts?: number;
  readonly clock?: Clock;
  /** Told how each request ended (for metrics). */
  readonly onOutcome?: (method: string, outcome: 'succeeded' | 'failed' | 'interrupted', seconds: number) => void;
  /** Told how each reconnection after a broker outage went (for metrics). */
  readonly onRecovery?: (recovery: BrokerRecovery) => void;
}

/** Log lines for broker lifecycle events. */
function logStatus(logger: Logger, s: BrokerStatus): void {
  switch (s.type) {
    case 'connected':
      // After an outage, one line: how long consuming stopped, and at most how long after the
      // broker was back (counted from the last failed attempt) the agent consumed again.
      if (s.recovery) {
        const r = s.recovery;
        logger.info({ broker: s.broker, outage_s: r.outageMs / 1000, back_to_consuming_s: r.sinceLastFailureMs / 1000, failed_attempts: r.failedAttempts }, 'broker connection recovered; consuming again');
      } else {
        logger.info({ broker: s.broker }, 'broker connected');
      }
      return;
    case 'disconnected':
      logger.warn({ broker: s.broker, reason: s.reason }, 'broker connection lost');
      return;
    case 'connect-failed':
      logger.warn({ broker: s.broker, reason: s.reason }, 'broker connection attempt failed');
      return;
    case 'reconnect-scheduled':
      logger.info({ attempt: s.attempt, retry_in_ms: s.delayMs, next: s.next }, 'reconnecting to the broker');
      return;
    case 'blocked':
      logger.warn({ reason: s.reason }, 'broker blocked publishing (resource alarm)');
      return;
    case 'unblocked':
      logger.info('broker unblocked publishing');
      return;
    case 'consumer-cancelled':
      logger.warn({ queue: s.queue }, 'broker cancelled a consumer; re-consuming');
      return;
    case 'closed':
      logger.info('broker connection closed');
      return;
  }
}

/** Ownership: the daemon owns it (start, then stop once). */
export class RpcService {
  readonly broker: Broker;
  readonly client: RpcClient;
  readonly server: RpcServer;
  private readonly window: DedupeWindow | undefined;
  private readonly unsubscribe: () => void;

  constructor(private readonly deps: RpcServiceDeps) {
    const { config, logger } = deps;
    const d = config.DEFAULT;
    const rabbit = config.oslo_messaging_rabbit;
    this.broker =
      deps.broker ??
      new AmqpBroker({
        transport: d.transport_url,
        rabbit,
        logger,
        initialAttempts: deps.connectAttempts,
        connectionName: `compute-agent:${process.pid}:${d.host}`,
      });
    this.unsubscribe = this.broker.onStatus((s) => {
      logStatus(logger, s);
      if (s.type === 'connected' && s.recovery) deps.onRecovery?.(s.recovery);
    });
    let journal = deps.journal;
    if (!journal) {
      this.window = new DedupeWindow({ path: join(d.state_path, DEDUPE_WINDOW_FILE), clock: deps.clock });
      journal = new InMemoryRequestJournal(this.window);
    }
    const prefetch = rabbit.rabbit_qos_prefetch_count > 0 ? rabbit.rabbit_qos_prefetch_count : d.executor_thread_pool_size;
    if (d.rpc_ping_enabled) registerPing(deps.dispatcher);
    // One naming for both, so the server's fanout queue and the client's reply queue never share a counter value.
    const ids = transientIds({ ...rabbit, hostname: rabbit.hostname === '' ? d.host : rabbit.hostname });
    this.server = new RpcServer({
      broker: this.broker,
      dispatcher: deps.dispatcher,
      journal,
      logger,
      target: { exchange: d.control_exchange, topic: deps.topic, server: d.host },
      rabbit,
      ids,
      prefetch,
      maxInProgress: d.executor_thread_pool_size,
      maxMessageBytes: d.rpc_max_message_bytes,
      deadLetterExchange: d.rpc_dead_letter_exchange === '' ? undefined : d.rpc_dead_letter_exchange,
      clock: deps.clock ?? systemClock,
      ...(deps.onOutcome ? { onOutcome: deps.onOutcome } : {}),
    });
    this.client = new RpcClient({ broker: this.broker, logger, rabbit, ids, controlExchange: d.control_exchange, defaultTimeoutMs: d.rpc_response_timeout * 1000 });
  }

  /**
   * Loads the de-duplication window, connects, declares and starts consuming.
   * @throws BrokerUnreachableError, TopologyError, RabbitOptionsError
   */
  async start(): Promise<void> {
    await this.connect();
    await this.serve();
  }

  /**
   * Loads the de-duplication window and connects, without consuming: the agent can publish (a
   * recovered operation casting to a peer) before it takes new requests.
   * @throws BrokerUnreachableError
   */
  async connect(): Promise<void> {
    if (this.window) {
      await this.window.load().catch((e: unknown) => {
        this.deps.logger.warn({ reason: e instanceof Error ? e.message : String(e) }, 'RPC de-duplication window unreadable; starting empty');
      });
    }
    await this.broker.start();
  }

  /** Declares the topology and starts consuming. @throws TopologyError, RabbitOptionsError */
  async serve(): Promise<void> {
    await this.server.start();
  }

  /** Stops consuming, lets requests in progress finish (up to `graceMs`), closes the connection. */
  async stop(graceMs: number): Promise<void> {
    await this.server.stop(graceMs).catch(() => undefined);
    await this.client.close().catch(() => undefined);
    await this.broker.close();
    this.unsubscribe();
  }
}
