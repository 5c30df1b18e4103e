/**
 * A stand-in control plane for benchmarks and integration tests: it casts and calls compute agents over the real
 * broker with the agent's own RPC client (exactly as oslo does), and collects the agents'
 * versioned notifications from the control exchange so tests can wait for outcomes of casts.
 */
import { connect, type Channel, type ChannelModel } from 'amqplib';
import { silentLogger } from '../lib/logging/logger';
import { AmqpBroker } from '../agent/rpc/amqp/amqp-broker';
import { RpcClient } from '../agent/rpc/endpoint/client';
import { loadConfig } from '../config/loader';

export interface Event {
  readonly event_type: string;
  readonly uuid: string;
  readonly publisher: string;
  readonly data: Record<string, unknown>;
}

export class ControlPlane {
  readonly events: Event[] = [];
  /** When each event arrived (ms since the epoch), in `events` order. */
  readonly arrivals: number[] = [];
  private conn: ChannelModel | undefined;
  private ch: Channel | undefined;
  private broker: AmqpBroker | undefined;
  private client: RpcClient | undefined;

  constructor(
    readonly exchange: string,
    private readonly transportUrl: string,
  ) {}

  async start(): Promise<void> {
    const { config } = loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__TRANSPORT_URL: this.transportUrl }, defaultFile: '/nonexistent' });
    this.broker = new AmqpBroker({ transport: config.DEFAULT.transport_url, rabbit: config.oslo_messaging_rabbit, logger: silentLogger(), initialAttempts: 3 });
    await this.broker.start();
    this.client = new RpcClient({ broker: this.broker, logger: silentLogger(), rabbit: config.oslo_messaging_rabbit, controlExchange: this.exchange, defaultTimeoutMs: 60000 });
    this.conn = await connect(this.transportUrl.replace(/^rabbit:/, 'amqp:'));
    this.ch = await this.conn.createChannel();
    await this.ch.assertExchange(this.exchange, 'topic', { durable: false, autoDelete: false });
    const q = await this.ch.assertQueue('', { exclusive: true });
    await this.ch.bindQueue(q.queue, this.exchange, 'versioned_notifications.*');
    await this.ch.consume(
      q.queue,
      (msg) => {
        if (!msg) return;
        const outer = JSON.parse(msg.content.toString()) as { 'oslo.message': string };
        const m = JSON.parse(outer['oslo.message']) as { event_type: string; publisher_id: string; payload: { 'nova_object.data': Record<string, unknown> } };
        const data = m.payload['nova_object.data'];
        this.events.push({ event_type: m.event_type, uuid: String(data.uuid), publisher: m.publisher_id, data });
        this.arrivals.push(Date.now());
      },
      { noAck: true },
    );
  }

  cast(host: string, method: string, args: Record<string, unknown>, namespace: string | null = null): Promise<void> {
    if (!this.client) throw new Error('control plane not started');
    return this.client.cast({ topic: 'compute', server: host, version: namespace ? '1.0' : '6.0', namespace }, method, args, { context: { request_id: `req-${method}` } });
  }

  call<T>(host: string, method: string, args: Record<string, unknown>, namespace: string | null = null, timeoutMs = 60000): Promise<T> {
    if (!this.client) throw new Error('control plane not started');
    return this.client.call({ topic: 'compute', server: host, version: namespace ? '1.0' : '6.0', namespace }, method, args, { timeoutMs, context: { request_id: `req-${method}` } }) as Promise<T>;
  }

  /** Waits until an event `type` for every uuid in `uuids` has arrived. */
  async waitFor(type: string, uuids: readonly string[], ms = 60000): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      const seen = new Set(this.events.filter((e) => e.event_type === type).map((e) => e.uuid));
      const missing = uuids.filter((u) => !seen.has(u));
      if (missing.length === 0) return;
      if (Date.now() > deadline) {
        const errors = this.events.filter((e) => e.event_type.endsWith('.error') && missing.includes(e.uuid));
        throw new Error(`timed out waiting for ${type} of ${missing.length} instance(s); errors: ${JSON.stringify(errors.map((e) => [e.event_type, e.data.fault]))}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async close(): Promise<void> {
    await this.ch?.deleteExchange(this.exchange).catch(() => undefined);
    await this.conn?.close().catch(() => undefined);
    await this.client?.close().catch(() => undefined);
    await this.broker?.close().catch(() => undefined);
  }
}
