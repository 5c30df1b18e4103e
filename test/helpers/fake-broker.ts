/**
 * `FakeBroker`: an in-memory Broker for unit tests, with just enough RabbitMQ semantics for the
 * RPC layer: topic/fanout/default-exchange routing, declaration equivalence (PRECONDITION_FAILED),
 * per-consumer prefetch, acks, `mandatory` returns, and connection loss (unacknowledged messages
 * are redelivered, publishes wait, declarations and consumers are replayed on reconnect).
 *
 * Test controls: `inject` a raw body into a queue, `dropConnection` / `reconnect`, `restart`
 * (also loses non-durable queues), `published` (everything confirmed), `queueDepth`.
 * Not a model of durability, TTLs or exclusive queues.
 */
import type { Broker, BrokerStatus, ConsumerSpec, Delivery, MessageProperties, OutgoingMessage, PublishResult, QueueSpec, Subscription, Topology } from '../../agent/rpc/amqp/broker';
import { BrokerClosedError, PublishAbortedError, TopologyError } from '../../agent/rpc/amqp/broker';

interface Stored {
  readonly exchange: string;
  readonly routingKey: string;
  readonly body: Buffer;
  readonly properties: MessageProperties;
  redelivered: boolean;
}
interface Queue {
  readonly spec: QueueSpec;
  readonly messages: Stored[];
}
interface Consumer {
  readonly spec: ConsumerSpec;
  unacked: Set<Stored & { queue: string }>;
  cancelled: boolean;
  epoch: number;
}

