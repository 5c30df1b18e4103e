/**
 * The RPC client: casts and calls exactly as oslo.messaging sends them (`_drivers/amqpdriver.py`
 * `_send`, `ReplyWaiter`), used by the agent to reach nova services, by the `compute-agent rpc`
 * command, by tests and by the benchmark.
 *
 * - Targets: exchange `control_exchange`, routing key `<topic>.<server>` or `<topic>`; fanout to
 *   `<topic>_fanout`. The exchange is declared before the first publish, as oslo does.
 * - One reply queue per client (`reply_<uuid4hex>`, or the queue manager's name; x-expires; a
 *   quorum queue with transient quorum queues), created on the first call and reused; replies are
 *   matched by `_msg_id` and de-duplicated by `_unique_id`.
 * - A call sets AMQP `expiration` to its timeout and `_timeout` to the call-monitor timeout;
 *   each heartbeat (`ending: false`) restarts the call-monitor timer, the overall timeout stays.
 * - Every publish waits for the broker's confirm, across reconnects.
 *
 * Errors: `RemoteError` (the callee failed), `RpcTimeoutError`, and the Broker's errors.
 */
import type { Logger } from '../../../lib/logging/logger';
import type { Broker, Subscription } from '../amqp/broker';
import { PublishAbortedError } from '../amqp/broker';
import { RemoteError, RpcTimeoutError } from '../oslo/errors';
import { decodeFailure } from '../oslo/failure';
import { decodeReply, encodeRequest, newId, type RpcContext } from '../oslo/messages';
import { RecentIds } from './ordering';
import { osloProperties } from '../oslo/properties';
import { serviceContext } from '../oslo/context';
import { fanoutExchange, replyQueue, topicExchange, type RabbitOptions } from '../oslo/topology';
import { randomIds, type TransientIds } from '../oslo/queue-manager';

export interface RpcTarget {
  readonly topic: string;
  /** The server (host); without it any server of the topic takes the message. */
  readonly server?: string;
  readonly fanout?: boolean;
  readonly namespace?: string | null;
  /** The API version requested, e.g. "6.0". */
  readonly version?: string;
  /** Defaults to the client's control exchange. */
  readonly exchange?: string;
}

export interface CastOptions {
  readonly context?: RpcContext;
  /** Give up waiting for the broker's confirm. */
  readonly signal?: AbortSignal;
}

export interface CallOptions extends CastOptions {
  /** Overall timeout; defaults to rpc_response_timeout. */
  readonly timeoutMs?: number;
  /** oslo `call_monitor_timeout` in seconds: asks the server for heartbeats. */
  readonly callMonitorTimeout?: number | null;
}

export interface RpcClientOptions {
  readonly broker: Broker;
  readonly logger: Logger;
  readonly rabbit: RabbitOptions;
  /** Names the reply queue (oslo's uuid4 hex by default; the queue manager's names). */
  readonly ids?: TransientIds;
  readonly controlExchange: string;
  readonly defaultTimeoutMs: number;
}

const MAX_TIMER_MS = 2_147_483_647;

interface Waiter {
  resolve(v: unknown): void;
  reject(e: Error): void;
  restartMonitor(): void;
  legacyResult: unknown;
}

/** Ownership: one per process (one reply queue), on a Broker it does not own. Concurrency: any number of calls at once. */
export class RpcClient {
  private readonly waiters = new Map<string, Waiter>();
  private readonly seenReplies = new RecentIds(1024);
  private readonly exchanges = new Map<string, Promise<void>>();
  private replySetup: Promise<string> | undefined;
  private subscription: Subscription | undefined;
  private replyName: string | undefined;

  constructor(private readonly opts: RpcClientOptions) {}

  /** Publishes a cast and resolves once the broker confirmed it. */
  async cast(target: RpcTarget, method: string, args: Readonly<Record<string, unknown>>, options: CastOptions = {}): Promise<void> {
    const { exchange, routingKey } = await this.route(target);
    const body = encodeRequest({ method, args, version: target.version, namespace: target.namespace, uniqueId: newId(), context: options.context ?? serviceContext() });
    await this.opts.broker.publish({ exchange, routingKey, body, properties: osloProperties() }, { signal: options.signal });
  }

