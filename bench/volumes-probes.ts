/**
 * The volumes bench's instrumentation of the agent it runs (`volumes-host.ts`): a tap on an
 * instance's QMP connection that times every command the driver sends and notes when the guest
 * released a device (`DEVICE_DELETED`), the journal as the manager's record store with its writes
 * timed, a notifier that serializes each notification as a publish would and drops it, and V8's
 * heap after a full collection.
 *
 * It measures; it changes nothing the agent does. Not here: Cinder's share (`volumes-cinder.ts`).
 */
import { Session } from 'node:inspector';
import type { Notification, Notifier, RecordStore, RequestContext } from '../agent/compute/ports';
import type { DurableJournal } from '../agent/journal/durable';
import type { QmpClient } from '../virt-drivers/qemu/qmp';

/** Times every QMP command sent on one connection and notes when the guest released a device. */
export class QmpTap {
  private spent = 0;
  private commands: Array<{ command: string; ms: number }> = [];
  private deviceDelAnswered: number | undefined;
  private deviceDeleted: number | undefined;

  constructor(qmp: QmpClient) {
    const execute = qmp.execute.bind(qmp);
    // Instrumentation: the driver sends through this same cached client (QemuVm.qmp()).
    qmp.execute = async (command, args, opts) => {
      const t0 = performance.now();
      try {
        return await execute(command, args, opts);
      } finally {
        const t1 = performance.now();
        this.spent += t1 - t0;
        this.commands.push({ command, ms: t1 - t0 });
        if (command === 'device_del') this.deviceDelAnswered = t1;
      }
    };
    qmp.onEvent((e) => {
      if (e.event === 'DEVICE_DELETED' && typeof e.data.device === 'string') this.deviceDeleted = performance.now();
    });
  }

  take(): { ms: number; commands: Array<{ command: string; ms: number }>; guestMs: number } {
    const a = this.deviceDelAnswered;
    const d = this.deviceDeleted;
    const out = { ms: this.spent, commands: this.commands, guestMs: a !== undefined && d !== undefined ? Math.max(0, d - a) : 0 };
    this.spent = 0;
    this.commands = [];
    this.deviceDelAnswered = undefined;
    this.deviceDeleted = undefined;
    return out;
  }
}

/** The journal as the manager's record store, its writes timed. */
export class TimedStore implements RecordStore {
  spent = 0;

  constructor(private readonly journal: DurableJournal) {}

  private async timed(write: () => Promise<void>): Promise<void> {
    const t0 = performance.now();
    try {
      await write();
    } finally {
      this.spent += performance.now() - t0;
    }
  }

  put(kind: string, key: string, value: unknown): Promise<void> {
    return this.timed(() => this.journal.put(kind, key, value));
  }

  del(kind: string, key: string): Promise<void> {
    return this.timed(() => this.journal.del(kind, key));
  }

  get<T>(kind: string, key: string): T | undefined {
    return this.journal.get<T>(kind, key);
  }

  list<T>(kind: string): Array<[string, T]> {
    return this.journal.list<T>(kind);
  }
}

/** Serializes each notification as a publish would and drops it: the broker's part is not the agent's. */
export class DroppingNotifier implements Notifier {
  sent = 0;
  notify(n: Notification, ctx: RequestContext): Promise<void> {
    JSON.stringify({ ...n, ctx });
    this.sent++;
    return Promise.resolve();
  }
}

/** V8's heap in use after a full collection, in bytes (through this process's own inspector session). */
export async function heapUsedAfterGc(): Promise<number> {
  const session = new Session();
  session.connect();
  try {
    for (let k = 0; k < 2; k++) await new Promise<void>((resolve, reject) => session.post('HeapProfiler.collectGarbage', (err) => (err ? reject(err) : resolve())));
  } finally {
    session.disconnect();
  }
  return process.memoryUsage().heapUsed;
}
