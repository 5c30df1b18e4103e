/**
 * The `Broker` port: the few AMQP 0-9-1 operations the RPC server and client need, with the
 * connection's life hidden behind it. Implementations: `AmqpBroker` (amqplib 2.x, failover across
 * the transport_url hosts, publisher confirms) and `FakeBroker` (in memory, for unit tests; it can
 * deliver raw bodies, redeliver and drop the connection).
 *
 * What the port promises, whatever the connection does:
 * - Topology given to `declare` and consumers given to `consume` are re-established after every
 *   reconnect, in that order, before anything else is published.
 * - `publish` resolves only once the broker confirmed the message; a message unconfirmed when the
 *   connection dropped is published again after the reconnect (so a receiver may see it twice and
 *   must de-duplicate, which oslo receivers do by `_unique_id`).
 * - A `Delivery` can be acknowledged only on the connection that delivered it; after a drop,
 *   `ack` is a no-op returning false and the broker redelivers the message.
 *
 * Not here: oslo.messaging names, envelopes or properties (`../oslo/topology.ts`,
 * `../oslo/messages.ts`).
 */

export type ExchangeType = 'topic' | 'fanout' | 'direct';

export interface ExchangeSpec {
  readonly name: string;
  readonly type: ExchangeType;
  readonly durable: boolean;
  readonly autoDelete: boolean;
}

export type QueueArguments = Readonly<Record<string, string | number | boolean>>;

export interface QueueSpec {
  readonly name: string;
  readonly durable: boolean;
  readonly autoDelete: boolean;
  readonly arguments: QueueArguments;
}

export interface BindingSpec {
  readonly queue: string;
  readonly exchange: string;
  readonly routingKey: string;
}

/** Exchanges, queues and bindings, declared in that order. */
export interface Topology {
  readonly exchanges: readonly ExchangeSpec[];
  readonly queues: readonly QueueSpec[];
  readonly bindings: readonly BindingSpec[];
}

/** The AMQP basic properties the RPC layer reads or sets. */
export interface MessageProperties {
  readonly contentType?: string;
  readonly contentEncoding?: string;
  readonly deliveryMode?: number;
  readonly priority?: number;
  /** Per-message TTL in milliseconds, as a decimal string (AMQP `expiration`). */
  readonly expiration?: string;
  readonly headers?: Readonly<Record<string, unknown>>;
}

/** One message handed to a consumer. */
export interface Delivery {
  readonly queue: string;
  readonly exchange: string;
  readonly routingKey: string;
  readonly body: Buffer;
  readonly properties: MessageProperties;
  readonly redelivered: boolean;
  /** Acknowledges the message. Never throws; false when its channel is gone (it will be redelivered). */
  ack(): boolean;
  /** Rejects the message; with `requeue` false the broker drops it. Never throws; false as for `ack`. */
  reject(requeue: boolean): boolean;
}

export interface ConsumerSpec {
  readonly queues: readonly string[];
  /** Unacknowledged deliveries the broker may push, shared by these queues (>= 1). */
  readonly prefetch: number;
  /** Auto-acknowledge on delivery (reply queues); `ack`/`reject` are then no-ops. */
  readonly noAck?: boolean;
  /**
   * Those of `queues` that are RabbitMQ streams, read as oslo reads its fanout stream: from
   * `x-stream-offset` "last" at first, then, on every new consumer (after a reconnect), from the
   * offset after the last delivery seen; from "last" again after the broker cancelled the consumer
   * (the stream may have been deleted and its offsets restarted).
   */
  readonly streams?: readonly string[];
  /**
   * Called synchronously for every delivery, in the order the broker sent them. Must not throw
   * (an exception is logged and the message rejected without requeue).
   */
  readonly onDelivery: (delivery: Delivery) => void;
}

export interface Subscription {
  /** Stops consuming: no new deliveries; unacknowledged ones go back to their queue on close. */
  cancel(): Promise<void>;
}

export interface OutgoingMessage {
  readonly exchange: string;
  readonly routingKey: string;
  readonly body: Buffer;
  readonly properties: MessageProperties;
  /** Ask the broker to return the message if no queue takes it (AMQP `mandatory`). */
  readonly mandatory?: boolean;
}

/** `returned`: mandatory and no queue took it (the broker still confirmed it). */
export type PublishResult = 'confirmed' | 'returned';

