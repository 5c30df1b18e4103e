/**
 * What the RPC server does with a message it cannot serve (not JSON, no envelope, unknown method or
 * version, bad arguments, too large): log it, answer a call with a failure, then ack it or, for a
 * cast when a dead-letter exchange is configured, republish it there and ack it once that is done.
 *
 * Memory contract, so a burst of hostile messages costs what the prefetch allows and no more:
 * - What the sender wrote is clipped in the log line (`clip`): a 100 kB method name is a 100 kB
 *   log line otherwise, and the log scrubber's patterns cost time in the line's length. It is
 *   clipped in the failure reply too (`clippedFailure`).
 * - A dead-lettered message is acked only once republished, so the broker's prefetch bounds those
 *   bodies. A failure reply is sent after the ack (the caller should not wait on our queue), so
 *   those are bounded here: at most `maxReplies` in flight; beyond that the failure is not sent
 *   (logged), and the caller times out as it would on a message lost in transit. A reply to a
 *   missing reply queue can be retried for a minute (`replier.ts`), which without the bound would
 *   keep every refused call's reply of a burst in memory.
 * - Nothing here keeps the body or the decoded request once the message is settled.
 *
 * Not here: deciding that a message is bad (`../oslo/messages.ts`, `dispatcher.ts`).
 */
import type { Logger } from '../../../lib/logging/logger';
import type { Broker, Delivery } from '../amqp/broker';
import type { ReplyAddress } from '../oslo/errors';
import { failureFromError, type RemoteFailure } from '../oslo/failure';
import { osloProperties } from '../oslo/properties';
import type { Replier } from './replier';

/** Characters of a sender-supplied string (method, reason) kept in a log line. */
export const LOGGED_CHARS = 256;
/** Characters of the reason kept in the dead-letter header and in a failure reply's texts. */
const ECHOED_CHARS = 1000;

/** `s` cut to `max` characters, saying how long it was. */
export function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}... (${s.length} characters)`;
}

/**
 * The failure a refused call gets, its texts clipped: the message quotes what the sender wrote
 * (a method name, a version) and oslo's failure repeats it in `tb` and `args`, so an unknown
 * 100 kB method name would go back as a 300 kB reply, held while the reply is retried.
 */
export function clippedFailure(err: unknown): RemoteFailure {
  const f = failureFromError(err);
  const text = (v: unknown): unknown => (typeof v === 'string' ? clip(v, ECHOED_CHARS) : v);
  return { ...f, message: clip(f.message, ECHOED_CHARS), tb: f.tb.map((l) => clip(l, ECHOED_CHARS)), args: f.args.map(text) };
}

export interface RefusalsOptions {
  readonly broker: Broker;
  readonly replier: Replier;
  readonly logger: Logger;
  /** Exchange for casts that cannot be processed; undefined drops them. */
  readonly deadLetterExchange: string | undefined;
  /** Failure replies in flight at most (the server passes its prefetch). */
  readonly maxReplies: number;
  /** Registers background work the server waits for when it stops. */
  readonly track: (work: Promise<void>) => void;
}

/** Ownership: one per RpcServer. `refuse` is synchronous and never throws. */
export class Refusals {
  private repliesInFlight = 0;
  private count = 0;

  constructor(private readonly opts: RefusalsOptions) {}

  /** Messages refused so far. */
  get refused(): number {
    return this.count;
  }

  /** Failure replies being sent now. */
  get pendingReplies(): number {
    return this.repliesInFlight;
  }

  refuse(d: Delivery, err: unknown, replyTo: ReplyAddress | undefined, method: string | undefined): void {
    this.count++;
    const reason = err instanceof Error ? err.message : String(err);
    const replying = replyTo !== undefined && this.repliesInFlight < this.opts.maxReplies;
    this.opts.logger.warn(
      {
        queue: d.queue,
        routing_key: d.routingKey,
        bytes: d.body.length,
        method: method === undefined ? undefined : clip(method, LOGGED_CHARS),
        msg_id: replyTo?.msgId,
        reason: clip(reason, LOGGED_CHARS),
      },
      !replyTo ? 'RPC message dropped' : replying ? 'RPC call refused; failure sent to the caller' : 'RPC call refused; too many failure replies in flight, none sent',
    );
    if (replyTo && replying) this.reply(replyTo, err);
    const dlx = this.opts.deadLetterExchange;
    if (!dlx || replyTo) {
      d.ack();
      return;
    }
    const headers = { 'x-compute-agent-reason': clip(reason, ECHOED_CHARS), 'x-original-exchange': d.exchange, 'x-original-routing-key': d.routingKey };
    this.opts.track(
      this.opts.broker
        .publish({ exchange: dlx, routingKey: d.routingKey || d.queue, body: d.body, properties: osloProperties(undefined, headers) })
        .then(
          () => void d.ack(),
          (e: unknown) => {
            this.opts.logger.error({ reason: e instanceof Error ? e.message : String(e) }, 'dead-lettering failed; message dropped');
            d.ack();
          },
        ),
    );
  }

  private reply(to: ReplyAddress, err: unknown): void {
    this.repliesInFlight++;
    const sent = this.opts.replier.reply(to, { ok: false, failure: clippedFailure(err) }).finally(() => {
      this.repliesInFlight--;
    });
    this.opts.track(sent);
  }
}
