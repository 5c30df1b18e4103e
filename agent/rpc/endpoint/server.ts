/**
 * The RPC server: consumes `<topic>`, `<topic>.<host>` and the fanout queue, and for each message
 * decodes, de-duplicates, journals, acknowledges, runs and answers it.
 *
 * Delivery contract (better than oslo's ack-on-receipt):
 * 1. Decode and resolve synchronously, in delivery order. Bad input (not JSON, no envelope,
 *    unknown method or version, bad arguments, too large) is answered with a failure when it is a
 *    call, logged, and dropped or dead-lettered (`refusals.ts`, which bounds what that keeps in
 *    memory); it never reaches a handler or stops the consumer.
 * 2. Take a place in a FIFO of `maxInProgress` slots (the bound on requests in progress) and, for
 *    instance-keyed methods, in that instance's serial queue, both in delivery order.
 * 3. When the slot is granted: `RequestJournal.accept` (journaled methods), then ack. A duplicate
 *    `_unique_id` (in flight, recently seen, or known to the journal) is acked and dropped.
 * 4. Run the handler when its instance's earlier requests are done; calls with `_timeout` get a
 *    heartbeat every `int(_timeout)/2` s; reply; `RequestJournal.complete`; free the slot.
 *
 * Not here: the wire format (`../oslo/messages.ts`), replies (`replier.ts`), the connection
 * (`Broker`).
 */
import type { RequestJournal } from '../../journal/types';
import { crashPoint } from '../../crash-points';
import type { Logger } from '../../../lib/logging/logger';
import { systemClock, type Clock } from '../../../lib/clock';
import type { Broker, Delivery, Subscription } from '../amqp/broker';
import type { CallInfo, Dispatcher, ResolvedRequest } from './dispatcher';
import { BadMessageError, MessageTooLargeError, type ReplyAddress } from '../oslo/errors';
import { failureFromError, isRemoteSerializable } from '../oslo/failure';
import { decodeRequest, newId, type RpcRequest } from '../oslo/messages';
import { FifoSemaphore, KeyedSerializer, RecentIds, type Permit } from './ordering';
import { Refusals } from './refusals';
import { Replier, type Outcome } from './replier';
import { deadLetterTopology, serverTopology, type RabbitOptions, type ServerTarget, type ServerTopology } from '../oslo/topology';
import type { TransientIds } from '../oslo/queue-manager';

export interface RpcServerOptions {
  readonly broker: Broker;
  readonly dispatcher: Dispatcher;
  readonly journal: RequestJournal;
  readonly logger: Logger;
  readonly target: ServerTarget;
  readonly rabbit: RabbitOptions;
  /** Names the private fanout queue (oslo's uuid4 hex by default; the queue manager's names). */
  readonly ids?: TransientIds;
  /** The AMQP prefetch: deliveries not yet acknowledged, at most. */
  readonly prefetch: number;
  /**
   * Requests in progress (acked or waiting to be) at most: oslo's executor_thread_pool_size.
   * Defaults to `prefetch`. It must not be tied to the prefetch: kolla sets
   * rabbit_qos_prefetch_count = 1, and a build waiting for Neutron's network-vif-plugged would
   * then hold the only slot while the event that ends its wait queued behind it.
   */
  readonly maxInProgress?: number;
  readonly maxMessageBytes: number;
  /** Exchange for requests that cannot be processed; undefined drops them. */
  readonly deadLetterExchange?: string;
  readonly clock?: Clock;
  /** Delay before a message whose journal record failed is requeued (ms). */
  readonly journalRetryDelayMs?: number;
  /** Told how each request ended (for metrics). */
  /** Each handled request's method, outcome and handling time in seconds (the metrics). */
  readonly onOutcome?: (method: string, outcome: 'succeeded' | 'failed' | 'interrupted', seconds: number) => void;
}

export interface RpcServerStats {
  readonly received: number;
  readonly duplicates: number;
  readonly rejected: number;
  readonly completed: number;
  readonly inProgress: number;
}

const RECENT_IDS = 4096;
/**
 * Longest `_unique_id` served. oslo sends a 32-character uuid4; the recent ids (RECENT_IDS) and
 * the journal's de-duplication window (thousands, written in its snapshots) keep one per request,
 * so a sender's megabyte id is refused rather than remembered.
 */
export const MAX_UNIQUE_ID_CHARS = 255;
/** setTimeout's limit (2^31 - 1 ms). */
const MAX_TIMER_MS = 2_147_483_647;

