/**
 * Small concurrency tools for the RPC server: a FIFO semaphore (the bound on requests in
 * progress), a keyed serializer (requests for one instance run one at a time, in the order they
 * were queued) and a bounded set of recently seen ids (in-memory duplicate suppression).
 *
 * All three are synchronous to enqueue, so the order of calls is the order of service: the server
 * calls them in the broker's delivery order. Not here: what the tasks do.
 */

/** A place in the semaphore's queue. */
export interface Permit {
  /** Resolves when the permit is granted; rejects if the semaphore is closed first. */
  readonly granted: Promise<void>;
  /** Gives the permit back (or leaves the queue). Idempotent. */
  release(): void;
}

/** The semaphore was closed while waiting. */
export class SemaphoreClosedError extends Error {
  constructor(reason: string) {
    super(`no longer accepting work: ${reason}`);
    this.name = 'SemaphoreClosedError';
  }
}

/** Counting semaphore granting permits strictly in request order. */
export class FifoSemaphore {
  private available: number;
  private readonly waiting: Array<{ grant: () => void; fail: (e: Error) => void }> = [];
  private closed: Error | undefined;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be an integer >= 1');
    this.available = capacity;
  }

  get inUse(): number {
    return this.capacity - this.available;
  }

  get queued(): number {
    return this.waiting.length;
  }

  acquire(): Permit {
    const state = { held: false, gone: false };
    let entry: (typeof this.waiting)[number] | undefined;
    const granted = new Promise<void>((resolve, reject) => {
      if (this.closed) return reject(this.closed);
      if (this.available > 0 && this.waiting.length === 0) {
        this.available--;
        state.held = true;
        return resolve();
      }
      entry = {
        grant: () => {
          state.held = true;
          resolve();
        },
        fail: reject,
      };
      this.waiting.push(entry);
    });
    granted.catch(() => undefined);
    return {
      granted,
      release: () => {
        if (state.gone) return;
        state.gone = true;
        if (state.held) this.handBack();
        else if (entry) {
          const i = this.waiting.indexOf(entry);
          if (i >= 0) this.waiting.splice(i, 1);
          entry.fail(new SemaphoreClosedError('permit released before it was granted'));
        }
      },
    };
  }

  /** Fails every waiter; later `acquire`s fail at once. Held permits stay valid. */
  close(reason: string): void {
    this.closed = new SemaphoreClosedError(reason);
    for (const w of this.waiting.splice(0)) w.fail(this.closed);
  }

  private handBack(): void {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.available++;
  }
}

/** Runs tasks one at a time per key, in the order `run` was called; different keys in parallel. */
export class KeyedSerializer {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(task, task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Keys with queued or running tasks. */
  get activeKeys(): number {
    return this.tails.size;
  }
}

/** The last `capacity` ids seen; the oldest is forgotten first. */
export class RecentIds {
  private readonly ids = new Set<string>();

  constructor(private readonly capacity: number) {}

  has(id: string): boolean {
    return this.ids.has(id);
  }

  add(id: string): void {
    this.ids.delete(id);
    this.ids.add(id);
    if (this.ids.size > this.capacity) {
      const oldest = this.ids.values().next();
      if (!oldest.done) this.ids.delete(oldest.value);
    }
  }

  delete(id: string): void {
    this.ids.delete(id);
  }
}
