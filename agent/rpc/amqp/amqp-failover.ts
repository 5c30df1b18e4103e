/**
 * Failover across the brokers of `transport_url` for `AmqpBroker`, as oslo's rabbit driver does
 * it: after every failed or lost connection the next host is tried (`kombu_failover_strategy`
 * round-robin, or shuffle), after a delay of `rabbit_retry_interval` + `rabbit_retry_backoff` per
 * further attempt, capped at `rabbit_interval_max`, with ±20 % jitter so a fleet of agents does
 * not reconnect in lockstep.
 *
 * amqplib's recovery reconnects one URL object; `url()` returns an object whose fields read the
 * rotation's current host each time amqplib opens a socket. Not here: when to reconnect
 * (amqplib's recovery decides) or what to do after (the broker's setup).
 */
import type { Options, SocketOptions } from 'amqplib';
import type { TransportUrl } from '../../../config/transport-url';
import { BrokerUnreachableError } from './broker';
import { connectParams, type ConnectParams } from './connection';
import type { RabbitOptions } from './connection';

/** The delay before reconnection attempt `attempt` (1-based), in ms. */
export function reconnectDelayMs(attempt: number, r: RabbitOptions, random: () => number = Math.random): number {
  const capMs = r.rabbit_interval_max * 1000;
  const base = Math.min(r.rabbit_interval_max, r.rabbit_retry_interval + r.rabbit_retry_backoff * Math.max(0, attempt - 1)) * 1000;
  return Math.round(Math.min(capMs, base * (0.8 + 0.4 * random())));
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
