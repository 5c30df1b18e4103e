/**
 * `AmqpBroker`: the Broker port on amqplib 2.x with its opt-in recovery.
 *
 * amqplib's recovery reconnects one URL with backoff and runs `setup` after every connection. On
 * top of it: failover across the transport_url hosts (the URL object's fields follow a rotation
 * that advances on every failed or lost connection, round-robin or shuffle as oslo's
 * `kombu_failover_strategy`), oslo's delay (`rabbit_retry_interval` + `rabbit_retry_backoff` per
 * attempt, capped at `rabbit_interval_max`, ±20 % jitter; a refused port is retried without growing
 * it, see `ReconnectSchedule`), and a `setup` that re-declares every topology and consumer and then
 * re-publishes unconfirmed messages (`ConfirmPublisher`). The `connected` event after an outage
 * says how long it took.
 *
 * A consumer or publish channel that closes on its own (a channel error) forces a reconnect, so
 * recovery has one path; the control channel, which the broker closes when it refuses a
 * declaration, is simply reopened. A consumer cancelled by the broker (queue deleted, failover)
 * forces a reconnect after `kombu_reconnect_delay` plus up to `kombu_reconnect_splay`. Stream queues
 * are read from the offsets `StreamOffsets` keeps. A broker that cannot serve the options
 * (`brokerRefusal`: HA queues on RabbitMQ 4) fails the connection for good with
 * `BrokerIncompatibleError` instead of being retried. amqplib's loose types stay in the `amqp-*.ts` files.
 */
import { connect, type Channel, type ChannelModel, type ConsumeMessage, type RecoveringChannelModel } from 'amqplib';
import type { TransportUrl } from '../../../config/transport-url';
import type { Logger } from '../../../lib/logging/logger';
import { applyTopology, ControlChannel, DeclarationLog, isBrokerRefusal, toDelivery } from './amqp-channel';
import { cancelledConsumerDelayMs, HostRotation, ReconnectSchedule } from './amqp-failover';
import { ConfirmPublisher } from './amqp-publisher';
import { StreamOffsets } from './amqp-stream';
import type { Broker, BrokerStatus, ConsumerSpec, OutgoingMessage, PublishResult, Subscription, Topology } from './broker';
import { BrokerClosedError, BrokerIncompatibleError, BrokerUnreachableError, StatusListeners, TopologyError } from './broker';
import { brokerRefusal, describeAmqpError } from './connection';
import type { RabbitOptions } from './connection';

export interface AmqpBrokerOptions {
  readonly transport: TransportUrl;
  readonly rabbit: RabbitOptions;
  readonly logger: Logger;
  /** Connection attempts before `start` fails (default: unlimited). Later outages retry forever. */
  readonly initialAttempts?: number;
  /** Shown in the RabbitMQ management UI as `connection_name`. */
  readonly connectionName?: string;
  readonly random?: () => number;
}

interface ConsumerGroup {
  readonly spec: ConsumerSpec;
  /** The connection the group was last started on, and its channel there. */
  model: ChannelModel | undefined;
  channel: Channel | undefined;
  tags: string[];
  cancelled: boolean;
  readonly offsets: StreamOffsets;
}

const refusal = (e: unknown): TopologyError => new TopologyError(describeAmqpError(e), { cause: e });

export class AmqpBroker implements Broker {
  private readonly rotation: HostRotation;
  private readonly schedule: ReconnectSchedule;
  private model: RecoveringChannelModel | undefined;
  private live: ChannelModel | undefined;
  private readonly control = new ControlChannel(
    () => this.whenConnected().then((m) => m.createChannel()),
    (err) => this.opts.logger.debug({ channel: 'control', reason: describeAmqpError(err) }, 'channel error'),
  );
  private readonly publisher = new ConfirmPublisher();
  private readonly declared = new DeclarationLog();
  private readonly groups: ConsumerGroup[] = [];
  private readonly status = new StatusListeners();
  private readonly connectWaiters: Array<() => void> = [];
  private closed = false;
  /** Why the last connection ended, for errors that only see "channel ended". */
  private lastLoss: string | undefined;
  /** Set when a broker cannot serve the options: recovery stops. */
  private incompatible: BrokerIncompatibleError | undefined;

  /** @throws BrokerUnreachableError for a URL without hosts; file errors for unreadable TLS files. */
  constructor(private readonly opts: AmqpBrokerOptions) {
    this.rotation = new HostRotation(opts.transport, opts.rabbit, opts.connectionName ?? `compute-agent:${process.pid}`, opts.random);
    this.schedule = new ReconnectSchedule(opts.rabbit, opts.random);
  }

  get isConnected(): boolean {
    return this.live !== undefined;
  }

