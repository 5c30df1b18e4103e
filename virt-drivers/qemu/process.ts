/**
 * The `VmProcesses` port: starting QEMU so that it outlives the agent, and finding, watching and
 * signalling QEMU processes again later, by pid, from anyone (the agent that started them or a
 * restarted one).
 *
 * A VM is started detached (its own session and process group, so a signal to the agent's group
 * or the agent's death does not reach it), with stdin closed and stdout/stderr appended to a log
 * file in the instance directory (never `-daemonize`, which would throw stderr away), and
 * `unref`'d so it does not keep the agent's event loop alive. A pid alone is not an identity:
 * pids are reused, so a process is identified by pid plus its start time (`/proc/<pid>/stat`
 * field 22), and a zombie counts as gone.
 *
 * It is: the only place the QEMU driver touches processes. It is not: a supervisor; nothing here
 * restarts a VM that died.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

/** How a process ended (from `exit`; only known for processes this agent started). */
export interface ExitStatus {
  readonly code: number | null;
  readonly signal: string | null;
}

/** What to start: the binary, its arguments, where its output goes. */
export interface LaunchRequest {
  readonly binary: string;
  readonly args: readonly string[];
  /** stdout and stderr are appended here. */
  readonly logPath: string;
  readonly cwd: string;
}

/** A process just started by this agent. */
export interface Launched {
  readonly pid: number;
  /** Start time in clock ticks since boot: with the pid, the process's identity. */
  readonly startTicks: string;
  /** Resolves when it exits (never rejects). */
  readonly exited: Promise<ExitStatus>;
}

/** A live (not zombie) process, as /proc shows it. */
export interface ProcessInfo {
  readonly pid: number;
  readonly startTicks: string;
  readonly argv: readonly string[];
}

/** The executable could not be started at all (missing, not executable). */
export class LaunchError extends Error {
  constructor(readonly binary: string, readonly code: string, options?: { cause?: unknown }) {
    super(`${binary}: cannot be started (${code})`, options);
    this.name = 'LaunchError';
  }
}

/**
 * Starts and inspects VM processes. Implementations own nothing after `launch` returns: the
 * process belongs to the host, and any agent may find it again with `inspect`.
 */
export interface VmProcesses {
  /** Starts the process detached. @throws LaunchError when it cannot be executed */
  launch(req: LaunchRequest): Promise<Launched>;
  /** The live process with that pid, or undefined when there is none (or only a zombie). */
  inspect(pid: number): Promise<ProcessInfo | undefined>;
  /** Sends a signal; a process that is already gone is not an error. */
  signal(pid: number, signal: NodeJS.Signals): void;
}

/** Parses /proc/<pid>/stat: state (field 3) and start time (field 22); the name may hold spaces and parentheses. */
export function parseProcStat(stat: string): { state: string; startTicks: string } | undefined {
  const close = stat.lastIndexOf(')');
  if (close < 0) return undefined;
  const fields = stat.slice(close + 2).trim().split(/\s+/);
  const state = fields[0];
  const startTicks = fields[19];
  return state && startTicks ? { state, startTicks } : undefined;
}

/** The real port, on child_process and /proc. */
export class HostProcesses implements VmProcesses {
  async launch(req: LaunchRequest): Promise<Launched> {
    const fd = openSync(req.logPath, 'a', 0o640);
    try {
      const child = spawn(req.binary, [...req.args], { cwd: req.cwd, detached: true, stdio: ['ignore', fd, fd] });
      const exited = new Promise<ExitStatus>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', (e: NodeJS.ErrnoException) => reject(new LaunchError(req.binary, e.code ?? e.message, { cause: e })));
      });
      child.unref();
      const pid = child.pid as number;
      const info = await this.inspect(pid);
      return { pid, startTicks: info?.startTicks ?? '', exited };
    } finally {
      closeSync(fd);
    }
  }

  async inspect(pid: number): Promise<ProcessInfo | undefined> {
    let stat: string;
    let cmdline: string;
    try {
      [stat, cmdline] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readFile(`/proc/${pid}/cmdline`, 'utf8')]);
    } catch {
      return undefined;
    }
    const parsed = parseProcStat(stat);
    if (!parsed || parsed.state === 'Z' || parsed.state === 'X') return undefined;
    return { pid, startTicks: parsed.startTicks, argv: cmdline.split('\0').filter((a) => a !== '') };
  }

  signal(pid: number, signal: NodeJS.Signals): void {
    try {
      process.kill(pid, signal);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
    }
  }
}
