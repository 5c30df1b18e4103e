// The outage policy of claim-service operations: retried while Placement is unavailable, up to the
// deadline and no longer; a definite answer (4xx, conflict) is thrown at once.
import type { Clock } from '../../../../lib/clock';
import { PlacementOutageError } from '../../../../tracker/claims/errors';
import { OutageRetry } from '../../../../tracker/claims/retry';
import { PlacementBadRequestError, PlacementConflictError, PlacementUnavailableError } from '../../../../tracker/placement/errors';

/** A clock whose sleeps pass at once and move time on by what was asked. */
function fakeClock(): Clock & { slept: number[] } {
  let t = 0;
  const slept: number[] = [];
  return {
    slept,
    now: () => t,
    sleep: (ms) => {
      slept.push(ms);
      t += ms;
      return Promise.resolve();
    },
  };
}

const down = (): PlacementUnavailableError => new PlacementUnavailableError('GET http://p/allocations/x: connect ECONNREFUSED', { method: 'GET', path: '/allocations/x' });
const POLICY = { initialMs: 500, maxMs: 10000, jitter: 0 };

test('an operation is run again while Placement is unavailable, with growing delays, and its result returned', async () => {
  const clock = fakeClock();
  const retry = new OutageRetry({ deadlineMs: 60000, clock, backoff: POLICY });
  const attempts: number[] = [];
  const out = await retry.run('claim', (attempt) => {
    attempts.push(attempt);
    return attempt < 5 ? Promise.reject(down()) : Promise.resolve('done');
  });
  expect(out).toBe('done');
  expect(attempts).toEqual([1, 2, 3, 4, 5]);
  expect(clock.slept).toEqual([500, 1000, 2000, 4000]);
});

test('past the deadline the operation fails with PlacementOutageError naming the operation, the time and the cause', async () => {
  const clock = fakeClock();
  const retry = new OutageRetry({ deadlineMs: 30000, clock, backoff: POLICY });
  let attempts = 0;
  const err = await retry
    .run('claim for i-1', () => {
      attempts++;
      return Promise.reject(down());
    })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(PlacementOutageError);
  const e = err as PlacementOutageError;
  expect(e.message).toMatch(/^Placement unavailable for \d+ s during claim for i-1 \(retry_deadline 30 s\): .*ECONNREFUSED/);
  expect(e.cause).toBeInstanceOf(PlacementUnavailableError);
  // 0.5 + 1 + 2 + 4 + 8 = 15.5 s slept; the next 10 s sleep would still fit, the one after not.
  expect(clock.slept).toEqual([500, 1000, 2000, 4000, 8000, 10000]);
  expect(e.elapsedMs).toBeLessThanOrEqual(30000);
  expect(attempts).toBe(7);
});

test('a definite refusal (4xx, a conflict) fails at once, without a retry', async () => {
  const clock = fakeClock();
  const retry = new OutageRetry({ deadlineMs: 60000, clock, backoff: POLICY });
  for (const refusal of [
    new PlacementBadRequestError('400', { method: 'PUT', path: '/allocations/x', status: 400 }),
    new PlacementConflictError('409', { method: 'PUT', path: '/allocations/x', status: 409 }),
    new Error('local refusal'),
  ]) {
    let attempts = 0;
    await expect(
      retry.run('claim', () => {
        attempts++;
        return Promise.reject(refusal);
      }),
    ).rejects.toBe(refusal);
    expect(attempts).toBe(1);
  }
  expect(clock.slept).toEqual([]);
});

test('deadline 0 gives up on the first outage', async () => {
  const clock = fakeClock();
  const retry = new OutageRetry({ deadlineMs: 0, clock, backoff: POLICY });
  await expect(retry.run('confirm', () => Promise.reject(down()))).rejects.toBeInstanceOf(PlacementOutageError);
  expect(clock.slept).toEqual([]);
});

test('each retry is reported before its sleep', async () => {
  const clock = fakeClock();
  const seen: Array<[string, number, number]> = [];
  const retry = new OutageRetry({ deadlineMs: 60000, clock, backoff: POLICY, onRetry: (what, attempt, delay) => seen.push([what, attempt, delay]) });
  await retry.run('revert', (attempt) => (attempt < 3 ? Promise.reject(down()) : Promise.resolve()));
  expect(seen).toEqual([
    ['revert', 1, 500],
    ['revert', 2, 1000],
  ]);
});
