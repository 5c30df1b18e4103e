/**
 * Waiting for events about an instance that another service sends through nova-api
 * (`external_instance_event`): a build registers what it waits for (`network-vif-plugged-<port>`)
 * before it plugs, and each event that arrives wakes the waiter of its key. After nova's
 * `compute/manager.py` `InstanceEvents`: the key is `<name>-<tag>`, and an event nobody waits for
 * is reported back as unexpected (the caller logs it and moves on).
 *
 * It is: an in-memory registry, owned by the compute manager. It is not: durable. A waiter lives
 * for one flow in one process; after a restart no flow waits, and a restarted build re-plugs
 * without waiting for events (as nova does after a reboot).
 */
import type { Clock } from '../../lib/clock';

/** How a wait ended: every event came `completed`, some came `failed`, or time ran out first. */
export type WaitOutcome =
  | { readonly kind: 'completed' }
  | { readonly kind: 'failed'; readonly failed: readonly string[] }
  | { readonly kind: 'timeout'; readonly missing: readonly string[] };

/** The events one flow waits for. */
export interface EventWaiter {
  /** Resolves once every key has an event (or one failed), or after `timeoutMs`; never rejects. */
  wait(timeoutMs: number): Promise<WaitOutcome>;
  /** Stops waiting: the keys are dropped and a pending `wait` resolves as timed out. */
  cancel(): void;
}

interface Pending {
  readonly keys: Set<string>;
  readonly failed: string[];
  wake: () => void;
}

/** The key nova gives an event: `<name>-<tag>`, or the name alone without a tag. */
export function eventKey(name: string, tag: string | null): string {
  return tag ? `${name}-${tag}` : name;
}

export class InstanceEvents {
  private readonly byInstance = new Map<string, Set<Pending>>();

  constructor(private readonly clock: Clock) {}

  /** Registers a waiter for `keys` of `instance`; call before the action that makes them happen. */
  prepare(instance: string, keys: readonly string[]): EventWaiter {
    const p: Pending = { keys: new Set(keys), failed: [], wake: () => undefined };
    const woken = new Promise<void>((resolve) => {
      p.wake = resolve;
    });
    if (p.keys.size === 0) p.wake();
    else this.pendingOf(instance).add(p);
    const drop = (): void => {
      const set = this.byInstance.get(instance);
      set?.delete(p);
      if (set?.size === 0) this.byInstance.delete(instance);
    };
    const stop = new AbortController();
    return {
      wait: async (timeoutMs) => {
        const timedOut = this.clock.sleep(timeoutMs, stop.signal).then(
          () => true,
          () => false,
        );
        const late = await Promise.race([woken.then(() => false), timedOut]);
        stop.abort();
        drop();
        if (p.failed.length) return { kind: 'failed', failed: [...p.failed] };
        if (late || p.keys.size > 0) return { kind: 'timeout', missing: [...p.keys] };
        return { kind: 'completed' };
      },
      cancel: () => {
        drop();
        p.wake();
      },
    };
  }

  /**
   * An event arrived: the waiter holding its key takes it. Returns whether one did (false: nobody
   * waited, nova's "unexpected event").
   */
  deliver(instance: string, name: string, tag: string | null, status: string): boolean {
    const key = eventKey(name, tag);
    for (const p of this.byInstance.get(instance) ?? []) {
      if (!p.keys.delete(key)) continue;
      if (status === 'failed') p.failed.push(key);
      if (p.keys.size === 0 || status === 'failed') p.wake();
      return true;
    }
    return false;
  }

  /** How many keys are awaited for `instance` (tests, diagnostics). */
  awaited(instance: string): number {
    let n = 0;
    for (const p of this.byInstance.get(instance) ?? []) n += p.keys.size;
    return n;
  }

  private pendingOf(instance: string): Set<Pending> {
    let set = this.byInstance.get(instance);
    if (!set) this.byInstance.set(instance, (set = new Set()));
    return set;
  }
}
