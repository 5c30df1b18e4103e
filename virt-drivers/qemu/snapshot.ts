/**
 * A snapshot of a QEMU instance's root disk, as nova's libvirt driver takes one for Glance: one
 * qcow2 with no backing file (the image's layers and the instance's writes merged), consistent as
 * of one instant.
 *
 * - A guest with a QEMU process (running or paused) keeps running: QMP `blockdev-backup` with
 *   `sync: full` copies the disk as it was when the job started (QEMU copies a block aside before
 *   the guest overwrites it), into a blank qcow2 the driver made; zeros are not stored.
 * - A guest without one (stopped, suspended) has its disk flattened with `qemu-img convert`.
 *
 * The copy is made under the instance's lock, in `<instances_path>/snapshots/`, then handed to the
 * caller's upload outside the lock (an upload of many GiB must not hold power operations back),
 * and removed afterwards whatever the upload did. An agent killed in the middle leaves a copy, and
 * perhaps a copy job still running in QEMU: the driver's start removes both (`sweepSnapshots`).
 *
 * Quiesce: a running guest with a guest agent (its image's `hw_qemu_guest_agent`) has its
 * filesystems frozen (`guest-fsfreeze-freeze`) before the copy job starts and thawed as soon as it
 * has started: the job's point in time is its start, so the guest is frozen for one QMP round
 * trip, not for the copy. A guest that cannot be quiesced (no agent, a paused guest, an agent that
 * does not answer) is copied as it is, logged, unless `requireQuiesce` (the image's
 * `os_require_quiesce`): then the snapshot fails, as nova's libvirt driver fails it.
 *
 * Not here: Glance (the caller uploads).
 */
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { SnapshotImage } from '../driver';
import { DriverError, NotSupportedError } from '../errors';
import type { InstanceRef } from '../types';
import { DISK_DRIVE_ID } from './cmdline';
import type { QemuHost } from './context';
import { freezeFilesystems, thawFilesystems } from './guest-agent';
import type { Managed } from './instances';
import { settledInstance } from './lifecycle';
import type { QemuVm } from './vm';

const JOB_POLL_MS = 100;
/** Every copy job and its target node are named with this prefix (`sweepSnapshots` finds them by it). */
const JOB_PREFIX = 'snapshot-';
/** How long a copy may take (a disk of many GiB under load). */
const JOB_TIMEOUT_MS = 30 * 60_000;

interface JobInfo {
  readonly id?: unknown;
  readonly status?: unknown;
  readonly error?: unknown;
}

/**
 * Copies the running guest's root disk into `out` (a blank qcow2 of the disk's size) as of now;
 * `started` runs once the copy's point in time is fixed (the job started), whether it did or not.
 * @throws DriverError
 */
async function backupRunning(host: QemuHost, vm: QemuVm, uuid: string, out: string, started: () => Promise<void>): Promise<void> {
  const job = `${JOB_PREFIX}${randomUUID().slice(0, 8)}`;
  const node = `${job}-target`;
  await vm.execute('blockdev-add', { driver: 'qcow2', 'node-name': node, file: { driver: 'file', filename: out } }).catch(async (e: unknown) => {
    await started();
    throw e;
  });
  try {
    try {
      await vm.execute('blockdev-backup', { 'job-id': job, device: DISK_DRIVE_ID, target: node, sync: 'full', 'auto-dismiss': false });
    } finally {
      await started();
    }
    const until = host.clock.now() + JOB_TIMEOUT_MS;
    for (;;) {
      const jobs = (await vm.execute('query-jobs')) as JobInfo[];
      const mine = jobs.find((j) => j.id === job);
      if (mine?.status === 'concluded') {
        await vm.execute('job-dismiss', { id: job });
        if (typeof mine.error === 'string') throw new DriverError(`instance ${uuid}: copying the disk failed: ${mine.error}`);
        return;
      }
      if (!mine) throw new DriverError(`instance ${uuid}: the disk copy job ${job} vanished`);
      if (host.clock.now() > until) {
        await vm.execute('job-cancel', { id: job }).catch(() => undefined);
        throw new DriverError(`instance ${uuid}: copying the disk took more than ${JOB_TIMEOUT_MS / 1000} s`);
      }
      await host.clock.sleep(JOB_POLL_MS);
    }
  } finally {
    await vm.execute('blockdev-del', { 'node-name': node }).catch(() => undefined);
  }
}

/**
 * Copies the instance's root disk as of now and hands the copy to `upload`; the copy is removed
 * afterwards. @throws InstanceNotFoundError, InstanceStateError (in a move), NotSupportedError (no
 * root disk), DriverError, InstanceFilesError, what `upload` threw
 */
