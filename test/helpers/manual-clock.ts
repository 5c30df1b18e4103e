/**
 * A `Clock` whose time moves only when a test says so: `advance(ms)` wakes every sleep whose end
 * has passed; an aborted sleep rejects with the signal's reason, as the system clock's does.
 */
import type { Clock } from '../../lib/clock';

interface Sleeper {
  readonly until: number;
  readonly resolve: () => void;
}

export class ManualClock implements Clock {
  private t: number;
  private readonly sleepers = new Set<Sleeper>();

  constructor(start = 1_700_000_000_000) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  /** How many sleeps are pending. */
  get sleeping(): number {
    return this.sleepers.size;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const s: Sleeper = {
        until: this.t + ms,
        resolve: () => {
          this.sleepers.delete(s);
          resolve();
        },
      };
      this.sleepers.add(s);
      signal?.addEventListener(
        'abort',
        () => {
          this.sleepers.delete(s);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  /** Moves time on by `ms` and wakes the sleeps that are due. */
  advance(ms: number): void {
    this.t += ms;
    for (const s of [...this.sleepers]) if (s.until <= this.t) s.resolve();
  }
}
