/**
 * The QEMU driver's table of instances on this host: each instance's record (mirrored to its
 * `instance.json` at every change), its directory, and the handle of its QEMU process when one
 * runs; plus starting and stopping that process with the record kept true, and the power state
 * derived from what QEMU says.
 *
 * Power state: a live process reports QEMU's run state (running, paused, ...). A process that
 * is gone reports SHUTDOWN when it went cleanly (asked to stop, or the guest powered off: QEMU
 * removed its pidfile) and CRASHED when it did not (killed, crashed, OOM: the pidfile is left).
 * The record keeps what the instance *should* do (`power`), so the compute manager can tell "the
 * guest shut itself down" from "an operator powered it off".
 *
 * Concurrency: one mutex per instance (`withLock`) serialises the operations that change an
 * instance; reads (`powerState`) and live-migration aborts do not take it.
 */
import { Mutex } from 'async-mutex';
import { access, rm } from 'node:fs/promises';
import type { Logger } from '../../lib/logging/logger';
import type { PowerState } from '../types';
import type { InstancePaths, InstanceRecord } from './instance-files';
import { writeRecord } from './instance-files';
import { startVm } from './launch';
import type { QemuVm, VmDeps } from './vm';

/** One instance directory the driver manages. */
export interface Managed {
  rec: InstanceRecord;
  readonly paths: InstancePaths;
  vm?: QemuVm;
  /** Set while the driver itself stops the process (its exit is expected). */
  stopping?: boolean;
  /** Aborts the live migration running from here. */
  outgoing?: AbortController;
}