function topicMatches(pattern: string, key: string): boolean {
  const p = pattern.split('.');
  const k = key.split('.');
  const walk = (i: number, j: number): boolean => {
    if (i === p.length) return j === k.length;
    if (p[i] === '#') return walk(i + 1, j) || (j < k.length && walk(i, j + 1));
    return j < k.length && (p[i] === '*' || p[i] === k[j]) && walk(i + 1, j + 1);
  };
  return walk(0, 0);
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

export class FakeBroker implements Broker {
  readonly published: OutgoingMessage[] = [];
  private readonly exchanges = new Map<string, Topology['exchanges'][number]>();
  private readonly queues = new Map<string, Queue>();
  private bindings: Array<Topology['bindings'][number]> = [];
  private readonly declared: Topology[] = [];
  private readonly consumers: Consumer[] = [];
  private readonly listeners = new Set<(s: BrokerStatus) => void>();
  private readonly waiting: Array<() => void> = [];
  private connected = false;
  private closed = false;
  private epoch = 0;

  get isConnected(): boolean {
    return this.connected;
  }

  async start(): Promise<void> {
    this.connect();
    await Promise.resolve();
  }

  async declare(t: Topology): Promise<void> {
    await this.whenConnected();
    this.apply(t);
    this.declared.push(t);
  }

  async deleteQueue(name: string): Promise<void> {
    this.queues.delete(name);
    this.bindings = this.bindings.filter((b) => b.queue !== name);
    await Promise.resolve();
  }

  async deleteExchange(name: string): Promise<void> {
    this.exchanges.delete(name);
    this.bindings = this.bindings.filter((b) => b.exchange !== name);
    await Promise.resolve();
  }

  async consume(spec: ConsumerSpec): Promise<Subscription> {
    await this.whenConnected();
    for (const q of spec.queues) if (!this.queues.has(q)) throw new TopologyError(`NOT_FOUND - no queue '${q}'`);
    const c: Consumer = { spec, unacked: new Set(), cancelled: false, epoch: this.epoch };
    this.consumers.push(c);
    this.pump();
    return {
      cancel: async () => {
        c.cancelled = true;
        await Promise.resolve();
      },
    };
  }

  async publish(m: OutgoingMessage, options?: { readonly signal?: AbortSignal }): Promise<PublishResult> {
    for (;;) {
      if (this.closed) throw new BrokerClosedError();
      if (options?.signal?.aborted) throw new PublishAbortedError();
      if (this.connected) break;
      await new Promise<void>((resolve) => {
        this.waiting.push(resolve);
        options?.signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
    const targets = this.route(m.exchange, m.routingKey);
    for (const q of targets) q.messages.push({ exchange: m.exchange, routingKey: m.routingKey, body: m.body, properties: m.properties, redelivered: false });
    this.published.push(m);
    await Promise.resolve();
    this.pump();
    return targets.length === 0 && m.mandatory ? 'returned' : 'confirmed';
  }

  onStatus(listener: (s: BrokerStatus) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.dropConnection('closed');
    this.closed = true;
    for (const w of this.waiting.splice(0)) w();
    this.emit({ type: 'closed' });
    await Promise.resolve();
  }

  /** Puts a raw message into a queue, as if published by anyone. */
  inject(queue: string, body: Buffer, properties: MessageProperties = {}): void {
    const q = this.queues.get(queue);
    if (!q) throw new Error(`no queue ${queue}`);
    q.messages.push({ exchange: '', routingKey: queue, body, properties, redelivered: false });
    this.pump();
  }

  /** Loses the connection: unacked messages return to their queues (redelivered). */
  dropConnection(reason = 'connection reset'): void {
    if (!this.connected) return;
    this.connected = false;
    for (const c of this.consumers) {
      for (const m of [...c.unacked].reverse()) this.queues.get(m.queue)?.messages.unshift({ ...m, redelivered: true });
      c.unacked = new Set();
    }
    this.emit({ type: 'disconnected', broker: 'fake', reason });
  }

  /** Reconnects: replays declarations and consumers, then releases waiting publishes. */
  reconnect(): void {
    if (this.closed) return;
    this.connect();
  }

  /** A broker restart: the connection drops and non-durable queues vanish with their messages. */
  restart(): void {
    this.dropConnection('broker restarted');
    for (const [name, q] of this.queues) if (!q.spec.durable) this.queues.delete(name);
    for (const [name, x] of this.exchanges) if (!x.durable) this.exchanges.delete(name);
    this.bindings = this.bindings.filter((b) => this.queues.has(b.queue) && (b.exchange === '' || this.exchanges.has(b.exchange)));
  }

  queueDepth(name: string): number | undefined {
    return this.queues.get(name)?.messages.length;
  }

  queueNames(): string[] {
    return [...this.queues.keys()];
  }

  hasQueue(name: string): boolean {
    return this.queues.has(name);
  }

  private connect(): void {
    this.connected = true;
    this.epoch++;
    for (const t of this.declared) this.apply(t);
    for (const c of this.consumers) c.epoch = this.epoch;
    this.emit({ type: 'connected', broker: 'fake' });
    for (const w of this.waiting.splice(0)) w();
    this.pump();
  }

  private async whenConnected(): Promise<void> {
    while (!this.connected) {
      if (this.closed) throw new BrokerClosedError();
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  private apply(t: Topology): void {
    for (const x of t.exchanges) {
      const old = this.exchanges.get(x.name);
      if (old && !same(old, x)) throw new TopologyError(`PRECONDITION_FAILED - inequivalent arg for exchange '${x.name}'`);
      this.exchanges.set(x.name, x);
    }
    for (const q of t.queues) {
      const old = this.queues.get(q.name);
      if (old && !same(old.spec, q)) throw new TopologyError(`PRECONDITION_FAILED - inequivalent arg for queue '${q.name}'`);
      if (!old) this.queues.set(q.name, { spec: q, messages: [] });
    }
    for (const b of t.bindings) if (!this.bindings.some((x) => same(x, b))) this.bindings.push(b);
  }

  private route(exchange: string, key: string): Queue[] {
    if (exchange === '') {
      const q = this.queues.get(key);
      return q ? [q] : [];
    }
    const x = this.exchanges.get(exchange);
    if (!x) return [];
    const names = this.bindings
      .filter((b) => b.exchange === exchange && (x.type === 'fanout' || (x.type === 'topic' ? topicMatches(b.routingKey, key) : b.routingKey === key)))
      .map((b) => b.queue);
    return [...new Set(names)].map((n) => this.queues.get(n)).filter((q): q is Queue => q !== undefined);
  }

  private pump(): void {
    if (!this.connected) return;
    for (const c of this.consumers) {
      if (c.cancelled) continue;
      for (;;) {
        if (!c.spec.noAck && c.unacked.size >= c.spec.prefetch) break;
        const q = c.spec.queues.map((n) => this.queues.get(n)).find((x) => x && x.messages.length > 0);
        const m = q?.messages.shift();
        if (!q || !m) break;
        this.deliver(c, q.spec.name, m);
      }
    }
  }

  private deliver(c: Consumer, queue: string, m: Stored): void {
    const entry = { ...m, queue };
    const epoch = c.epoch;
    let settled = false;
    const live = (): boolean => !settled && this.connected && c.epoch === epoch && c.unacked.has(entry);
    if (!c.spec.noAck) c.unacked.add(entry);
    const d: Delivery = {
      queue,
      exchange: m.exchange,
      routingKey: m.routingKey,
      body: m.body,
      properties: m.properties,
      redelivered: m.redelivered,
      ack: () => {
        if (c.spec.noAck || !live()) return false;
        settled = true;
        c.unacked.delete(entry);
        setImmediate(() => this.pump());
        return true;
      },
      reject: (requeue) => {
        if (c.spec.noAck || !live()) return false;
        settled = true;
        c.unacked.delete(entry);
        if (requeue) this.queues.get(queue)?.messages.unshift({ ...m, redelivered: true });
        setImmediate(() => this.pump());
        return true;
      },
    };
    setImmediate(() => {
      try {
        c.spec.onDelivery(d);
      } catch {
        d.reject(false);
      }
    });
  }

  private emit(s: BrokerStatus): void {
    for (const l of this.listeners) l(s);
  }
}
