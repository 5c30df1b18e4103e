/**
 * Publisher confirms that survive reconnects, for `AmqpBroker`. Every publish stays pending until
 * the broker acks it on a ConfirmChannel; when that channel dies (the connection dropped) the
 * pending messages are published again, in their original order, on the next channel. A `mandatory`
 * message the broker hands back (basic.return, which precedes its ack) resolves as `returned`.
 *
 * Only `agent/rpc/` uses it; amqplib's loose types stay inside this file and `amqp-broker.ts`.
 */
import type { ConfirmChannel, Message, Options } from 'amqplib';
import type { OutgoingMessage, PublishResult } from './broker';
import { BrokerClosedError, PublishAbortedError, PublishNackedError } from './broker';

interface Pending {
  readonly message: OutgoingMessage;
  readonly resolve: (r: PublishResult) => void;
  readonly reject: (e: Error) => void;
  readonly detachSignal: () => void;
  sentOn: ConfirmChannel | undefined;
  returned: boolean;
}

function toAmqpOptions(m: OutgoingMessage): Options.Publish {
  const p = m.properties;
  const o: Options.Publish = { mandatory: m.mandatory === true };
  if (p.contentType !== undefined) o.contentType = p.contentType;
  if (p.contentEncoding !== undefined) o.contentEncoding = p.contentEncoding;
  if (p.deliveryMode !== undefined) o.deliveryMode = p.deliveryMode;
  if (p.priority !== undefined) o.priority = p.priority;
  if (p.expiration !== undefined) o.expiration = p.expiration;
  if (p.headers !== undefined) o.headers = { ...p.headers };
  return o;
}

/** Ownership: one per AmqpBroker. Concurrency: single event loop; methods never overlap. */
export class ConfirmPublisher {
  private readonly pending = new Set<Pending>();
  private channel: ConfirmChannel | undefined;
  private draining = false;
  private closed: Error | undefined;

  /** Messages not yet confirmed. */
  get size(): number {
    return this.pending.size;
  }

  publish(message: OutgoingMessage, signal?: AbortSignal): Promise<PublishResult> {
    if (this.closed) return Promise.reject(this.closed);
    if (signal?.aborted) return Promise.reject(new PublishAbortedError());
    return new Promise<PublishResult>((resolve, reject) => {
      const onAbort = (): void => {
        if (!this.pending.delete(entry)) return;
        reject(new PublishAbortedError());
      };
      const entry: Pending = {
        message,
        resolve,
        reject,
        detachSignal: () => signal?.removeEventListener('abort', onAbort),
        sentOn: undefined,
        returned: false,
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.add(entry);
      this.flush();
    });
  }

  /** Uses `channel` from now on and re-sends everything unconfirmed. */
  attach(channel: ConfirmChannel): void {
    this.channel = channel;
    this.draining = false;
    channel.on('return', (msg: Message) => this.onReturn(channel, msg));
    channel.on('drain', () => {
      if (this.channel !== channel) return;
      this.draining = false;
      this.flush();
    });
    for (const p of this.pending) p.sentOn = undefined;
    this.flush();
  }

  /** The channel is gone: pending messages wait for the next one. */
  detach(): void {
    this.channel = undefined;
    for (const p of this.pending) p.sentOn = undefined;
  }

  /** Fails everything pending and refuses new publishes. */
  close(reason: Error = new BrokerClosedError()): void {
    this.closed = reason;
    this.channel = undefined;
    for (const p of [...this.pending]) this.settle(p, () => p.reject(reason));
  }

  private flush(): void {
    const ch = this.channel;
    if (!ch) return;
    for (const p of this.pending) {
      if (this.draining || this.channel !== ch) return;
      if (p.sentOn === ch) continue;
      this.send(ch, p);
    }
  }

  private send(ch: ConfirmChannel, p: Pending): void {
    p.sentOn = ch;
    p.returned = false;
    const m = p.message;
    let accepted: boolean;
    try {
      accepted = ch.publish(m.exchange, m.routingKey, m.body, toAmqpOptions(m), (err: unknown) => this.onConfirm(ch, p, err));
    } catch {
      p.sentOn = undefined; // the channel closed under us; the next attach re-sends it
      return;
    }
    if (!accepted) this.draining = true;
  }

  private onConfirm(ch: ConfirmChannel, p: Pending, err: unknown): void {
    if (p.sentOn !== ch || !this.pending.has(p)) return;
    if (err === null || err === undefined) {
      const result: PublishResult = p.returned ? 'returned' : 'confirmed';
      this.settle(p, () => p.resolve(result));
      return;
    }
    if (err instanceof Error && err.message === 'message nacked') {
      this.settle(p, () => p.reject(new PublishNackedError(undefined, { cause: err })));
      return;
    }
    p.sentOn = undefined; // channel closed before the confirm: re-sent on the next channel
  }

  private onReturn(ch: ConfirmChannel, msg: Message): void {
    const { exchange, routingKey } = msg.fields as { exchange: string; routingKey: string };
    for (const p of this.pending) {
      if (p.sentOn === ch && p.message.mandatory && !p.returned && p.message.exchange === exchange && p.message.routingKey === routingKey && p.message.body.equals(msg.content)) {
        p.returned = true;
        return;
      }
    }
  }

  private settle(p: Pending, fn: () => void): void {
    this.pending.delete(p);
    p.detachSignal();
    fn();
  }
}