/** How a reconnection after a lost connection went (absent on the first connection). */
export interface BrokerRecovery {
  /** From the connection's loss to consuming again. */
  readonly outageMs: number;
  /**
   * From the last failed connection attempt to consuming again: the broker was still unusable
   * then, so this bounds the time from its return to consuming (reconnect delay and re-setup).
   */
  readonly sinceLastFailureMs: number;
  /** Connection attempts that failed during the outage. */
  readonly failedAttempts: number;
}

/** Lifecycle events, for logs and metrics. */
export type BrokerStatus =
  | { readonly type: 'connected'; readonly broker: string; readonly recovery?: BrokerRecovery }
  | { readonly type: 'disconnected'; readonly broker: string; readonly reason: string }
  | { readonly type: 'connect-failed'; readonly broker: string; readonly reason: string }
  | { readonly type: 'reconnect-scheduled'; readonly attempt: number; readonly delayMs: number; readonly next: string }
  | { readonly type: 'blocked'; readonly reason: string }
  | { readonly type: 'unblocked' }
  | { readonly type: 'consumer-cancelled'; readonly queue: string }
  | { readonly type: 'closed' };

/** The listeners of `Broker.onStatus`: one that throws neither stops the others nor the caller. */
export class StatusListeners {
  private readonly listeners = new Set<(s: BrokerStatus) => void>();

  /** Returns the unsubscribe function. */
  add(listener: (s: BrokerStatus) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(s: BrokerStatus): void {
    for (const l of this.listeners) {
      try {
        l(s);
      } catch {
        // a listener's failure must not break the connection's bookkeeping
      }
    }
  }
}

/**
 * A connection to a message broker that survives broker restarts and failovers.
 *
 * Ownership: one instance per process, shared by the RPC server and client; `close` is the
 * owner's. Concurrency: every method may be called at any time from any async context; calls
 * made while disconnected wait for the next connection.
 */
export interface Broker {
  /**
   * Connects (trying each configured broker, with backoff).
   * @throws BrokerUnreachableError when the initial attempts are exhausted.
   */
  start(): Promise<void>;
  /**
   * Declares now (or at the next connection) and again after every reconnect.
   * @throws TopologyError when the broker refuses a declaration (e.g. PRECONDITION_FAILED because
   *   an existing queue has other flags); the declaration is then forgotten.
   */
  declare(topology: Topology): Promise<void>;
  /** Deletes a queue and forgets any declaration of it. Never throws for a missing queue. */
  deleteQueue(name: string): Promise<void>;
  /** Deletes an exchange and forgets any declaration of it. Never throws for a missing exchange. */
  deleteExchange(name: string): Promise<void>;
  /** Starts consuming, now and after every reconnect. @throws TopologyError if a queue is missing. */
  consume(spec: ConsumerSpec): Promise<Subscription>;
  /**
   * Publishes and waits for the broker's confirm, across reconnects.
   * @throws PublishAbortedError when `signal` aborts first; BrokerClosedError after `close`;
   *   PublishNackedError when the broker refuses the message.
   */
  publish(message: OutgoingMessage, options?: { readonly signal?: AbortSignal }): Promise<PublishResult>;
  /** Subscribes to lifecycle events; returns the unsubscribe function. */
  onStatus(listener: (status: BrokerStatus) => void): () => void;
  readonly isConnected: boolean;
  /** Closes for good: pending publishes fail with BrokerClosedError. Idempotent. */
  close(): Promise<void>;
}

/** No broker of the transport URL accepted a connection within the allowed attempts. */
export class BrokerUnreachableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BrokerUnreachableError';
  }
}

/** The broker refused a declaration or a consumer. */
export class TopologyError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TopologyError';
  }
}

/**
 * The broker cannot serve the configured declarations (`rabbit_ha_queues` on RabbitMQ 4, which
 * has no classic mirrored queues): a configuration problem, not an outage, so no retry.
 */
export class BrokerIncompatibleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BrokerIncompatibleError';
  }
}

/** The broker was closed before the operation finished. */
export class BrokerClosedError extends Error {
  constructor(message = 'broker connection closed', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BrokerClosedError';
  }
}

/** The caller gave up on a publish (its signal aborted) before the broker confirmed it. */
export class PublishAbortedError extends Error {
  constructor(message = 'publish abandoned before the broker confirmed it', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PublishAbortedError';
  }
}

/** The broker answered the publish with a nack (it could not take the message). */
export class PublishNackedError extends Error {
  constructor(message = 'the broker refused the message (basic.nack)', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PublishNackedError';
  }
}
