/**
 * The `RequestJournal` port: where the agent durably records what the control plane asked of it
 * *before* acknowledging the AMQP message, so a crash after the ack cannot lose the request (oslo
 * acks on receipt and loses it). The RPC server records and completes requests through it; at
 * start the compute manager's recovery finishes or rolls back what was accepted but never
 * completed. `DurableJournal` (`durable.ts`) is the fsync'd implementation;
 * `InMemoryRequestJournal` (`memory.ts`) has the same contract minus crash durability of the
 * requests themselves.
 *
 * Not here: AMQP, or what a request does.
 */

/** A request as the RPC layer hands it over (already decoded and validated). */
export interface JournalRequest {
  /** The sender's `_unique_id`: the identity used for de-duplication. */
  readonly uniqueId: string;
  readonly method: string;
  readonly version: string;
  readonly namespace: string | null;
  readonly args: Readonly<Record<string, unknown>>;
  readonly context: Readonly<Record<string, unknown>>;
  /** The instance uuid that orders it, if any. */
  readonly orderingKey: string | undefined;
  /** For calls: where the answer goes (`_msg_id`, `_reply_q`). */
  readonly reply: { readonly msgId: string; readonly replyQueue: string } | undefined;
  /** Milliseconds since the epoch when the agent received it. */
  readonly receivedAt: number;
}

/** `new`: the journal owns the request now. `duplicate`: it has been accepted before. */
export type AcceptResult = 'new' | 'duplicate';

/** How a request ended. */
export type RequestOutcome =
  | { readonly status: 'succeeded' }
  | { readonly status: 'failed'; readonly error: string }
  /** The agent stopped before the handler finished (graceful shutdown ran out). */
  | { readonly status: 'interrupted'; readonly reason: string };

/**
 * Durable record of accepted requests, keyed by `_unique_id`.
 *
 * Ownership: one per agent process, shared by every RPC server in it. Concurrency: `accept` and
 * `complete` may be called concurrently for different ids; for one id, `complete` follows the
 * `accept` that returned `new`. The RPC server calls `accept` in the broker's delivery order (a
 * journal that writes its records in call order keeps the per-instance order of requests).
 */
export interface RequestJournal {
  /**
   * Records the request durably, or reports that it was accepted before (a redelivery after a
   * lost ack, or a sender's retry). Only after `new` resolves may the message be acknowledged.
   * @throws JournalError when the record cannot be made durable; the caller must not acknowledge
   *   (the broker redelivers the message later).
   */
  accept(request: JournalRequest): Promise<AcceptResult>;
  /**
   * Marks an accepted request finished. Idempotent; unknown ids are ignored.
   * @throws JournalError when the record cannot be written (the request may be recovered again).
   */
  complete(uniqueId: string, outcome: RequestOutcome): Promise<void>;
}

/** The journal could not record or update a request. */
export class JournalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'JournalError';
  }
}
