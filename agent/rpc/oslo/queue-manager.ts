/**
 * The unique part of transient queue names (`reply_<id>`, `<topic>_fanout_<id>`), as oslo chooses
 * it: a uuid4 hex by default, or with `use_queue_manager` oslo's `amqpdriver.QManager` names
 * `<hostname>:<processname>:<n>`. The counter lives in `/dev/shm/<hostname>_<processname>_qmanager`
 * as `<pgid>:<n>:<starttime>` (the process group and its start time in jiffies since boot, from
 * /proc): it counts up while the process group lives and starts again at 1 when the service
 * restarts (another group, or the same id reused after a reboot or in a new container), so a
 * restarted agent declares the same names again and reuses its queues instead of leaving new ones.
 *
 * oslo guards the file with an oslo.concurrency lock between processes sharing the names; the
 * agent is one process and reads and writes the file synchronously, so its own names never
 * collide. Two processes configured with the same hostname and processname would.
 *
 * Not here: the queues themselves (`topology.ts`).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { newId } from './messages';

/** Gives the unique part of the next transient queue name. */
export interface TransientIds {
  next(): string;
  /** The names come back when the service restarts, so their queues are kept, not deleted on stop. */
  readonly reused: boolean;
}

/** oslo's default: a uuid4 hex per queue. */
export const randomIds: TransientIds = { next: () => newId(), reused: false };

/** The process's group id and the group leader's start time, as oslo reads them. */
export interface ProcessGroup {
  readonly pgid: number;
  readonly startTime: number;
}

/**
 * Fields of /proc/<pid>/stat after the command name (which may contain spaces and parentheses):
 * index 0 is field 3 (state), so field N is at N - 3.
 */
function statFields(pid: number | 'self'): string[] {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return text.slice(text.lastIndexOf(')') + 2).trim().split(/\s+/);
}

/** This process's group, from /proc (field 5 pgrp; field 22 starttime of the group leader). */
export function currentProcessGroup(): ProcessGroup {
  const self = statFields('self');
  const pgid = Number(self[5 - 3]);
  let leader: string[];
  try {
    leader = statFields(pgid);
  } catch {
    leader = self; // the leader exited; the group still identifies this run of the service
  }
  return { pgid, startTime: Number(leader[22 - 3]) };
}

export interface QueueManagerOptions {
  readonly hostname: string;
  readonly processname: string;
  /** Where the counter file lives; oslo's is /dev/shm. */
  readonly dir?: string;
  readonly group?: ProcessGroup;
}

/** Ownership: one per process, shared by the RPC server and client so their names do not repeat. */
export class QueueManager implements TransientIds {
  readonly reused = true;
  private readonly file: string;
  private readonly group: ProcessGroup;

  constructor(private readonly opts: QueueManagerOptions) {
    this.file = join(opts.dir ?? '/dev/shm', `${opts.hostname}_${opts.processname}_qmanager`);
    this.group = opts.group ?? currentProcessGroup();
  }

  /** `<hostname>:<processname>:<n>`. @throws the file system's error when the counter cannot be written. */
  next(): string {
    const { pgid, startTime } = this.group;
    let counter = 0;
    try {
      const [pg, n, st] = readFileSync(this.file, 'utf8').split('\n')[0]?.split(':') ?? [];
      if (Number(pg) === pgid && Number(st) === startTime && /^\d+$/.test(n ?? '')) counter = Number(n);
    } catch {
      // no counter yet: this run starts at 1
    }
    counter += 1;
    writeFileSync(this.file, `${pgid}:${counter}:${startTime}`);
    return `${this.opts.hostname}:${this.opts.processname}:${counter}`;
  }
}

/** The naming `[oslo_messaging_rabbit]` asks for. */
export function transientIds(r: { readonly use_queue_manager: boolean; readonly hostname: string; readonly processname: string }): TransientIds {
  return r.use_queue_manager ? new QueueManager({ hostname: r.hostname, processname: r.processname }) : randomIds;
}