export class RpcServer {
  private readonly clock: Clock;
  private readonly replier: Replier;
  private readonly refusals: Refusals;
  private readonly recent = new RecentIds(RECENT_IDS);
  private readonly serial = new KeyedSerializer();
  private readonly slots: FifoSemaphore;
  private readonly tasks = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private topology: ServerTopology | undefined;
  private subscription: Subscription | undefined;
  private counts = { received: 0, duplicates: 0, completed: 0 };

  constructor(private readonly opts: RpcServerOptions) {
    this.clock = opts.clock ?? systemClock;
    this.slots = new FifoSemaphore(Math.max(opts.prefetch, opts.maxInProgress ?? opts.prefetch));
    this.replier = new Replier({
      broker: opts.broker,
      logger: opts.logger,
      clock: this.clock,
      retryTimeoutMs: opts.rabbit.kombu_missing_consumer_retry_timeout * 1000,
    });
    const { broker, logger, deadLetterExchange, prefetch } = opts;
    this.refusals = new Refusals({ broker, replier: this.replier, logger, deadLetterExchange, maxReplies: prefetch, track: (p) => this.track(p) });
  }

  get stats(): RpcServerStats {
    return { ...this.counts, rejected: this.refusals.refused, inProgress: this.slots.inUse + this.slots.queued };
  }

  /** Declares the topology and starts consuming. @throws TopologyError, RabbitOptionsError */
  async start(): Promise<void> {
    const { broker, target, rabbit } = this.opts;
    this.topology = serverTopology(target, rabbit, this.opts.ids);
    await broker.declare(this.topology);
    if (this.opts.deadLetterExchange) await broker.declare(deadLetterTopology(this.opts.deadLetterExchange));
    this.subscription = await broker.consume({
      queues: this.topology.consumeQueues,
      streams: this.topology.streamQueues,
      prefetch: this.opts.prefetch,
      onDelivery: (d) => this.onDelivery(d),
    });
    this.opts.logger.info(
      { exchange: target.exchange, queues: this.topology.consumeQueues, prefetch: this.opts.prefetch },
      'RPC server consuming',
    );
  }

  /**
   * Stops consuming, waits up to `graceMs` (0: no limit) for requests in progress, then aborts
   * the rest. Messages not yet acknowledged go back to the queue. Deletes the private fanout
   * queue (not the shared stream, nor a queue manager name the next start reuses).
   */
  async stop(graceMs: number): Promise<void> {
    await this.subscription?.cancel().catch(() => undefined);
    this.subscription = undefined;
    this.slots.close('the RPC server is stopping');
    if (!(await this.drain(graceMs))) {
      this.opts.logger.warn({ in_progress: this.tasks.size }, 'graceful shutdown timeout: interrupting RPC requests in progress');
      this.abort.abort(new Error('agent stopping'));
      await this.drain(1000);
    }
    for (const q of this.topology?.deleteOnStop ?? []) await this.opts.broker.deleteQueue(q).catch(() => undefined);
  }

  /** Waits for the tasks in progress, at most `ms` (0: no limit). True when all finished. */
  private async drain(ms: number): Promise<boolean> {
    const all = Promise.allSettled([...this.tasks]).then(() => true);
    if (ms <= 0) return all;
    const timer = new AbortController();
    const expired = this.clock.sleep(ms, timer.signal).then(
      () => false,
      () => false,
    );
    try {
      return await Promise.race([all, expired]);
    } finally {
      timer.abort();
    }
  }

  private track(p: Promise<void>): void {
    this.tasks.add(p);
    void p.finally(() => this.tasks.delete(p));
  }

  /** Synchronous on purpose: the order of the calls below is the order of service. */
  private onDelivery(d: Delivery): void {
    this.counts.received++;
    let req: RpcRequest;
    let resolved: ResolvedRequest;
    try {
      req = decodeRequest(d.body, this.opts.maxMessageBytes);
    } catch (e) {
      const replyTo = e instanceof BadMessageError || e instanceof MessageTooLargeError ? e.replyTo : undefined;
      this.refusals.refuse(d, e, replyTo, undefined);
      return;
    }
    try {
      if ((req.uniqueId?.length ?? 0) > MAX_UNIQUE_ID_CHARS) throw new BadMessageError(`"_unique_id" is longer than ${MAX_UNIQUE_ID_CHARS} characters`, req.reply);
      resolved = this.opts.dispatcher.resolve(req);
    } catch (e) {
      this.refusals.refuse(d, e, req.reply, req.method);
      return;
    }
    const id = req.uniqueId ?? `local-${newId()}`;
    if (this.recent.has(id)) {
      this.counts.duplicates++;
      this.opts.logger.info({ unique_id: id, method: req.method, redelivered: d.redelivered }, 'duplicate RPC message dropped');
      d.ack();
      return;
    }
    this.recent.add(id);
    const receivedAt = this.clock.now();
    const permit = this.slots.acquire();
    const admitted = this.admit(d, req, resolved, id, permit, receivedAt).then((ok) => {
      if (!ok) permit.release();
      return ok;
    });
    const task = async (): Promise<void> => {
      if (!(await admitted)) return;
      try {
        await this.execute(req, resolved, id);
      } finally {
        permit.release();
      }
    };
    this.track(resolved.orderingKey === undefined ? task() : this.serial.run(resolved.orderingKey, task));
  }

