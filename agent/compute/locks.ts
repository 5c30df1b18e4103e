/**
 * One lock per instance (nova's `synchronized(instance.uuid)`): a resize and a delete of the same
 * instance never interleave; operations on different instances run concurrently. Waiters are served
 * in arrival order. Entries are dropped when nobody holds or waits for them.
 */
export class InstanceLocks {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs `fn` holding the lock of `uuid`. */
  async with<T>(uuid: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(uuid) ?? Promise.resolve();
    let release = (): void => undefined;
    const mine = new Promise<void>((r) => (release = r));
    const tail = prev.then(() => mine);
    this.tails.set(uuid, tail);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(uuid) === tail) this.tails.delete(uuid);
    }
  }

  /** Instances with a holder or waiters. */
  busy(): string[] {
    return [...this.tails.keys()];
  }
}