/** QEMU run state (`query-status`) to nova power state. */
export function powerStateOfRunState(state: string): PowerState {
  switch (state) {
    case 'running':
      return 'RUNNING';
    case 'suspended':
      return 'SUSPENDED';
    case 'shutdown':
      return 'SHUTDOWN';
    case 'guest-panicked':
    case 'internal-error':
    case 'io-error':
      return 'CRASHED';
    case 'unknown':
      return 'NOSTATE';
    default:
      return 'PAUSED'; // paused, inmigrate, postmigrate, prelaunch, finish-migrate, save-vm, restore-vm, ...
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * The instances of one driver. Owns the `Managed` entries and their QEMU handles; callers mutate an
 * instance only while holding its lock (`withLock`). Record writes that fail throw the fs error.
 */
export class InstanceTable {
  /** `<uuid>/` directories, by uuid. */
  readonly active = new Map<string, Managed>();
  /** `<uuid>_resize/` directories (cold-migration sources kept until confirm or revert), by uuid. */
  readonly resized = new Map<string, Managed>();
  private readonly locks = new Map<string, Mutex>();
  private readonly log: Logger;
  /** Runs before every QEMU start (the driver plugs the instance's VIFs: taps do not survive a host reboot). */
  beforeStart: (m: Managed) => Promise<void> = async () => undefined;

  constructor(private readonly deps: VmDeps) {
    this.log = deps.logger;
  }

  /** Runs `fn` holding the instance's mutex. */
  withLock<T>(uuid: string, fn: () => Promise<T>): Promise<T> {
    let m = this.locks.get(uuid);
    if (!m) this.locks.set(uuid, (m = new Mutex()));
    return m.runExclusive(fn);
  }

  /** Changes the record and writes it. @throws the fs error */
  async save(m: Managed, patch: Partial<InstanceRecord>): Promise<void> {
    m.rec = { ...m.rec, ...patch };
    await writeRecord(m.paths.dir, m.rec);
  }

  /** Starts the instance's QEMU from its record (paused: vCPUs stopped) and records the process. Hold the lock. @throws VmStartError, the `beforeStart` error */
  async start(m: Managed, opts: { readonly incoming?: boolean; readonly paused?: boolean } = {}): Promise<QemuVm> {
    if (m.vm) await this.noteExit(m, m.vm); // a dead handle, noted before a new process replaces it
    await this.beforeStart(m);
    await rm(m.paths.pid, { force: true });
    const vm = await startVm(this.deps, { uuid: m.rec.uuid, name: m.rec.name, def: m.rec.vm, paths: m.paths, ...(opts.incoming ? { incoming: true } : {}), ...(opts.paused ? { paused: true } : {}) });
    this.attach(m, vm);
    try {
      await this.save(m, { process: { pid: vm.pid, startTicks: vm.startTicks, startedAt: new Date(this.deps.clock.now()).toISOString() }, lastExit: null });
    } catch (e) {
      m.stopping = true;
      await vm.stop();
      m.stopping = false;
      delete m.vm;
      throw e;
    }
    return vm;
  }

  /** Adopts a handle (started here or found again after a restart) and logs an unexpected exit. */
  attach(m: Managed, vm: QemuVm): void {
    m.vm = vm;
    void vm.exited?.then((s) => {
      if (m.vm === vm && !m.stopping) this.log.warn({ instance: m.rec.uuid, pid: vm.pid, code: s.code, signal: s.signal }, 'qemu exited unexpectedly');
    });
  }

  /**
   * Stops the instance's QEMU if it runs: a clean shutdown within `cleanMs` (0: none), else hard.
   * Records that no process runs; `power` is the caller's to set.
   */
  async stop(m: Managed, cleanMs: number): Promise<'clean' | 'hard' | 'not-running'> {
    const vm = m.vm;
    if (!vm || !(await vm.alive())) {
      if (vm) await this.noteExit(m, vm);
      return 'not-running';
    }
    m.stopping = true;
    try {
      const clean = cleanMs > 0 && (await vm.powerdown(cleanMs));
      if (!clean) {
        const how = await vm.stop();
        this.log.info({ instance: m.rec.uuid, how }, 'qemu stopped hard');
      }
      vm.detach();
      delete m.vm;
      await this.save(m, { process: null, lastExit: null });
      return clean ? 'clean' : 'hard';
    } finally {
      m.stopping = false;
    }
  }

  /**
   * Records that `vm`, the instance's process, went away without being asked to (pidfile left:
   * not cleanly). Hold the lock; the first caller for a handle does it, later ones return.
   */
  async noteExit(m: Managed, vm: QemuVm): Promise<void> {
    if (m.vm !== vm) return;
    delete m.vm; // claimed before any await
    vm.detach();
    const clean = !(await exists(m.paths.pid));
    const lastExit = { at: new Date(this.deps.clock.now()).toISOString(), clean, code: vm.exit?.code ?? null, signal: vm.exit?.signal ?? null };
    this.log.warn({ instance: m.rec.uuid, pid: vm.pid, ...lastExit }, clean ? 'instance shut down on its own' : 'instance crashed or was killed');
    await this.save(m, { process: null, lastExit });
  }

  /**
   * The instance's power state, from QEMU when its process runs, else from how it ended. Takes
   * no lock (callers may hold it): a process found gone is recorded by a task queued on the lock.
   */
  async powerState(m: Managed): Promise<PowerState> {
    if (m.rec.task === 'resized-away') return 'SHUTDOWN';
    const vm = m.vm;
    if (vm && (await vm.alive())) {
      try {
        return powerStateOfRunState(await vm.runState());
      } catch (e) {
        if (await vm.alive()) {
          this.log.warn({ instance: m.rec.uuid, err: (e as Error).message }, 'qemu runs but does not answer on QMP');
          return 'NOSTATE';
        }
      }
    }
    if (vm && !m.stopping && m.vm === vm) {
      void this.withLock(m.rec.uuid, () => this.noteExit(m, vm)).catch((e: unknown) => this.log.error({ instance: m.rec.uuid, err: (e as Error).message }, 'cannot record the exit'));
      return (await exists(m.paths.pid)) ? 'CRASHED' : 'SHUTDOWN';
    }
    if (m.rec.power === 'suspended') return 'SUSPENDED';
    return m.rec.lastExit && !m.rec.lastExit.clean ? 'CRASHED' : 'SHUTDOWN';
  }

  /** Closes every QMP connection; the VMs keep running. */
  detachAll(): void {
    for (const m of [...this.active.values(), ...this.resized.values()]) m.vm?.detach();
  }
}
