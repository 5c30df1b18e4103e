/**
 * Telling systemd the truth (`Type=notify`): READY=1 only once the agent is really ready, STOPPING=1
 * on shutdown, STATUS= lines, and WATCHDOG=1 keep-alives.
 *
 * Node has no AF_UNIX datagram sockets and native add-ons are ruled out, so messages are sent by
 * the `systemd-notify` tool as a child process (the unit sets `NotifyAccess=all`; `--pid` names the
 * agent as the sender, so systemd attributes the message to the main process). Without
 * `NOTIFY_SOCKET` (not under systemd) every call is a no-op.
 */
import { execFile } from 'node:child_process';
import type { Logger } from '../../lib/logging/logger';

export interface ServiceNotifier {
  /** Whether messages go anywhere. */
  readonly enabled: boolean;
  /** The keep-alive period systemd expects (half of WatchdogSec), if the watchdog is on. */
  readonly watchdogIntervalMs: number | undefined;
  /** READY=1 with a status line. */
  ready(status: string): Promise<void>;
  /** STOPPING=1 with a status line. */
  stopping(status: string): Promise<void>;
  status(text: string): Promise<void>;
  /** WATCHDOG=1. */
  watchdog(): Promise<void>;
}

export class NoopNotifier implements ServiceNotifier {
  readonly enabled = false;
  readonly watchdogIntervalMs = undefined;
  ready(): Promise<void> {
    return Promise.resolve();
  }
  stopping(): Promise<void> {
    return Promise.resolve();
  }
  status(): Promise<void> {
    return Promise.resolve();
  }
  watchdog(): Promise<void> {
    return Promise.resolve();
  }
}

export class SystemdNotifier implements ServiceNotifier {
  readonly enabled = true;
  readonly watchdogIntervalMs: number | undefined;

  constructor(
    private readonly env: Readonly<Record<string, string | undefined>>,
    private readonly logger: Logger,
    private readonly pid = process.pid,
    private readonly tool = 'systemd-notify',
  ) {
    const usec = Number(env.WATCHDOG_USEC);
    const forUs = env.WATCHDOG_PID === undefined || Number(env.WATCHDOG_PID) === pid;
    this.watchdogIntervalMs = Number.isFinite(usec) && usec > 0 && forUs ? Math.max(100, Math.floor(usec / 2000)) : undefined;
  }

  ready(status: string): Promise<void> {
    return this.send(['READY=1', `STATUS=${status}`]);
  }
  stopping(status: string): Promise<void> {
    return this.send(['STOPPING=1', `STATUS=${status}`]);
  }
  status(text: string): Promise<void> {
    return this.send([`STATUS=${text}`]);
  }
  watchdog(): Promise<void> {
    return this.send(['WATCHDOG=1']);
  }

  private send(assignments: string[]): Promise<void> {
    return new Promise((resolve) => {
      execFile(
        this.tool,
        [`--pid=${this.pid}`, ...assignments],
        { env: { ...process.env, NOTIFY_SOCKET: this.env.NOTIFY_SOCKET }, timeout: 5000 },
        (err, _out, stderr) => {
          if (err) this.logger.warn({ message: assignments[0], reason: stderr.trim() || err.message }, 'systemd notification failed');
          resolve();
        },
      );
    });
  }
}

/** The notifier for this process: systemd's when NOTIFY_SOCKET is set, else a no-op. */
export function notifierFor(env: Readonly<Record<string, string | undefined>>, logger: Logger): ServiceNotifier {
  return env.NOTIFY_SOCKET ? new SystemdNotifier(env, logger) : new NoopNotifier();
}
