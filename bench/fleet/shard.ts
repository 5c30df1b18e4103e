/**
 * A shard of the fleet: a `HostGroup` behind a small request/answer protocol, either in this
 * process (`LocalShard`, for tests and tiny fleets) or in a child process (`ChildShard`, which forks
 * this file). Hundreds of trackers in one event loop would measure the loop, not Placement; on two
 * cores a few child processes keep every host's timers on time.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { HostGroup, type AuditStats, type FirstSyncReport, type HostGroupOptions } from './hosts';
import type { CountEntries } from './report';

export interface ShardCounts {
  readonly counts: CountEntries;
  readonly audits: AuditStats;
}

/** What the orchestrator asks of a shard. */
export interface FleetShard {
  init(opts: HostGroupOptions): Promise<number>;
  firstSync(): Promise<FirstSyncReport>;
  providersPerHost(): Promise<number>;
  startAudits(intervalSeconds: number): Promise<void>;
  /** Changes every `every`-th host's inventory (see HostGroup.drift); how many changed. */
  drift(every: number): Promise<number>;
  stopAudits(): Promise<void>;
  counts(reset: boolean): Promise<ShardCounts>;
  close(): Promise<void>;
}

export class LocalShard implements FleetShard {
  private group: HostGroup | undefined;

  private get g(): HostGroup {
    if (!this.group) throw new Error('shard not initialised');
    return this.group;
  }

  async init(opts: HostGroupOptions): Promise<number> {
    this.group = await HostGroup.create(opts);
    return this.group.size;
  }
  firstSync(): Promise<FirstSyncReport> {
    return this.g.firstSync();
  }
  providersPerHost(): Promise<number> {
    return Promise.resolve(this.g.providersPerHost());
  }
  startAudits(intervalSeconds: number): Promise<void> {
    this.g.startAudits(intervalSeconds);
    return Promise.resolve();
  }
  drift(every: number): Promise<number> {
    return Promise.resolve(this.g.drift(every));
  }
  stopAudits(): Promise<void> {
    return this.g.stopAudits();
  }
  counts(reset: boolean): Promise<ShardCounts> {
    return Promise.resolve({ counts: this.g.counts(reset), audits: this.g.auditStats(reset) });
  }
  async close(): Promise<void> {
    await this.group?.close();
  }
}

type Op = 'init' | 'firstSync' | 'providersPerHost' | 'startAudits' | 'drift' | 'stopAudits' | 'counts' | 'close';

interface Request {
  readonly id: number;
  readonly op: Op;
  readonly arg?: unknown;
}

interface Answer {
  readonly id: number;
  readonly value?: unknown;
  readonly error?: string;
}

/** A shard in a child process running this file. */
export class ChildShard implements FleetShard {
  private readonly child: ChildProcess;
  private next = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  constructor() {
    // The compiled sibling (dist/bench/fleet/shard.js); its own stdout is not ours to print.
    this.child = fork(__filename, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    this.child.on('message', (m: Answer) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error !== undefined) p.reject(new Error(m.error));
      else p.resolve(m.value);
    });
    this.child.on('exit', (code, signal) => {
      for (const p of this.pending.values()) p.reject(new Error(`fleet shard exited (${signal ?? code})`));
      this.pending.clear();
    });
  }

  private call<T>(op: Op, arg?: unknown): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: (v) => resolve(v as T), reject });
      const req: Request = { id, op, ...(arg === undefined ? {} : { arg }) };
      this.child.send(req);
    });
  }

  init(opts: HostGroupOptions): Promise<number> {
    return this.call('init', opts);
  }
  firstSync(): Promise<FirstSyncReport> {
    return this.call('firstSync');
  }
  providersPerHost(): Promise<number> {
    return this.call('providersPerHost');
  }
  startAudits(intervalSeconds: number): Promise<void> {
    return this.call('startAudits', intervalSeconds);
  }
  drift(every: number): Promise<number> {
    return this.call('drift', every);
  }
  stopAudits(): Promise<void> {
    return this.call('stopAudits');
  }
  counts(reset: boolean): Promise<ShardCounts> {
    return this.call('counts', reset);
  }
  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    await this.call('close').catch(() => undefined);
    this.child.disconnect();
    await exited;
  }
}

/** The child side: answers requests with a LocalShard until told to close. */
function serve(): void {
  const shard = new LocalShard();
  const run = (req: Request): Promise<unknown> => {
    switch (req.op) {
      case 'init':
        return shard.init(req.arg as HostGroupOptions);
      case 'firstSync':
        return shard.firstSync();
      case 'providersPerHost':
        return shard.providersPerHost();
      case 'startAudits':
        return shard.startAudits(Number(req.arg));
      case 'drift':
        return shard.drift(Number(req.arg));
      case 'stopAudits':
        return shard.stopAudits();
      case 'counts':
        return shard.counts(req.arg === true);
      case 'close':
        return shard.close();
    }
  };
  process.on('message', (req: Request) => {
    run(req).then(
      (value) => process.send?.({ id: req.id, value: value ?? null }),
      (e: unknown) => process.send?.({ id: req.id, error: e instanceof Error ? e.message : String(e) }),
    );
  });
  // The parent going away ends the shard (its cron timers would otherwise keep it alive).
  process.on('disconnect', () => process.exit(0));
}

if (require.main === module && process.send) serve();
