/**
 * Finding this host's instances again when the driver starts, Nomad-style task recovery: every
 * instance directory is read, and a QEMU process still running for it is adopted as it is (never
 * restarted), so an agent restart or crash costs the guests nothing.
 *
 * A process is the instance's when its pid (from the record, or QEMU's own pidfile, which covers
 * a crash between starting QEMU and recording its pid) is alive, its start time matches the
 * record when the record has one, and its command line names the instance's QMP socket; a reused
 * pid fails those checks. An instance whose process is gone is reported `died` (its record says
 * whether it went cleanly) and stays shut off: what to do about it is the compute manager's
 * decision, from its journal (restart it, or report it stopped as nova's power-state sync does).
 *
 * It is: reading and adopting. It is not: the reconciliation with the journal, which belongs to
 * the compute manager; `RecoveredInstance` is what it reconciles against.
 */
import { readFile, rm } from 'node:fs/promises';
import { CheckpointCorruptError } from '../../lib/checkpoint';
import type { QemuHost } from './context';
import { instancePaths, readRecord, scanInstanceDirs, type InstanceDirEntry } from './instance-files';
import type { Managed } from './instances';
import { QemuVm } from './vm';

/** What recovery found for one instance directory. */
export interface RecoveredInstance {
  readonly uuid: string;
  readonly dir: string;
  /**
   * adopted: its QEMU runs and was taken over; died: it should run but its process is gone;
   * stopped: it is powered off (or a cold-migration source copy); unreadable: its record is
   * corrupt (left alone); removed: a half-fetched cold migration, deleted.
   */
  readonly outcome: 'adopted' | 'died' | 'stopped' | 'unreadable' | 'removed';
  readonly pid?: number;
  /** QEMU's run state of an adopted instance, when it answered. */
  readonly runState?: string;
  readonly task?: string;
  readonly detail?: string;
}

const RECOVERY_QMP_TIMEOUT_MS = 5000;

async function pidFromFile(path: string): Promise<number | undefined> {
  try {
    const n = Number((await readFile(path, 'utf8')).trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

/** Finds the instance's live QEMU process, if any. */
async function findProcess(host: QemuHost, m: Managed): Promise<QemuVm | undefined> {
  const recorded = m.rec.process;
  const candidates = new Set<number>();
  if (recorded) candidates.add(recorded.pid);
  const fromFile = await pidFromFile(m.paths.pid);
  if (fromFile) candidates.add(fromFile);
  for (const pid of candidates) {
    const info = await host.processes.inspect(pid);
    if (!info) continue;
    if (recorded?.pid === pid && recorded.startTicks !== '' && info.startTicks !== recorded.startTicks) continue;
    if (!info.argv.some((a) => a.includes(m.paths.qmp.replace(/,/g, ',,')))) continue;
    return new QemuVm(m.rec.uuid, m.paths, pid, info.startTicks, host.vmDeps);
  }
  return undefined;
}

async function recoverOne(host: QemuHost, entry: InstanceDirEntry): Promise<RecoveredInstance> {
  const base = { uuid: entry.uuid, dir: entry.dir };
  if (entry.kind === 'staging') {
    await rm(entry.dir, { recursive: true, force: true });
    return { ...base, outcome: 'removed', detail: 'a cold migration fetch that did not finish' };
  }
  let rec;
  try {
    rec = await readRecord(entry.dir);
  } catch (e) {
    const detail = e instanceof CheckpointCorruptError ? e.message : String(e);
    return { ...base, outcome: 'unreadable', detail };
  }
  if (!rec || rec.uuid !== entry.uuid) return { ...base, outcome: 'unreadable', detail: rec ? `its record names ${rec.uuid}` : 'no instance.json' };
  const m: Managed = { rec, paths: instancePaths(entry.dir) };
  (entry.kind === 'active' ? host.table.active : host.table.resized).set(entry.uuid, m);
  const task = rec.task ? { task: rec.task } : {};
  const vm = await findProcess(host, m);
  if (vm) {
    host.table.attach(m, vm);
    if (rec.process?.pid !== vm.pid || rec.process.startTicks !== vm.startTicks) {
      await host.table.save(m, { process: { pid: vm.pid, startTicks: vm.startTicks, startedAt: new Date(host.clock.now()).toISOString() }, lastExit: null });
    }
    // Bounded: a monitor held by another client (a stuck old agent) must not stall the start.
    const runState = await vm
      .qmp(RECOVERY_QMP_TIMEOUT_MS)
      .then(() => vm.runState())
      .catch((e: unknown) => `unanswered (${(e as Error).message})`);
    return { ...base, outcome: 'adopted', pid: vm.pid, runState, ...task };
  }
  if (rec.process) {
    // It ran when the last agent stopped watching, and is gone now.
    const pidfileLeft = (await pidFromFile(m.paths.pid)) !== undefined;
    const lastExit = { at: new Date(host.clock.now()).toISOString(), clean: !pidfileLeft, code: null, signal: null };
    await host.table.save(m, { process: null, lastExit });
    return { ...base, outcome: 'died', pid: rec.process.pid, detail: pidfileLeft ? 'killed or crashed (pidfile left behind)' : 'exited cleanly (guest shutdown or quit)', ...task };
  }
  return { ...base, outcome: rec.power === 'running' && !rec.task ? 'died' : 'stopped', ...task };
}

/** Reads every instance directory into the table, adopting running VMs. @throws the fs error of instances_path */
export async function recoverInstances(host: QemuHost): Promise<RecoveredInstance[]> {
  const entries = await scanInstanceDirs(host.opts.instancesPath);
  const out: RecoveredInstance[] = [];
  for (const entry of entries) {
    const r = await recoverOne(host, entry).catch((e: unknown): RecoveredInstance => ({ uuid: entry.uuid, dir: entry.dir, outcome: 'unreadable', detail: (e as Error).message }));
    const level = r.outcome === 'adopted' || r.outcome === 'stopped' ? 'info' : 'warn';
    host.log[level]({ instance: r.uuid, outcome: r.outcome, pid: r.pid, runState: r.runState, task: r.task, detail: r.detail }, `instance ${r.outcome}`);
    out.push(r);
  }
  return out;
}