  /** Waits for a slot, journals, acks. Resolves true when the request should run. */
  private async admit(d: Delivery, req: RpcRequest, resolved: ResolvedRequest, id: string, permit: Permit, receivedAt: number): Promise<boolean> {
    try {
      await permit.granted;
    } catch {
      this.recent.delete(id);
      return false;
    }
    if (resolved.journaled) {
      try {
        const r = await this.opts.journal.accept({
          uniqueId: id,
          method: req.method,
          version: req.version,
          namespace: req.namespace,
          args: req.args,
          context: req.context,
          orderingKey: resolved.orderingKey,
          reply: req.reply,
          receivedAt,
        });
        if (r === 'duplicate') {
          this.counts.duplicates++;
          this.opts.logger.info({ unique_id: id, method: req.method }, 'request already in the journal; duplicate dropped');
          d.ack();
          return false;
        }
      } catch (e) {
        this.recent.delete(id);
        this.opts.logger.error({ unique_id: id, method: req.method, reason: e instanceof Error ? e.message : String(e) }, 'cannot journal request; it will be redelivered');
        await this.clock.sleep(this.opts.journalRetryDelayMs ?? 1000).catch(() => undefined);
        d.reject(true);
        return false;
      }
    }
    if (resolved.journaled) crashPoint('rpc.before-ack');
    if (!d.ack()) this.opts.logger.debug({ unique_id: id }, 'ack not sent (channel gone); the redelivery will be dropped as a duplicate');
    if (resolved.journaled) crashPoint('rpc.after-ack');
    return true;
  }

  private async execute(req: RpcRequest, resolved: ResolvedRequest, id: string): Promise<void> {
    const call: CallInfo = { method: req.method, version: req.version, context: req.context, args: req.args, uniqueId: id, isCall: req.reply !== undefined, signal: this.abort.signal };
    const stopHeartbeats = req.reply ? this.heartbeats(req.reply, req.callMonitorTimeout) : () => undefined;
    const started = this.clock.now();
    let outcome: Outcome;
    try {
      outcome = { ok: true, result: await resolved.invoke(call) };
    } catch (e) {
      outcome = { ok: false, failure: failureFromError(e) };
      const log = { method: req.method, unique_id: id, request_id: req.context.request_id, reason: e instanceof Error ? e.message : String(e) };
      if (isRemoteSerializable(e)) this.opts.logger.info(log, 'RPC method raised');
      else this.opts.logger.error({ ...log, stack: e instanceof Error ? e.stack : undefined }, 'RPC method failed unexpectedly');
    } finally {
      stopHeartbeats();
    }
    if (req.reply) await this.replier.reply(req.reply, outcome);
    this.counts.completed++;
    const status = this.abort.signal.aborted && !outcome.ok ? { status: 'interrupted' as const, reason: 'agent stopping' } : outcome.ok ? { status: 'succeeded' as const } : { status: 'failed' as const, error: outcome.failure.message };
    this.opts.onOutcome?.(req.method, status.status, (this.clock.now() - started) / 1000);
    if (resolved.journaled) {
      crashPoint('rpc.before-complete');
      await this.opts.journal.complete(id, status).catch((e: unknown) => {
        this.opts.logger.error({ unique_id: id, reason: e instanceof Error ? e.message : String(e) }, 'cannot record request completion');
      });
    }
  }

  /** oslo's watchdog: every int(T)/2 s while the call runs; none if that is under a second. */
  private heartbeats(to: ReplyAddress, timeout: number | null): () => void {
    if (timeout === null) return () => undefined;
    const intervalMs = (Math.trunc(timeout) / 2) * 1000;
    if (intervalMs > MAX_TIMER_MS) return () => undefined; // a caller that waits ~forever needs none
    if (intervalMs < 1000) {
      this.opts.logger.warn({ timeout }, 'call-monitor timeout too small for heartbeats; none sent');
      return () => undefined;
    }
    const stop = new AbortController();
    const loop = async (): Promise<void> => {
      while (!stop.signal.aborted) {
        await this.clock.sleep(intervalMs, stop.signal);
        if (!(await this.replier.heartbeat(to, stop.signal))) return;
      }
    };
    void loop().catch(() => undefined);
    return () => stop.abort();
  }
}
