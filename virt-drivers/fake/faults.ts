/**
 * Fault injection for the fake driver: a delay and/or a failure per lifecycle method, for the
 * first N calls or all of them. The compute manager's fault tests use it (a failed spawn, a live
 * migration refused, a slow spawn cut by a restart).
 *
 * It is: test tooling that lives beside the fake driver so any test (or the `run` command with
 * the fake driver) can reach it. It is not: used by real drivers.
 */
import type { Clock } from '../../lib/clock';
import { InjectedFaultError } from '../errors';

/** What to do to calls of one method. */
export interface FaultSpec {
  /** Wait this long (on the injected clock) before the call proceeds or fails. */
  readonly delayMs?: number;
  /** Fail the call: with this error, or an `InjectedFaultError` carrying this message. */
  readonly error?: Error | string;
  /** Affect only this many calls, then disarm (default: every call). */
  readonly times?: number;
}

export class FaultInjector {
  private readonly faults = new Map<string, { spec: FaultSpec; left: number }>();

  constructor(private readonly clock: Clock) {}

  /** Arms a fault for `method` (replacing any previous one). */
  inject(method: string, spec: FaultSpec): void {
    this.faults.set(method, { spec, left: spec.times ?? Number.POSITIVE_INFINITY });
  }

  /** Disarms `method`, or every method. */
  clear(method?: string): void {
    if (method === undefined) this.faults.clear();
    else this.faults.delete(method);
  }

  /** Applies the fault armed for `method`, if any. @throws the injected error */
  async before(method: string): Promise<void> {
    const f = this.faults.get(method);
    if (!f || f.left <= 0) return;
    f.left -= 1;
    if (f.left <= 0) this.faults.delete(method);
    if (f.spec.delayMs) await this.clock.sleep(f.spec.delayMs);
    const { error } = f.spec;
    if (error instanceof Error) throw error;
    if (typeof error === 'string') throw new InjectedFaultError(method, error);
  }
}
