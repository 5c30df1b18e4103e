// Allocation removals a delete owes Placement: recorded durably, tried at once, drained in the
// background with backoff while Placement refuses, resumed from the records by a new instance (a
// restart), and listed as pending until done.
import type { Clock } from '../../../../lib/clock';
import { silentLogger } from '../../../../lib/logging/logger';
import { ALLOCATION_REMOVAL, AllocationRemovals } from '../../../../agent/compute/removals';
import { PlacementUnavailableError } from '../../../../tracker/placement/errors';
import { MemoryStore } from '../../../helpers/compute-harness';

/** Placement's DELETE /allocations as the removals see it: refuses while `down`. */
class FakeClaims {
  down = true;
  readonly removed: string[] = [];
  attempts = 0;
  forceDeleteOnce(consumer: string): Promise<void> {
    this.attempts++;
    if (this.down) return Promise.reject(new PlacementUnavailableError('connect ECONNREFUSED', { method: 'DELETE', path: `/allocations/${consumer}` }));
    this.removed.push(consumer);
    return Promise.resolve();
  }
}

/** Sleeps pass at once, except that each one lets the test act (here: bring Placement back after `upAfter` sleeps). */
function clockThat(onSleep: (n: number) => void): Clock & { slept: number[] } {
  const slept: number[] = [];
  return {
    slept,
    now: () => 0,
    sleep: (ms, signal) => {
      if (signal?.aborted) return Promise.reject(signal.reason);
      slept.push(ms);
      onSleep(slept.length);
      return Promise.resolve();
    },
  };
}

test('a removal Placement refuses stays recorded and pending, and the drain finishes it once Placement answers', async () => {
  const store = new MemoryStore();
  const claims = new FakeClaims();
  const clock = clockThat((n) => {
    if (n === 4) claims.down = false;
  });
  const removals = new AllocationRemovals({ store, claims, log: silentLogger(), clock, backoff: { initialMs: 1000, maxMs: 10000, jitter: 0 } });
  await removals.add('vm-1', ['vm-1', 'mig-1']);
  expect(removals.pending().sort()).toEqual(['mig-1', 'vm-1']);
  await removals.tryNow(['vm-1', 'mig-1']);
  await removals.settle();
  expect(claims.removed.sort()).toEqual(['mig-1', 'vm-1']);
  expect(removals.pending()).toEqual([]);
  expect(store.list(ALLOCATION_REMOVAL)).toEqual([]);
  expect(clock.slept).toEqual([1000, 2000, 4000, 8000]);
});

test('a new instance over the same records (a restart) drains what the last one left', async () => {
  const store = new MemoryStore();
  const before = new AllocationRemovals({ store, claims: new FakeClaims(), log: silentLogger(), clock: clockThat(() => undefined) });
  await before.add('vm-2', ['vm-2']);
  await before.stop();
  const claims = new FakeClaims();
  claims.down = false;
  const after = new AllocationRemovals({ store, claims, log: silentLogger(), clock: clockThat(() => undefined) });
  expect(after.pending()).toEqual(['vm-2']);
  after.start();
  await after.settle();
  expect(claims.removed).toEqual(['vm-2']);
  expect(after.pending()).toEqual([]);
});

test('stop ends the drain and keeps what is pending recorded', async () => {
  const store = new MemoryStore();
  const claims = new FakeClaims();
  let removals: AllocationRemovals | undefined;
  const clock = clockThat((n) => {
    if (n === 3) void removals?.stop();
  });
  removals = new AllocationRemovals({ store, claims, log: silentLogger(), clock });
  await removals.add('vm-3', ['vm-3']);
  removals.start();
  await removals.settle();
  expect(removals.pending()).toEqual(['vm-3']);
  expect(claims.attempts).toBeLessThanOrEqual(3);
});
