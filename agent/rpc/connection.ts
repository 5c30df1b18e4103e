/**
 * Turning the configuration into amqplib connection parameters, and connecting to the first broker
 * of `transport_url` that answers. The RPC server and client (this directory) build on it; nothing
 * outside `agent/rpc/` opens an AMQP connection.
 */
import { readFileSync } from 'node:fs';
import { connect, type ChannelModel, type Options, type SocketOptions } from 'amqplib';
import type { AgentConfig } from '../../config/schema';
import type { BrokerHost, TransportUrl } from '../../config/transport-url';

/** No broker of the transport URL accepted a connection. */
export class BrokerUnreachableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BrokerUnreachableError';
  }
}

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
    // oslo sends heartbeats at threshold / rate (rate 2 by default); AMQP negotiates the interval.
    heartbeat: rabbit.heartbeat_timeout_threshold > 0 ? Math.max(1, Math.floor(rabbit.heartbeat_timeout_threshold / 2)) : 0,
  };
  const socket: SocketOptions = {
    timeout: 10000,
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

export interface BrokerConnection {
  readonly model: ChannelModel;
  readonly label: string;
}

/**
 * Connects to the brokers in the order given and returns the first that accepts.
 * @throws BrokerUnreachableError naming every broker tried and why each failed.
 */
export async function connectFirst(transport: TransportUrl, rabbit: RabbitOptions): Promise<BrokerConnection> {
  const reasons: string[] = [];
  for (const host of transport.hosts) {
    let params: ConnectParams;
    try {
      params = connectParams(transport, host, rabbit);
    } catch (e) {
      reasons.push(`${host.host}:${host.port}: ${e instanceof Error ? e.message : String(e)}`);
      continue;
    }
    try {
      const model = await connect(params.url, params.socket);
      return { model, label: params.label };
    } catch (e) {
      reasons.push(`${params.label}: ${describeAmqpError(e)}`);
    }
  }
  throw new BrokerUnreachableError(`no broker accepted a connection (${reasons.join('; ')})`);
}

/** A short reason for an amqplib failure, without the credentials amqplib may quote. */
export function describeAmqpError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const code = (e as NodeJS.ErrnoException).code;
  if (code) return code;
  if (/ACCESS_REFUSED|403/.test(e.message)) return 'access refused (check the user and password in transport_url)';
  if (/NOT_ALLOWED|530/.test(e.message)) return 'vhost not allowed';
  return e.message.split('\n')[0] ?? 'error';
}
