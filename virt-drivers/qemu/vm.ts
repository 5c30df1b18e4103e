/**
 * One running QEMU process of an instance, as the driver holds it: its identity (pid and start
 * time), its shared QMP connection, and the ways to stop it.
 *
 * A QMP monitor serves one client at a time, so the handle opens one connection lazily and
 * shares it between every operation (a status query during a live migration rides the same
 * connection). The handle works the same for a VM this agent started (its exit is reported by
 * the child process) and for one adopted after a restart (its exit is noticed through /proc).
 *
 * It is: mechanism. It is not: state; whether the instance should run is in its record, which
 * the driver updates around these calls.
 */
import type { Logger } from '../../lib/logging/logger';
import type { Clock } from '../../lib/clock';
import { QmpClosedError } from './errors';
import type { InstancePaths } from './instance-files';
import type { QemuOptions } from './options';
import type { ExitStatus, VmProcesses } from './process';
import { QmpClient } from './qmp';

/** What a VM handle needs: the process port, time, logging, options. */
export interface VmDeps {
  readonly processes: VmProcesses;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly opts: QemuOptions;
}

/** How a stop ended: the VM quit when asked, or had to be signalled. */
export type StopOutcome = 'exited' | 'quit' | 'sigterm' | 'sigkill';

/**
 * A handle on one QEMU process. Owned by the instance table entry it is attached to; shared QMP
 * connection, safe for concurrent commands. Methods throw `QmpError`s where they talk to QEMU;
 * `stop`, `alive` and `waitExit` never throw for a process that is gone.
 */
export class QemuVm {
  private client: QmpClient | undefined;
  private connecting: Promise<QmpClient> | undefined;
  private exitStatus: ExitStatus | undefined;
  /** Aborted when the process is known to have exited: a pending connect stops retrying. */
  private readonly gone = new AbortController();

  constructor(
    readonly uuid: string,
    readonly paths: InstancePaths,
    readonly pid: number,
    readonly startTicks: string,
    private readonly deps: VmDeps,
    /** Only for a process this agent started: resolves when it exits. */
    readonly exited?: Promise<ExitStatus>,
  ) {
    // `Launched.exited` never rejects: there is nothing to catch.
    void exited?.then((s) => {
      this.exitStatus = s;
      this.gone.abort();
      this.client?.close();
    });
  }

  /** The exit status, once known (only for VMs this agent started). */
  get exit(): ExitStatus | undefined {
    return this.exitStatus;
  }

  /**
   * The shared QMP connection, opened on first use within `connectTimeoutMs` (default
   * `start_timeout`); a connect already under way is joined.
   * @throws QmpError
   */
  qmp(connectTimeoutMs?: number): Promise<QmpClient> {
    if (this.client && !this.client.isClosed) return Promise.resolve(this.client);
    if (!this.connecting) {
      const { opts, clock, logger } = this.deps;
      const timeoutMs = connectTimeoutMs ?? opts.startTimeoutMs;
      this.connecting = QmpClient.connect(this.paths.qmp, { timeoutMs, commandTimeoutMs: opts.qmpTimeoutMs, clock, logger, signal: this.gone.signal })
        .then((c) => {
          this.client = c;
          return c;
        })
        .finally(() => {
          this.connecting = undefined;
        });
    }
    return this.connecting;
  }

  /** Runs a QMP command on the shared connection. @throws QmpError */
  async execute(command: string, args?: Readonly<Record<string, unknown>>, timeoutMs?: number): Promise<unknown> {
    return (await this.qmp()).execute(command, args, timeoutMs === undefined ? {} : { timeoutMs });
  }

  /** QEMU's run state (`running`, `paused`, `inmigrate`, `postmigrate`, `shutdown`, ...). @throws QmpError */
  async runState(): Promise<string> {
    const r = (await this.execute('query-status')) as { status?: unknown };
    return typeof r?.status === 'string' ? r.status : 'unknown';
  }

  /** Whether the process still runs (and is the same process, not a reused pid). */
  async alive(): Promise<boolean> {
    if (this.exitStatus) return false;
    const info = await this.deps.processes.inspect(this.pid);
    return info !== undefined && (this.startTicks === '' || info.startTicks === this.startTicks);
  }

  /** Waits up to `timeoutMs` for the process to end; whether it did. */
  async waitExit(timeoutMs: number): Promise<boolean> {
    const deadline = this.deps.clock.now() + timeoutMs;
    for (;;) {
      if (!(await this.alive())) {
        // Our own child: let Node reap it (and learn its status) before saying it is gone.
        if (this.exited && !this.exitStatus) await Promise.race([this.exited, this.deps.clock.sleep(1000)]);
        return true;
      }
      if (this.deps.clock.now() >= deadline) return false;
      await this.deps.clock.sleep(Math.min(50, Math.max(1, deadline - this.deps.clock.now())));
    }
  }

  /**
   * Presses the ACPI power button and waits up to `timeoutMs` for the guest to power off (QEMU
   * exits when it does); whether it did. A guest without ACPI support simply ignores it.
   */
  async powerdown(timeoutMs: number): Promise<boolean> {
    if (!(await this.alive())) return true;
    if (timeoutMs <= 0) return false;
    try {
      await this.execute('system_powerdown');
    } catch (e) {
      if (!(e instanceof QmpClosedError)) this.deps.logger.warn({ instance: this.uuid, err: (e as Error).message }, 'system_powerdown failed');
    }
    return this.waitExit(timeoutMs);
  }

  /**
   * Stops the process hard and waits for it: QMP `quit`, then SIGTERM, then SIGKILL, each given
   * `destroy_timeout`. Resolves once it is gone; never throws for a VM that is already gone.
   */
  async stop(): Promise<StopOutcome> {
    const { opts, processes, logger } = this.deps;
    if (!(await this.alive())) return 'exited';
    try {
      const qmp = this.client && !this.client.isClosed ? this.client : this.connecting ? undefined : await this.qmp(opts.destroyTimeoutMs);
      await qmp?.execute('quit', undefined, { timeoutMs: opts.destroyTimeoutMs });
    } catch {
      // Closed (it exited), timed out or unreachable: the signals below settle it.
    }
    if (await this.waitExit(opts.destroyTimeoutMs)) return 'quit';
    logger.warn({ instance: this.uuid, pid: this.pid }, 'qemu did not quit; sending SIGTERM');
    processes.signal(this.pid, 'SIGTERM');
    if (await this.waitExit(opts.destroyTimeoutMs)) return 'sigterm';
    logger.warn({ instance: this.uuid, pid: this.pid }, 'qemu ignored SIGTERM; sending SIGKILL');
    processes.signal(this.pid, 'SIGKILL');
    await this.waitExit(opts.destroyTimeoutMs);
    return 'sigkill';
  }

  /** Closes the QMP connection; the VM keeps running. */
  detach(): void {
    this.client?.close();
    this.client = undefined;
  }
}
