/**
 * Capped exponential backoff with full jitter, used wherever the agent retries something other than
 * the broker connection (amqplib's recovery does that one).
 */

export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor?: number;
  /** Fraction of the delay that is randomized (0 = none, 1 = full jitter). */
  readonly jitter?: number;
}

/** The delay before retry number `attempt` (1-based). `random` is injectable for tests. */
export function backoffDelay(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const base = Math.min(policy.maxMs, policy.initialMs * Math.pow(policy.factor ?? 2, Math.max(0, attempt - 1)));
  const jitter = policy.jitter ?? 0.5;
  return Math.round(base * (1 - jitter) + base * jitter * random());
}
