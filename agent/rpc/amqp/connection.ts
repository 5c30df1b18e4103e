/**
 * Turning the configuration into amqplib connection parameters for one broker host of
 * `transport_url` (credentials, vhost, AMQP heartbeat, TLS files), and short, credential-free
 * descriptions of amqplib failures. `AmqpBroker` builds its connections from these; nothing
 * outside `agent/rpc/` opens an AMQP connection.
 */
import { readFileSync } from 'node:fs';
import type { Options, SocketOptions } from 'amqplib';
import type { AgentConfig } from '../../../config/schema';
import type { BrokerHost, TransportUrl } from '../../../config/transport-url';

export type RabbitOptions = AgentConfig['oslo_messaging_rabbit'];

export interface ConnectParams {
  readonly url: Options.Connect;
  readonly socket: SocketOptions;
  /** `host:port` for logs (never with credentials). */
  readonly label: string;
}

/** amqplib parameters for one broker host. Reads the TLS files named by the options. */
export function connectParams(transport: TransportUrl, host: BrokerHost, rabbit: RabbitOptions): ConnectParams {
  const tls = rabbit.ssl || transport.query.ssl === '1' || transport.query.ssl === 'true';
  const url: Options.Connect = {
    protocol: tls ? 'amqps' : 'amqp',
    hostname: host.host,
    port: host.port,
    username: host.username ?? 'guest',
    password: host.password ?? 'guest',
    vhost: transport.virtualHost,
    // heartbeat_rate checks per threshold: amqplib checks for traffic once per negotiated interval
    // and gives up after two silent ones, so the interval is threshold / rate.
    heartbeat: rabbit.heartbeat_timeout_threshold > 0 ? Math.max(1, Math.floor(rabbit.heartbeat_timeout_threshold / rabbit.heartbeat_rate)) : 0,
  };
  const socket: SocketOptions = {
    timeout: 10000,
    // Without it Nagle and delayed ACKs add ~40 ms to every RPC round trip (py-amqp sets it too).
    noDelay: true,
    clientProperties: { product: 'compute-agent', connection_name: `compute-agent:${process.pid}` },
  };
  if (tls) {
    if (rabbit.ssl_ca_file) socket.ca = [readFileSync(rabbit.ssl_ca_file)];
    if (rabbit.ssl_cert_file) socket.cert = readFileSync(rabbit.ssl_cert_file);
    if (rabbit.ssl_key_file) socket.key = readFileSync(rabbit.ssl_key_file);
    socket.servername = host.host;
  }
  return { url, socket, label: `${host.host}:${host.port}` };
}

const ERRNO = /\b(E(?:CONN[A-Z]+|HOST[A-Z]+|NET[A-Z]+|TIMEDOUT|AI_AGAIN|NOTFOUND|PIPE|ADDRNOTAVAIL))\b/;

/**
 * A short reason for an amqplib failure, without the credentials amqplib may quote: the errno
 * code for socket errors, the broker's own text for AMQP closes ("PRECONDITION_FAILED -
 * inequivalent arg 'durable' ..."). Duck-typed: errors may come from another realm.
 */
export function describeAmqpError(e: unknown): string {
  const err = (typeof e === 'object' && e !== null ? e : {}) as { code?: unknown; message?: unknown };
  const message = typeof err.message === 'string' ? err.message : String(e);
  if (typeof err.code === 'string' && /^E[A-Z_]+$/.test(err.code)) return err.code;
  const errno = ERRNO.exec(message);
  if (errno?.[1]) return errno[1];
  if (/ACCESS_REFUSED|403/.test(message)) return 'access refused (check the user and password in transport_url)';
  if (/NOT_ALLOWED|530/.test(message)) return 'vhost not allowed';
  const server = /with message "([^"]+)"/.exec(message);
  if (server?.[1]) return server[1];
  return (message.replace(/^Error: /, '').split('\n')[0] ?? '') || 'error';
}

/**
 * Why a broker cannot serve these options, from the `version` it announced in its connection
 * properties; undefined when it can. RabbitMQ 4.0 removed classic mirrored queues: it accepts
 * `x-ha-policy` and ignores it, so `rabbit_ha_queues` would silently leave every queue on one node.
 */
export function brokerRefusal(serverProperties: Readonly<Record<string, unknown>> | undefined, rabbit: RabbitOptions): string | undefined {
  if (!rabbit.rabbit_ha_queues) return undefined;
  const raw = serverProperties?.version;
  const version = typeof raw === 'string' ? raw : Buffer.isBuffer(raw) ? raw.toString('utf8') : undefined;
  const major = Number(/^(\d+)\./.exec(version ?? '')?.[1]);
  if (!(major >= 4)) return undefined;
  return (
    `oslo_messaging_rabbit.rabbit_ha_queues = true, but RabbitMQ ${version ?? ''} has no classic mirrored queues (removed in 4.0; ` +
    'x-ha-policy is ignored): set rabbit_ha_queues = false and use rabbit_quorum_queue = true for replicated queues'
  );
}