  /**
   * Calls and resolves with the result.
   * @throws RemoteError when the callee raised; RpcTimeoutError when no reply came in time.
   */
  async call(target: RpcTarget, method: string, args: Readonly<Record<string, unknown>>, options: CallOptions = {}): Promise<unknown> {
    if (target.fanout) throw new TypeError('a call cannot be sent to a fanout target');
    const timeoutMs = options.timeoutMs ?? this.opts.defaultTimeoutMs;
    const monitorS = options.callMonitorTimeout ?? null;
    if (!(timeoutMs >= 1 && timeoutMs <= MAX_TIMER_MS)) throw new RangeError(`call timeout must be 1..${MAX_TIMER_MS} ms`);
    if (monitorS !== null && !(monitorS > 0 && monitorS * 1000 <= MAX_TIMER_MS)) throw new RangeError('call-monitor timeout out of range');
    const msgId = newId();
    const abortPublish = new AbortController();
    const started = Date.now();
    // The timeout covers everything, including a first call that must wait for the broker.
    const answer = new Promise<unknown>((resolve, reject) => {
      let monitor: NodeJS.Timeout | undefined;
      const onAbort = (): void => this.waiters.get(msgId)?.reject(new PublishAbortedError('call abandoned by the caller'));
      const finish = (): void => {
        clearTimeout(overall);
        clearTimeout(monitor);
        this.waiters.delete(msgId);
        abortPublish.abort();
        options.signal?.removeEventListener('abort', onAbort);
      };
      const overall = setTimeout(() => {
        finish();
        reject(new RpcTimeoutError(method, msgId, Date.now() - started, false));
      }, timeoutMs);
      const restartMonitor = (): void => {
        if (monitorS === null) return;
        clearTimeout(monitor);
        monitor = setTimeout(() => {
          finish();
          reject(new RpcTimeoutError(method, msgId, Date.now() - started, true));
        }, monitorS * 1000);
      };
      restartMonitor();
      this.waiters.set(msgId, {
        legacyResult: null,
        restartMonitor,
        resolve: (v) => (finish(), resolve(v)),
        reject: (e) => (finish(), reject(e)),
      });
      options.signal?.addEventListener('abort', onAbort, { once: true });
    });
    void (async () => {
      const [replyQ, { exchange, routingKey }] = await Promise.all([this.ensureReplyQueue(), this.route(target)]);
      if (!this.waiters.has(msgId)) return; // timed out or abandoned meanwhile
      const body = encodeRequest({
        method,
        args,
        version: target.version,
        namespace: target.namespace,
        uniqueId: newId(),
        call: { msgId, replyQueue: replyQ, callMonitorTimeout: monitorS },
        context: options.context ?? serviceContext(),
      });
      await this.opts.broker.publish({ exchange, routingKey, body, properties: osloProperties(timeoutMs) }, { signal: abortPublish.signal });
    })().catch((e: unknown) => {
      if (!(e instanceof PublishAbortedError)) this.waiters.get(msgId)?.reject(e instanceof Error ? e : new Error(String(e)));
    });
    return answer;
  }

  /** Stops consuming replies and deletes the reply queue (kept for reuse with the queue manager); pending calls fail. */
  async close(): Promise<void> {
    for (const w of [...this.waiters.values()]) w.reject(new PublishAbortedError('client closed'));
    await this.subscription?.cancel().catch(() => undefined);
    if (this.replyName && !(this.opts.ids ?? randomIds).reused) await this.opts.broker.deleteQueue(this.replyName).catch(() => undefined);
    this.subscription = undefined;
    this.replySetup = undefined;
  }

  /** The reply queue's name, once the first call created it. */
  get replyQueueName(): string | undefined {
    return this.replyName;
  }

  private async route(target: RpcTarget): Promise<{ exchange: string; routingKey: string }> {
    if (target.fanout) {
      const x = fanoutExchange(target.topic, this.opts.rabbit);
      await this.ensureExchange(x.name, () => this.opts.broker.declare({ exchanges: [x], queues: [], bindings: [] }));
      return { exchange: x.name, routingKey: '' };
    }
    const name = target.exchange ?? this.opts.controlExchange;
    await this.ensureExchange(name, () => this.opts.broker.declare({ exchanges: [topicExchange(name, this.opts.rabbit)], queues: [], bindings: [] }));
    return { exchange: name, routingKey: target.server ? `${target.topic}.${target.server}` : target.topic };
  }

  private ensureExchange(name: string, declare: () => Promise<void>): Promise<void> {
    let p = this.exchanges.get(name);
    if (!p) {
      p = declare();
      this.exchanges.set(name, p);
      p.catch(() => this.exchanges.delete(name));
    }
    return p;
  }

  private ensureReplyQueue(): Promise<string> {
    if (!this.replySetup) {
      const spec = replyQueue(this.opts.rabbit, this.opts.ids);
      this.replySetup = (async () => {
        await this.opts.broker.declare({ exchanges: [], queues: [spec], bindings: [] });
        this.subscription = await this.opts.broker.consume({ queues: [spec.name], prefetch: 1000, noAck: true, onDelivery: (d) => this.onReply(d.body) });
        this.replyName = spec.name;
        return spec.name;
      })();
      this.replySetup.catch(() => (this.replySetup = undefined));
    }
    return this.replySetup;
  }

  private onReply(body: Buffer): void {
    let reply;
    try {
      reply = decodeReply(body);
    } catch (e) {
      this.opts.logger.warn({ reason: e instanceof Error ? e.message : String(e) }, 'undecodable reply ignored');
      return;
    }
    if (reply.uniqueId !== undefined) {
      if (this.seenReplies.has(reply.uniqueId)) return;
      this.seenReplies.add(reply.uniqueId);
    }
    const w = this.waiters.get(reply.msgId);
    if (!w) {
      this.opts.logger.debug({ msg_id: reply.msgId }, 'reply for a call nobody waits for');
      return;
    }
    if (reply.failure !== null) {
      const f = decodeFailure(reply.failure) ?? { className: 'RemoteError', module: '', message: reply.failure, tb: [], args: [], kwargs: {} };
      w.reject(new RemoteError(f));
    } else if (reply.ending) {
      w.resolve(reply.result !== null ? reply.result : w.legacyResult);
    } else if (reply.result !== null) {
      w.legacyResult = reply.result;
    } else {
      w.restartMonitor();
    }
  }
}
