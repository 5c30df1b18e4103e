/**
 * The retry policy of every claim-service operation: while Placement cannot be reached or answers
 * 5xx (`PlacementUnavailableError`), the operation is run again with capped backoff until it
 * succeeds or `[placement] retry_deadline` seconds have passed since it started; then it fails with
 * `PlacementOutageError`, which says how long Placement was out and why. Any other failure (a 4xx, a
 * conflict, a local refusal) is a definite answer and is thrown at once.
 *
 * Layering with `../placement/http.ts`: the transport retries a request a few times within one
 * attempt (refused connections always, other failures only when a replay is safe). This loop is
 * the outer one: it re-runs the whole operation (its reads and its write) so a write whose answer
 * was lost is judged again from a fresh read (`attempt > 1` tells the operation it may have landed).
 *
 * It is not: the provider-generation retry of allocation writes (`allocations.ts`), which is a
 * definite answer with a known remedy, not an outage.
 */
import { backoffDelay, type BackoffPolicy } from '../../lib/backoff';
import { systemClock, type Clock } from '../../lib/clock';
import { PlacementUnavailableError } from '../placement/errors';
import { PlacementOutageError } from './errors';

export interface OutageRetryOptions {
  /** How long one operation keeps retrying, in milliseconds; 0 gives up on the first outage. */
  readonly deadlineMs: number;
  readonly backoff?: BackoffPolicy;
  readonly clock?: Clock;
  /** Told of each failed attempt that will be retried (for a log line). */
  readonly onRetry?: (what: string, attempt: number, delayMs: number, cause: PlacementUnavailableError) => void;
}

/** Between attempts: 0.5 s doubling to 10 s, so an operation resumes within ~10 s of Placement's return. */
export const OUTAGE_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 10000, jitter: 0.3 };

/** Runs operations under the outage policy. Stateless apart from its options; safe for concurrent use. */
export class OutageRetry {
  private readonly clock: Clock;
  private readonly backoff: BackoffPolicy;

  constructor(private readonly opts: OutageRetryOptions) {
    this.clock = opts.clock ?? systemClock;
    this.backoff = opts.backoff ?? OUTAGE_BACKOFF;
  }

  /** The deadline in milliseconds. */
  get deadlineMs(): number {
    return this.opts.deadlineMs;
  }

  /**
   * Runs `op(attempt)` (attempt 1, 2, ...) until it resolves or fails definitely.
   * @throws PlacementOutageError when Placement stayed unavailable past the deadline; whatever
   *   else `op` throws, unchanged
   */
  async run<T>(what: string, op: (attempt: number) => Promise<T>): Promise<T> {
    const started = this.clock.now();
    for (let attempt = 1; ; attempt++) {
      try {
        return await op(attempt);
      } catch (e) {
        if (!(e instanceof PlacementUnavailableError)) throw e;
        const delay = backoffDelay(attempt, this.backoff);
        const elapsed = this.clock.now() - started;
        if (elapsed + delay > this.opts.deadlineMs) throw new PlacementOutageError(what, elapsed, this.opts.deadlineMs, e);
        this.opts.onRetry?.(what, attempt, delay, e);
        await this.clock.sleep(delay);
      }
    }
  }
}
