/**
 * What the benchmarks read of a process from /proc: its parent and CPU time (`/proc/<pid>/stat`)
 * and its resident memory (`/proc/<pid>/status`). One parser for each, for every scenario that
 * measures a process (footprint, hostile-input, rpc, fleet's Placement).
 *
 * Each read throws when the process is gone; a caller that watches processes come and go catches.
 */
import { readFileSync } from 'node:fs';

/** Linux's USER_HZ: the unit of utime and stime in /proc/<pid>/stat. */
export const TICKS_PER_SECOND = 100;

export interface ProcStat {
  readonly ppid: number;
  /** utime + stime, in ticks. */
  readonly cpuTicks: number;
}

/** @throws when the process is gone */
export function procStat(pid: number): ProcStat {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name is in parentheses and may hold spaces and ')': fields are counted after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(rest[1]), cpuTicks: Number(rest[11]) + Number(rest[12]) };
}

/** CPU time (user + system) a process has used, in seconds. @throws when the process is gone */
export function cpuSeconds(pid: number): number {
  return procStat(pid).cpuTicks / TICKS_PER_SECOND;
}

export type StatusField = 'VmRSS' | 'RssFile' | 'RssAnon';

/** Fields of one read of `/proc/<pid>/status`, in MB (NaN for a field that is missing). @throws when the process is gone */
export function statusMbs<F extends StatusField>(pid: number, fields: readonly F[]): Record<F, number> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const out = {} as Record<F, number>;
  for (const f of fields) {
    const m = new RegExp(`${f}:\\s+(\\d+) kB`).exec(status);
    out[f] = m ? Number(m[1]) / 1024 : NaN;
  }
  return out;
}

/** One field of `/proc/<pid>/status`, in MB. @throws when the process is gone */
export function statusMb(pid: number, field: StatusField): number {
  return statusMbs(pid, [field])[field];
}