  async start(): Promise<void> {
    if (this.model) return;
    const attempts = this.opts.initialAttempts ?? Infinity;
    const reasons: string[] = [];
    this.model = await connect(this.rotation.url(), {
      ...this.rotation.socket,
      recovery: {
        waitForConnect: false,
        maxRetries: Infinity,
        initialMaxRetries: Math.max(0, attempts - 1),
        calculateDelay: () => {
          if (this.incompatible) throw this.incompatible; // amqplib abandons recovery with it
          return this.schedule.delayMs();
        },
        setup: (m: ChannelModel) => this.setup(m),
      },
    });
    const m = this.model;
    m.on('connect', (cm: ChannelModel) => {
      this.live = cm;
      const recovery = this.schedule.connected();
      this.status.emit({ type: 'connected', broker: this.rotation.current.label, ...(recovery ? { recovery } : {}) });
      for (const w of this.connectWaiters.splice(0)) w();
    });
    m.on('disconnect', (err: Error) => this.lost(err, 'disconnected'));
    m.on('connect-failed', (err: Error) => {
      reasons.push(`${this.rotation.current.label}: ${describeAmqpError(err)}`);
      this.lost(err, 'connect-failed');
    });
    m.on('reconnect-scheduled', (i: { attempt: number; delay: number }) =>
      this.status.emit({ type: 'reconnect-scheduled', attempt: i.attempt, delayMs: i.delay, next: this.rotation.current.label }),
    );
    m.on('blocked', (reason: string) => this.status.emit({ type: 'blocked', reason }));
    m.on('unblocked', () => this.status.emit({ type: 'unblocked' }));
    m.on('error', (err: Error) => this.opts.logger.warn({ reason: describeAmqpError(err) }, 'broker connection error'));
    m.on('reconnect-failed', (err: Error) => this.opts.logger.error({ reason: err.message }, 'gave up reconnecting to the broker'));
    try {
      await m.waitForConnect();
    } catch (e) {
      this.model = undefined;
      if (this.incompatible) throw this.incompatible;
      throw new BrokerUnreachableError(`no broker accepted a connection (${[...new Set(reasons)].join('; ') || describeAmqpError(e)})`, { cause: e });
    }
  }

  async declare(t: Topology): Promise<void> {
    for (let failures = 0; ; ) {
      const ch = await this.control.get();
      try {
        await applyTopology(ch, t);
        this.declared.add(t);
        return;
      } catch (e) {
        this.control.drop(ch);
        if (isBrokerRefusal(e)) throw refusal(e);
        if (this.closed) throw new BrokerClosedError(undefined, { cause: e });
        if (++failures >= 3) throw new TopologyError(`cannot declare: ${this.lastLoss ?? describeAmqpError(e)}`, { cause: e });
      }
    }
  }

  async deleteQueue(name: string): Promise<void> {
    this.declared.forgetQueue(name);
    if (this.live) await (await this.control.get()).deleteQueue(name).catch(() => undefined);
  }

  async deleteExchange(name: string): Promise<void> {
    this.declared.forgetExchange(name);
    if (this.live) await (await this.control.get()).deleteExchange(name).catch(() => undefined);
  }

  async consume(spec: ConsumerSpec): Promise<Subscription> {
    const group: ConsumerGroup = { spec, model: undefined, channel: undefined, tags: [], cancelled: false, offsets: new StreamOffsets(spec.streams) };
    this.groups.push(group);
    const forget = (): void => {
      group.cancelled = true;
      const i = this.groups.indexOf(group);
      if (i >= 0) this.groups.splice(i, 1);
    };
    for (let failures = 0; ; ) {
      let model: ChannelModel;
      try {
        model = await this.whenConnected();
      } catch (e) {
        forget();
        throw e;
      }
      if (group.model === model && group.channel) break; // a reconnect's setup already started it here
      try {
        await this.startGroup(model, group);
        break;
      } catch (e) {
        if (isBrokerRefusal(e) || this.closed) {
          forget();
          throw isBrokerRefusal(e) ? refusal(e) : new BrokerClosedError(undefined, { cause: e });
        }
        // The broker may close the whole connection instead (540 NOT_IMPLEMENTED): do not retry forever.
        if (++failures >= 3) {
          forget();
          throw new TopologyError(`cannot consume from ${spec.queues.join(', ')}: ${this.lastLoss ?? describeAmqpError(e)}`, { cause: e });
        }
      }
    }
    return {
      // basic.cancel only: the channel stays open so deliveries in progress can still be acked.
      cancel: async () => {
        forget();
        const ch = group.channel;
        for (const tag of group.tags.splice(0)) await ch?.cancel(tag).catch(() => undefined);
      },
    };
  }

  publish(message: OutgoingMessage, options?: { readonly signal?: AbortSignal }): Promise<PublishResult> {
    if (this.closed) return Promise.reject(new BrokerClosedError());
    return this.publisher.publish(message, options?.signal);
  }

