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

/** Linux's USER_HZ: the unit of utime and stime in /proc/<pid>/stat. */
const TICKS_PER_SECOND = 100;

interface ProcStat {
  readonly ppid: number;
  /** utime + stime, in ticks. */
  readonly ticks: number;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: fields are counted after the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) };
  } catch {
    return undefined;
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

  private pids(): number[] {
    let master: number;
    try {
      master = Number(readFileSync(this.pidFile, 'utf8').trim());
    } catch {
      return [];
    }
    const out: number[] = [];
    for (const name of readdirSync('/proc')) {
      const pid = Number(name);
      if (!Number.isInteger(pid)) continue;
      if (pid === master) out.push(pid);
      else if (readStat(pid)?.ppid === master) out.push(pid);
      else if (cmdline(pid).startsWith('postgres: ') && cmdline(pid).includes(` ${this.database} `)) out.push(pid);
    }
    return out;
  }

  /** Adds what each process used since it was last seen; a new process counts from its start. */
  private sample(): void {
    for (const pid of this.pids()) {
      const now = readStat(pid)?.ticks;
      if (now === undefined) continue;
      this.ticks += now - (this.last.get(pid) ?? 0);
      this.last.set(pid, now);
    }
  }

  /** Starts a window: what the processes used so far is not counted. */
  start(): void {
    this.stop();
    this.last.clear();
    for (const pid of this.pids()) this.last.set(pid, readStat(pid)?.ticks ?? 0);
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