export async function snapshot(host: QemuHost, ref: InstanceRef, upload: (image: SnapshotImage) => Promise<void>, requireQuiesce = false): Promise<void> {
  const dir = join(host.opts.instancesPath, 'snapshots');
  const out = join(dir, `${ref.uuid}-${randomUUID().slice(0, 8)}.qcow2`);
  try {
    await host.table.withLock(ref.uuid, async () => {
      const m = settledInstance(host, ref, 'snapshot');
      if (!m.rec.vm.disk) throw new NotSupportedError('qemu', 'a snapshot of an instance without a local root disk (booted from a volume)');
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const t0 = host.clock.now();
      const vm = m.vm && (await m.vm.alive()) ? m.vm : undefined;
      let quiesced = false;
      if (vm) {
        await host.images.createBlank(out, (await host.images.info(m.paths.disk)).virtualSize);
        quiesced = await quiesce(host, m, vm, requireQuiesce);
        await backupRunning(host, vm, ref.uuid, out, () => (quiesced ? thaw(host, m) : Promise.resolve()));
      } else {
        if (requireQuiesce) throw new DriverError(`instance ${ref.uuid}: os_require_quiesce is set, and a guest that is not running cannot be quiesced`);
        await host.images.flatten(m.paths.disk, out);
      }
      host.log.info({ instance: ref.uuid, live: vm !== undefined, quiesced, bytes: (await stat(out)).size, ms: host.clock.now() - t0 }, 'root disk copied for a snapshot');
    });
    const bytes = (await stat(out)).size;
    await upload({ data: createReadStream(out), bytes, diskFormat: 'qcow2' });
  } finally {
    await rm(out, { force: true });
  }
}

/**
 * Freezes the guest's filesystems through its agent; resolves whether it did. A guest that cannot
 * be quiesced is copied as it is (logged), unless `required`. @throws DriverError when required and impossible
 */
async function quiesce(host: QemuHost, m: Managed, vm: QemuVm, required: boolean): Promise<boolean> {
  const uuid = m.rec.uuid;
  let why: string;
  if (!m.rec.vm.guestAgent) why = 'its image asks for no guest agent (hw_qemu_guest_agent)';
  else if ((await vm.runState()) !== 'running') why = 'the guest is not running';
  else {
    try {
      const n = await freezeFilesystems(uuid, m.paths.guestAgent, host.opts.qmpTimeoutMs);
      host.log.info({ instance: uuid, filesystems: n }, 'guest filesystems frozen for a snapshot');
      return true;
    } catch (e) {
      why = (e as Error).message;
    }
  }
  if (required) throw new DriverError(`instance ${uuid}: os_require_quiesce is set and the guest cannot be quiesced: ${why}`);
  host.log.info({ instance: uuid, reason: why }, 'snapshot of a guest not quiesced');
  return false;
}

/** Thaws the guest's filesystems, trying three times: a guest left frozen stops writing. @throws DriverError */
async function thaw(host: QemuHost, m: Managed): Promise<void> {
  let last: unknown;
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      await thawFilesystems(m.rec.uuid, m.paths.guestAgent, host.opts.qmpTimeoutMs);
      host.log.info({ instance: m.rec.uuid }, 'guest filesystems thawed');
      return;
    } catch (e) {
      last = e;
      host.log.warn({ instance: m.rec.uuid, attempt, reason: (e as Error).message }, 'thawing the guest filesystems failed');
    }
  }
  throw new DriverError(`instance ${m.rec.uuid}: its filesystems stay frozen: ${(last as Error).message}`, { cause: last });
}

/**
 * What a snapshot interrupted by the agent's death left: copy jobs still running (or concluded) in
 * adopted guests, their target nodes, and the copies in `<instances_path>/snapshots/`. Run by the
 * driver's start, before any snapshot can run; a guest that does not answer is logged and skipped.
 */
export async function sweepSnapshots(host: QemuHost): Promise<void> {
  for (const [uuid, m] of host.table.active) {
    const vm = m.vm && (await m.vm.alive()) ? m.vm : undefined;
    if (!vm) continue;
    try {
      const jobs = ((await vm.execute('query-jobs')) as JobInfo[]).filter((j) => typeof j.id === 'string' && j.id.startsWith(JOB_PREFIX));
      for (const j of jobs) {
        const id = j.id as string;
        if (j.status !== 'concluded') await vm.execute('job-cancel', { id }).catch(() => undefined);
        await waitConcluded(host, vm, id);
        await vm.execute('job-dismiss', { id }).catch(() => undefined);
        await vm.execute('blockdev-del', { 'node-name': `${id}-target` }).catch(() => undefined);
        host.log.info({ instance: uuid, job: id }, 'the disk copy of an interrupted snapshot cancelled');
      }
    } catch (e) {
      host.log.warn({ instance: uuid, reason: (e as Error).message }, 'could not look for the copy jobs of an interrupted snapshot');
    }
  }
  const dir = join(host.opts.instancesPath, 'snapshots');
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) await rm(join(dir, name), { force: true, recursive: true });
  if (names.length) host.log.info({ files: names.length }, 'copies of interrupted snapshots removed');
}

/** Waits (a few seconds at most) until job `id` has concluded after a cancel. */
async function waitConcluded(host: QemuHost, vm: QemuVm, id: string): Promise<void> {
  const until = host.clock.now() + 10_000;
  while (host.clock.now() < until) {
    const jobs = (await vm.execute('query-jobs')) as JobInfo[];
    const job = jobs.find((j) => j.id === id);
    if (!job || job.status === 'concluded') return;
    await host.clock.sleep(JOB_POLL_MS);
  }
}
