/**
 * Sends replies and call-monitor heartbeats the way oslo's `AMQPIncomingMessage` does: to the
 * default exchange with the reply queue as routing key, `mandatory`, one final message with
 * `ending: true`. When the broker returns a reply (the caller's queue does not exist, e.g. during
 * its reconnect) it is retried every 250 ms for `kombu_missing_consumer_retry_timeout`; after
 * that the queue is remembered as gone for a minute so later replies to it are dropped at once
 * (oslo's ObsoleteReplyQueuesCache). Replies are published with confirms, and a broker outage is
 * ridden out by the Broker port: the window counts from the first return only (oslo's reply
 * retries a connection error without limit and gives up only on a missing queue), so a call whose
 * answer falls in an outage gets it once the broker is back.
 *
 * Not here: running the handler or deciding what to answer (`server.ts`).
 */
import type { Logger } from '../../../lib/logging/logger';
import type { Clock } from '../../../lib/clock';
import type { Broker } from '../amqp/broker';
import type { ReplyAddress } from '../oslo/errors';
import { encodeFailure, type RemoteFailure } from '../oslo/failure';
import { encodeReply } from '../oslo/messages';
import { osloProperties } from '../oslo/properties';

/** What the handler produced. */
export type Outcome = { readonly ok: true; readonly result: unknown } | { readonly ok: false; readonly failure: RemoteFailure };

export interface ReplierOptions {
  readonly broker: Broker;
  readonly logger: Logger;
  readonly clock: Clock;
  /** How long a returned reply is retried (ms). */
  readonly retryTimeoutMs: number;
  readonly retryIntervalMs?: number;
}

const OBSOLETE_TTL_MS = 60_000;
const OBSOLETE_MAX = 200;

/** A reply result that JSON cannot carry (a cycle, a BigInt). */
function unserializable(e: unknown): RemoteFailure {
  const message = `the result could not be serialized to JSON: ${e instanceof Error ? e.message : String(e)}`;
  return { className: 'ValueError', module: 'builtins', message, tb: [`ValueError: ${message}\n`], args: [message], kwargs: {} };
}

export class Replier {
  private readonly obsolete = new Map<string, number>();
  private readonly retryIntervalMs: number;

  constructor(private readonly opts: ReplierOptions) {
    this.retryIntervalMs = opts.retryIntervalMs ?? 250;
  }

  /** Sends the final reply. Never throws: failures are logged. Resolves when done or abandoned. */
  async reply(to: ReplyAddress, outcome: Outcome, signal?: AbortSignal): Promise<void> {
    if (this.isObsolete(to.replyQueue)) {
      this.opts.logger.warn({ reply_q: to.replyQueue, msg_id: to.msgId }, 'reply queue is gone; dropping reply');
      return;
    }
    let body: Buffer;
    try {
      body = outcome.ok
        ? encodeReply({ msgId: to.msgId, result: outcome.result === undefined ? null : outcome.result, failure: null, ending: true })
        : encodeReply({ msgId: to.msgId, result: null, failure: encodeFailure(outcome.failure), ending: true });
    } catch (e) {
      body = encodeReply({ msgId: to.msgId, result: null, failure: encodeFailure(unserializable(e)), ending: true });
    }
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const onOuterAbort = (): void => abort.abort();
    signal?.addEventListener('abort', onOuterAbort, { once: true });
    let returned = 0;
    try {
      for (;;) {
        const result = await this.opts.broker.publish(
          { exchange: '', routingKey: to.replyQueue, body, properties: osloProperties(), mandatory: true },
          { signal: abort.signal },
        );
        if (result === 'confirmed') return;
        if (returned++ === 0) {
          this.opts.logger.debug({ reply_q: to.replyQueue, msg_id: to.msgId }, 'reply queue missing; retrying');
          timer = setTimeout(() => abort.abort(), this.opts.retryTimeoutMs);
        }
        await this.opts.clock.sleep(this.retryIntervalMs, abort.signal);
      }
    } catch (e) {
      if (returned > 0 && abort.signal.aborted && !signal?.aborted) {
        this.markObsolete(to.replyQueue);
        this.opts.logger.error({ reply_q: to.replyQueue, msg_id: to.msgId, waited_s: this.opts.retryTimeoutMs / 1000 }, 'reply abandoned: the reply queue does not exist');
      } else {
        this.opts.logger.error({ reply_q: to.replyQueue, msg_id: to.msgId, reason: e instanceof Error ? e.message : String(e) }, 'reply abandoned');
      }
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onOuterAbort);
    }
  }

  /** One call-monitor heartbeat. Resolves false when it could not be delivered (stop sending). */
  async heartbeat(to: ReplyAddress, signal?: AbortSignal): Promise<boolean> {
    if (this.isObsolete(to.replyQueue)) return false;
    try {
      const body = encodeReply({ msgId: to.msgId, result: null, failure: null, ending: false });
      const r = await this.opts.broker.publish({ exchange: '', routingKey: to.replyQueue, body, properties: osloProperties(), mandatory: true }, { signal });
      return r === 'confirmed';
    } catch {
      return false;
    }
  }

  private isObsolete(queue: string): boolean {
    const at = this.obsolete.get(queue);
    if (at === undefined) return false;
    if (this.opts.clock.now() - at > OBSOLETE_TTL_MS) {
      this.obsolete.delete(queue);
      return false;
    }
    return true;
  }

  private markObsolete(queue: string): void {
    this.obsolete.set(queue, this.opts.clock.now());
    while (this.obsolete.size > OBSOLETE_MAX) {
      const first = this.obsolete.keys().next();
      if (first.done) break;
      this.obsolete.delete(first.value);
    }
  }
}
