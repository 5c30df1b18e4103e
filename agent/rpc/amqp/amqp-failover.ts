/**
 * Failover across the brokers of `transport_url` for `AmqpBroker`, as oslo's rabbit driver does
 * it: after every failed or lost connection the next host is tried (`kombu_failover_strategy`
 * round-robin, or shuffle), after a delay of `rabbit_retry_interval` + `rabbit_retry_backoff` per
 * further attempt, capped at `rabbit_interval_max`, with ±20 % jitter so a fleet of agents does
 * not reconnect in lockstep.
 *
 * One departure from oslo, in `ReconnectSchedule`: an attempt refused at the TCP level
 * (ECONNREFUSED: nothing listens on the port, the broker is stopped or still booting) does not
 * grow the delay; the next attempt follows after `rabbit_retry_interval`. Such an attempt is a SYN
 * answered by the host's kernel: it costs the broker nothing, so it needs no backoff, and it
 * notices the broker's return within `rabbit_retry_interval` instead of within the grown delay
 * (up to `rabbit_interval_max`). oslo's growing delay still applies to every attempt that reached
 * something (a handshake that failed, a timeout, a connection that dropped), where a struggling
 * broker is what the backoff protects.
 *
 * amqplib's recovery reconnects one URL object; `url()` returns an object whose fields read the
 * rotation's current host each time amqplib opens a socket. Not here: when to reconnect
 * (amqplib's recovery decides) or what to do after (the broker's setup).
 */
import type { Options, SocketOptions } from 'amqplib';
import type { TransportUrl } from '../../../config/transport-url';
import { BrokerUnreachableError, type BrokerRecovery } from './broker';
import { connectParams, type ConnectParams } from './connection';
import type { RabbitOptions } from './connection';

/** The delay before reconnection attempt `attempt` (1-based), in ms. */
export function reconnectDelayMs(attempt: number, r: RabbitOptions, random: () => number = Math.random): number {
  const capMs = r.rabbit_interval_max * 1000;
  const base = Math.min(r.rabbit_interval_max, r.rabbit_retry_interval + r.rabbit_retry_backoff * Math.max(0, attempt - 1)) * 1000;
  return Math.round(Math.min(capMs, base * (0.8 + 0.4 * random())));
}

/**
 * The delay before consuming again after the broker cancelled a consumer: `kombu_reconnect_delay`
 * plus a random part of up to `kombu_reconnect_splay`, in ms.
 */
export function cancelledConsumerDelayMs(r: RabbitOptions, random: () => number = Math.random): number {
  return Math.round((r.kombu_reconnect_delay + r.kombu_reconnect_splay * random()) * 1000);
}

/** The reason `describeAmqpError` gives for a TCP connection refused by the host. */
const REFUSED = 'ECONNREFUSED';

/**
 * The delay before each reconnection attempt and the account of an outage. Fed every failed
 * attempt and lost connection, in order; asked for the next delay right after each.
 *
 * Ownership: one per AmqpBroker. Concurrency: single event loop.
 */
export class ReconnectSchedule {
  /** Failures, since the last connection, where something answered (not refused). */
  private reached = 0;
  private lastRefused = false;
  private lostAt: number | undefined;
  private lastFailureAt: number | undefined;
  private failedAttempts = 0;

  constructor(
    private readonly rabbit: RabbitOptions,
    private readonly random: () => number = Math.random,
    private readonly now: () => number = Date.now,
  ) {}

  /** The live connection was lost, or an attempt failed (`reason` as `describeAmqpError` gives it). */
  failed(what: 'disconnected' | 'connect-failed', reason: string): void {
    if (what === 'disconnected') this.lostAt ??= this.now();
    else this.failedAttempts++;
    this.lastFailureAt = this.now();
    this.lastRefused = reason === REFUSED;
    if (!this.lastRefused) this.reached++;
  }

  /** The delay before the next attempt, in ms. */
  delayMs(): number {
    return reconnectDelayMs(this.lastRefused ? 1 : Math.max(1, this.reached), this.rabbit, this.random);
  }

  /**
   * A connection is up and set up: how the outage went (undefined for the first connection: only a
   * connection that was up can be lost, and attempts before the first one are not an outage).
   */
  connected(): BrokerRecovery | undefined {
    const at = this.now();
    const recovery =
      this.lostAt !== undefined
        ? { outageMs: at - this.lostAt, sinceLastFailureMs: at - (this.lastFailureAt ?? this.lostAt), failedAttempts: this.failedAttempts }
        : undefined;
    this.reached = 0;
    this.lastRefused = false;
    this.lostAt = undefined;
    this.lastFailureAt = undefined;
    this.failedAttempts = 0;
    return recovery;
  }
}

/** Ownership: one per AmqpBroker. */
export class HostRotation {
  private readonly hosts: readonly ConnectParams[];
  private index = 0;

  /** @throws BrokerUnreachableError when the URL names no host; errors reading TLS files. */
  constructor(
    transport: TransportUrl,
    private readonly rabbit: RabbitOptions,
    connectionName: string,
    private readonly random: () => number = Math.random,
  ) {
    this.hosts = transport.hosts.map((h) => {
      const p = connectParams(transport, h, rabbit);
      const socket: SocketOptions = { ...p.socket, clientProperties: { ...p.socket.clientProperties, connection_name: connectionName } };
      delete socket.servername; // amqplib derives it from the current host name (and never for an IP)
      return { ...p, socket };
    });
    if (this.hosts.length === 0) throw new BrokerUnreachableError('transport_url names no broker');
  }

  get size(): number {
    return this.hosts.length;
  }

  get current(): ConnectParams {
    return this.hosts[this.index] as ConnectParams;
  }

  /** Socket options shared by every host (TLS files, client properties). */
  get socket(): SocketOptions {
    return this.current.socket;
  }

  /** Moves to the next host to try. */
  advance(): void {
    const n = this.hosts.length;
    if (n < 2) return;
    if (this.rabbit.kombu_failover_strategy === 'shuffle') {
      const pick = Math.floor(this.random() * (n - 1));
      this.index = pick >= this.index ? pick + 1 : pick;
    } else {
      this.index = (this.index + 1) % n;
    }
  }

  /** An amqplib URL object that always describes the current host. */
  url(): Options.Connect {
    const cur = (): Options.Connect => this.current.url;
    return {
      get protocol() {
        return cur().protocol;
      },
      get hostname() {
        return cur().hostname;
      },
      get port() {
        return cur().port;
      },
      get username() {
        return cur().username;
      },
      get password() {
        return cur().password;
      },
      get vhost() {
        return cur().vhost;
      },
      get heartbeat() {
        return cur().heartbeat;
      },
      get frameMax() {
        return cur().frameMax;
      },
    };
  }
}
