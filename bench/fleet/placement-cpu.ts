/**
 * CPU time a private Placement spends, read from /proc: its uwsgi master and workers (the pid in
 * `scripts/stack`'s pidfile and that pid's children) and the PostgreSQL backends serving its
 * database (a backend's title names the database). From it the fleet scenario reports how busy
 * Placement kept the cores in each phase and what a request or a claim cost it, which is what
 * sizing an operator's Placement for a fleet needs: the machine's own cores are shared with the
 * simulated hosts here, so the wall-clock rates alone would not say how many cores Placement used.
 *
 * Backends come and go with SQLAlchemy's pool overflow: sampling once a second loses at most the
 * last second of a backend that exits, which the pooled (long-lived) connections make rare.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { procStat, TICKS_PER_SECOND, type ProcStat } from '../proc';

function readStat(pid: number): ProcStat | undefined {
  try {
    return procStat(pid);
  } catch {
    return undefined; // gone since /proc was listed
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/** Sums the CPU of one Placement's processes over a window, sampling once a second. */
export class PlacementCpu {
  private readonly last = new Map<number, number>();
  private ticks = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pidFile: string,
    private readonly database: string,
  ) {}

  /** Whether a process title is a PostgreSQL backend of Placement's database. */
  private servesDatabase(title: string): boolean {
    return title.startsWith('postgres: ') && title.includes(` ${this.database} `);
  }

  /** Placement's processes now, each with the CPU ticks it has used (one read of its stat). */
  private processes(): Map<number, number> {
    const out = new Map<number, number>();
    let master: number;
    try {
      master = Number(readFileSync(this.pidFile, 'utf8').trim());
    } catch {
      return out;
    }
    for (const name of readdirSync('/proc')) {
      const pid = Number(name);
      if (!Number.isInteger(pid)) continue;
      const stat = readStat(pid);
      if (!stat) continue;
      if (pid === master || stat.ppid === master || this.servesDatabase(cmdline(pid))) out.set(pid, stat.cpuTicks);
    }
    return out;
  }

  /** Adds what each process used since it was last seen; a new process counts from its start. */
  private sample(): void {
    for (const [pid, now] of this.processes()) {
      this.ticks += now - (this.last.get(pid) ?? 0);
      this.last.set(pid, now);
    }
  }

  /** Starts a window: what the processes used so far is not counted. */
  start(): void {
    this.stop();
    this.last.clear();
    for (const [pid, now] of this.processes()) this.last.set(pid, now);
    this.ticks = 0;
    this.timer = setInterval(() => this.sample(), 1000);
    this.timer.unref();
  }

  /** CPU seconds since `start` (or the last `take`), and starts counting again from zero. */
  take(): number {
    this.sample();
    const seconds = this.ticks / TICKS_PER_SECOND;
    this.ticks = 0;
    return seconds;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
