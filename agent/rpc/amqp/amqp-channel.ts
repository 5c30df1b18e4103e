/**
 * amqplib channel helpers for `AmqpBroker`: declaring a Topology on a channel with the argument
 * types py-amqp uses, the log of declarations replayed after a reconnect, recognising a broker
 * refusal, and turning an amqplib message into the port's `Delivery`. amqplib's loose types end here.
 */
import type { Channel, ConsumeMessage } from 'amqplib';
import type { Delivery, MessageProperties, QueueArguments, Topology } from './broker';

/**
 * Queue arguments as amqplib table values. Integers go as signedint ('I'), as py-amqp writes them:
 * RabbitMQ compares argument types when an existing queue is declared again.
 */
export function amqpArguments(args: QueueArguments): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(args)) {
    out[k] = typeof v === 'number' && Number.isInteger(v) && Math.abs(v) <= 0x7fffffff ? { '!': 'int', value: v } : v;
  }
  return out;
}

/** Declares exchanges, queues, then bindings. Rejects with amqplib's error (the channel is then closed). */
export async function applyTopology(ch: Channel, t: Topology): Promise<void> {
  for (const x of t.exchanges) await ch.assertExchange(x.name, x.type, { durable: x.durable, autoDelete: x.autoDelete });
  for (const q of t.queues) {
    await ch.assertQueue(q.name, { durable: q.durable, autoDelete: q.autoDelete, exclusive: false, arguments: amqpArguments(q.arguments) });
  }
  for (const b of t.bindings) await ch.bindQueue(b.queue, b.exchange, b.routingKey);
}

/**
 * The channel declarations and deletions run on, opened on demand. The broker closes it when it
 * refuses a declaration; the next use opens another on the same connection.
 */
export class ControlChannel {
  private current: Promise<Channel> | undefined;
  private channel: Channel | undefined;

  constructor(
    private readonly open: () => Promise<Channel>,
    private readonly onError: (err: Error) => void,
  ) {}

  get(): Promise<Channel> {
    if (!this.current) {
      const p = this.open().then((ch) => {
        this.adopt(ch);
        return ch;
      });
      this.current = p;
      p.catch(() => {
        if (this.current === p) this.current = undefined;
      });
    }
    return this.current;
  }

  /** Uses `ch` (opened by the connection's setup) from now on. */
  adopt(ch: Channel): void {
    this.channel = ch;
    this.current = Promise.resolve(ch);
    ch.on('error', this.onError);
    ch.on('close', () => this.drop(ch));
  }

  /** Forgets `ch` (or the current channel) so the next use opens a new one. */
  drop(ch?: Channel): void {
    if (ch !== undefined && ch !== this.channel) return;
    this.channel = undefined;
    this.current = undefined;
  }
}

/** Declarations to replay after every reconnect, minus what was deleted since. */
export class DeclarationLog {
  private items: Topology[] = [];

  get all(): readonly Topology[] {
    return this.items;
  }

  add(t: Topology): void {
    this.items.push(t);
  }

  forgetQueue(name: string): void {
    this.items = this.items.map((t) => ({ exchanges: t.exchanges, queues: t.queues.filter((q) => q.name !== name), bindings: t.bindings.filter((b) => b.queue !== name) }));
  }

  forgetExchange(name: string): void {
    this.items = this.items.map((t) => ({ exchanges: t.exchanges.filter((x) => x.name !== name), queues: t.queues, bindings: t.bindings.filter((b) => b.exchange !== name) }));
  }
}

/** The broker closed the channel with an AMQP reply code (e.g. 406 PRECONDITION_FAILED, 404). */
export function isBrokerRefusal(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code >= 400;
}

function properties(msg: ConsumeMessage): MessageProperties {
  const p = msg.properties as unknown as Record<string, unknown>;
  return {
    contentType: typeof p.contentType === 'string' ? p.contentType : undefined,
    contentEncoding: typeof p.contentEncoding === 'string' ? p.contentEncoding : undefined,
    deliveryMode: typeof p.deliveryMode === 'number' ? p.deliveryMode : undefined,
    priority: typeof p.priority === 'number' ? p.priority : undefined,
    expiration: typeof p.expiration === 'string' ? p.expiration : undefined,
    headers: typeof p.headers === 'object' && p.headers !== null ? (p.headers as Record<string, unknown>) : undefined,
  };
}

/**
 * A Delivery for `msg` received on `ch`. `usable` says whether `ch` may still settle it (it is the
 * consumer's current channel); settling twice, or on a dead channel, returns false.
 */
export function toDelivery(ch: Channel, queue: string, msg: ConsumeMessage, noAck: boolean, usable: () => boolean): Delivery {
  let settled = noAck;
  const settle = (fn: () => void): boolean => {
    if (settled || !usable()) return false;
    try {
      fn();
      settled = true;
      return true;
    } catch {
      return false; // IllegalOperationError: the channel closed meanwhile
    }
  };
  return {
    queue,
    exchange: msg.fields.exchange,
    routingKey: msg.fields.routingKey,
    body: msg.content,
    redelivered: msg.fields.redelivered,
    properties: properties(msg),
    ack: () => settle(() => ch.ack(msg)),
    reject: (requeue) => settle(() => ch.reject(msg, requeue)),
  };
}