  onStatus(listener: (s: BrokerStatus) => void): () => void {
    return this.status.add(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.publisher.close();
    for (const w of this.connectWaiters.splice(0)) w();
    const m = this.model;
    this.model = undefined;
    this.live = undefined;
    await m?.close().catch(() => undefined);
    this.status.emit({ type: 'closed' });
  }

  /** Runs after every (re)connection, before the connection counts as up. */
  private async setup(model: ChannelModel): Promise<void> {
    // Recovery listens for errors only once setup succeeded; an error before (a heartbeat
    // timeout while declaring) must not become an uncaught 'error' event.
    model.on('error', (err: Error) => this.opts.logger.warn({ reason: describeAmqpError(err) }, 'broker connection error during setup'));
    const refused = brokerRefusal(model.connection.serverProperties, this.opts.rabbit);
    if (refused) {
      this.incompatible = new BrokerIncompatibleError(`${this.rotation.current.label}: ${refused}`);
      throw this.incompatible;
    }
    const ctl = await model.createChannel();
    this.control.adopt(ctl);
    for (const t of this.declared.all) await applyTopology(ctl, t);
    for (const g of this.groups) if (!g.cancelled) await this.startGroup(model, g);
    const pub = await model.createConfirmChannel();
    this.logErrors(pub, 'publish');
    this.watch(model, pub, 'publish');
    this.publisher.attach(pub);
  }

  private async startGroup(model: ChannelModel, group: ConsumerGroup): Promise<void> {
    group.model = model;
    group.tags = [];
    group.channel = undefined;
    const ch = await model.createChannel();
    this.logErrors(ch, 'consumer');
    // Per consumer, as oslo sets it: quorum queues refuse global QoS (540 NOT_IMPLEMENTED).
    // The server's own slot count bounds the requests in progress across the queues.
    if (!group.spec.noAck) await ch.prefetch(group.spec.prefetch, false);
    group.channel = ch;
    for (const queue of group.spec.queues) {
      const options = { noAck: group.spec.noAck === true, arguments: group.offsets.consumeArguments(queue) };
      const ok = await ch.consume(queue, (msg: ConsumeMessage | null) => this.onMessage(model, ch, group, queue, msg), options);
      group.tags.push(ok.consumerTag);
    }
    // Watched only once established: a refusal while starting is the caller's error, not a reason to reconnect.
    this.watch(model, ch, 'consumer', () => group.channel === ch && !group.cancelled);
  }

  private onMessage(model: ChannelModel, ch: Channel, group: ConsumerGroup, queue: string, msg: ConsumeMessage | null): void {
    if (msg === null) {
      if (group.cancelled) return;
      this.status.emit({ type: 'consumer-cancelled', queue });
      group.offsets.reset();
      const ms = cancelledConsumerDelayMs(this.opts.rabbit, this.opts.random);
      setTimeout(() => this.forceReconnect(model, `consumer of ${queue} cancelled by the broker`), ms);
      return;
    }
    const d = toDelivery(ch, queue, msg, group.spec.noAck === true, () => group.channel === ch);
    group.offsets.delivered(queue, d.properties);
    try {
      group.spec.onDelivery(d);
    } catch (e) {
      this.opts.logger.error({ queue, reason: e instanceof Error ? e.message : String(e) }, 'consumer threw; message rejected');
      d.reject(false);
    }
  }

  /** A channel closing on its own while its connection lives: reconnect everything. */
  private watch(model: ChannelModel, ch: Channel, role: string, stillOurs: () => boolean = () => true): void {
    ch.on('close', () => {
      if (role === 'publish') this.publisher.detach();
      if (this.closed || this.live !== model || !stillOurs()) return;
      this.forceReconnect(model, `${role} channel closed`);
    });
  }

  /** Every channel needs an 'error' listener from birth: amqplib rethrows unheard errors. */
  private logErrors(ch: Channel, role: string): void {
    ch.on('error', (err: Error) => this.opts.logger.warn({ channel: role, reason: describeAmqpError(err) }, 'channel error'));
  }

  private forceReconnect(model: ChannelModel, reason: string): void {
    if (this.closed || this.live !== model) return;
    this.opts.logger.warn({ reason }, 'reconnecting to the broker');
    void model.close().catch(() => undefined);
  }

  private lost(err: Error, type: 'disconnected' | 'connect-failed'): void {
    this.live = undefined;
    this.control.drop();
    this.publisher.detach();
    for (const g of this.groups) g.channel = undefined;
    this.lastLoss = describeAmqpError(err);
    this.schedule.failed(type, this.lastLoss);
    this.status.emit({ type, broker: this.rotation.current.label, reason: this.lastLoss });
    this.rotation.advance();
  }

  private whenConnected(): Promise<ChannelModel> {
    if (this.closed) return Promise.reject(new BrokerClosedError());
    const live = this.live;
    if (live) return Promise.resolve(live);
    return new Promise<void>((resolve) => this.connectWaiters.push(resolve)).then(() => this.whenConnected());
  }
}
