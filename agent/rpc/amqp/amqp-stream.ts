/**
 * Where each stream queue of a consumer group is read from, as oslo's rabbit driver reads its
 * fanout stream: the consumer argument `x-stream-offset` is "last" (the last chunk the stream
 * holds) for the first consumer, then one past the `x-stream-offset` header of the last delivery
 * seen, so a consumer re-created after a reconnect neither skips nor re-reads what was delivered
 * before. After the broker cancelled the consumer the stream may be new, so it is "last" again.
 *
 * Not here: acknowledgement (the stream needs a prefetch and manual acks, as every consumer of
 * the RPC server has) or de-duplication of what "last" re-delivers (the server's `_unique_id`s).
 */
import type { MessageProperties } from './broker';

export type StreamOffset = 'last' | number;

/** Ownership: one per consumer group. */
export class StreamOffsets {
  private readonly next = new Map<string, StreamOffset>();

  constructor(streams: readonly string[] = []) {
    for (const q of streams) this.next.set(q, 'last');
  }

  /** Consumer arguments for `queue`: the offset to start from when it is a stream, else none. */
  consumeArguments(queue: string): Record<string, unknown> | undefined {
    const at = this.next.get(queue);
    if (at === undefined) return undefined;
    // A number goes as a 64-bit integer, the type RabbitMQ expects for an offset.
    return { 'x-stream-offset': at === 'last' ? 'last' : { '!': 'long', value: at } };
  }

  /** A delivery from `queue` was handed to the consumer. */
  delivered(queue: string, properties: MessageProperties): void {
    if (!this.next.has(queue)) return;
    const offset = properties.headers?.['x-stream-offset'];
    if (typeof offset === 'number' && Number.isSafeInteger(offset)) this.next.set(queue, offset + 1);
  }

  /** The broker cancelled the consumer: read from "last" again. */
  reset(): void {
    for (const q of this.next.keys()) this.next.set(q, 'last');
  }

  /** The next offset of `queue` (for tests and logs). */
  offsetOf(queue: string): StreamOffset | undefined {
    return this.next.get(queue);
  }
}
