/**
 * The source's half of a live migration: the pre-check (same accelerator, a destination QEMU no
 * older than ours, storage not shared), the migration itself (`live-run.ts`), its abort, and
 * removing the paused leftover once the destination runs the instance.
 *
 * A failed, aborted or timed-out migration leaves the instance running here: QEMU resumes a guest
 * it paused for switch-over when the migration fails, and this module checks and `cont`s it if
 * not. Shared instances_path is refused in the pre-check: the destination would create its disk
 * over the source's.
 */
import { access, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { InstanceStateError, MigrationPreCheckError } from '../errors';
import type { HostRef, InstanceRef, LiveMigrateData } from '../types';
import type { QemuHost } from './context';
import { LiveMigrationError, MigrationDataError } from './errors';
import { compareVersions } from './host';
import type { Managed } from './instances';
import { activeInstance, settledInstance } from './lifecycle';
import { intField, nbdTarget, stringField } from './live-data';
import { runLiveMigration } from './live-run';
import type { QemuVm } from './vm';

function parseVersion(v: string): { major: number; minor: number; micro: number } | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(v);
  return m ? { major: Number(m[1]), minor: Number(m[2]), micro: Number(m[3]) } : undefined;
}

async function fileExists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** Source pre-check; adds the instance's definition and disk to the data. @throws MigrationPreCheckError, MigrationDataError, InstanceNotFoundError, InstanceStateError */
export async function checkCanLiveMigrateSource(host: QemuHost, ref: InstanceRef, data: LiveMigrateData): Promise<LiveMigrateData> {
  const m = settledInstance(host, ref, 'live migrate');
  const state = await host.table.powerState(m);
  if (state !== 'RUNNING' && state !== 'PAUSED') throw new MigrationPreCheckError(`instance ${ref.uuid} is ${state}; only running or paused instances live migrate`);
  if (data.driver !== 'qemu') throw new MigrationPreCheckError(`the destination runs the ${String(data.driver)} driver, not qemu`);
  const filename = stringField(data, 'filename');
  if (!filename.includes('/') && (await fileExists(join(host.opts.instancesPath, filename)))) {
    throw new MigrationPreCheckError(
      `instances_path ${host.opts.instancesPath} is shared with ${String(data.dest_host)}; the qemu driver live-migrates with local storage only`,
    );
  }
  if (data.dest_accel !== m.rec.vm.accel) throw new MigrationPreCheckError(`instance ${ref.uuid} runs on ${m.rec.vm.accel} here, but ${String(data.dest_host)} uses ${String(data.dest_accel)}`);
  const mine = host.facts().version;
  const theirs = parseVersion(stringField(data, 'dest_qemu_version'));
  if (!theirs) throw new MigrationDataError('dest_qemu_version', 'major.minor.micro');
  if (compareVersions(theirs, mine) < 0) {
    throw new MigrationPreCheckError(`QEMU on ${String(data.dest_host)} (${String(data.dest_qemu_version)}) is older than here (${mine.major}.${mine.minor}.${mine.micro})`);
  }
  const diskBytes = m.rec.vm.disk ? (await host.images.info(m.paths.disk)).virtualSize : null;
  return {
    ...data,
    is_shared_instance_path: false,
    block_migration: m.rec.vm.disk,
    source_host: host.opts.host,
    source_qemu_version: `${mine.major}.${mine.minor}.${mine.micro}`,
    vm: JSON.stringify(m.rec.vm),
    image_ref: m.rec.imageRef,
    disk_virtual_size: diskBytes,
  };
}

/** Whether QEMU says the migration completed (the destination has the guest), whatever else failed. */
async function completedAnyway(vm: QemuVm): Promise<boolean> {
  try {
    const info = (await vm.execute('query-migrate')) as { status?: unknown };
    return info?.status === 'completed';
  } catch {
    return false;
  }
}

/**
 * After a failed migration: the guest runs again if it ran before. Never called when the
 * migration completed: resuming a guest the destination runs would run it twice. Whether its
 * QEMU is still there.
 */
async function ensureRunning(host: QemuHost, m: Managed, vm: QemuVm, wasRunning: boolean): Promise<boolean> {
  try {
    const state = await vm.runState();
    if (wasRunning && state !== 'running') {
      await vm.execute('cont');
      host.log.warn({ instance: m.rec.uuid, was: state }, 'resumed the instance after the failed live migration');
    }
  } catch (e) {
    host.log.error({ instance: m.rec.uuid, err: (e as Error).message }, 'cannot check the instance after the failed live migration');
  }
  return vm.alive();
}

/** Source: moves the running instance; resolves once the destination runs it. @throws LiveMigrationError (and subclasses), InstanceStateError, MigrationDataError */
export async function liveMigration(host: QemuHost, ref: InstanceRef, dest: HostRef, data: LiveMigrateData): Promise<void> {
  const migrateUri = stringField(data, 'migrate_uri');
  const nbd = nbdTarget(data);
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'live migrate');
    const vm = m.vm;
    if (!vm || !(await vm.alive())) throw new InstanceStateError(ref.uuid, 'not running', 'live migrate');
    if (m.rec.vm.disk !== (nbd !== undefined)) {
      throw new MigrationDataError('nbd_port', m.rec.vm.disk ? "the port of the destination's disk export" : 'null for an instance without a disk');
    }
    const diskBytes = nbd ? intField(data, 'disk_virtual_size') : 0;
    const wasRunning = (await vm.runState()) === 'running';
    const abort = new AbortController();
    m.outgoing = abort;
    try {
      await runLiveMigration(host, { uuid: ref.uuid, dest: dest.host, vm, migrateUri, ...(nbd ? { nbd } : {}), memoryMb: m.rec.vm.memoryMb, diskBytes, signal: abort.signal });
    } catch (e) {
      if (await completedAnyway(vm)) {
        host.log.warn({ instance: ref.uuid, dest: dest.host, err: (e as Error).message }, 'live migration completed despite an error on the way');
      } else {
        const running = await ensureRunning(host, m, vm, wasRunning);
        const err = running || !(e instanceof LiveMigrationError) ? e : new LiveMigrationError(ref.uuid, dest.host, 'the source QEMU went away', { cause: e }, false);
        host.log.warn({ instance: ref.uuid, dest: dest.host, err: (err as Error).message }, 'live migration failed');
        throw err;
      }
    } finally {
      delete m.outgoing;
    }
    // The guest now runs on the destination: a failure to write that down must not say otherwise.
    await host.table.save(m, { task: 'migrated-out' }).catch((e: unknown) => host.log.error({ instance: ref.uuid, err: (e as Error).message }, 'cannot record the completed live migration'));
  });
}

/** Source: cancels the running migration; `liveMigration` then rejects. @throws InstanceNotFoundError, InstanceStateError (nothing to abort) */
export async function liveMigrationAbort(host: QemuHost, ref: InstanceRef): Promise<void> {
  const m = activeInstance(host, ref);
  if (!m.outgoing) throw new InstanceStateError(ref.uuid, m.rec.task ?? 'not migrating', 'abort a live migration');
  m.outgoing.abort();
  await m.vm?.execute('migrate_cancel').catch(() => undefined);
}

/**
 * QEMU's largest downtime limit (ms): with it the next round of the copy stops the guest and sends
 * the rest, however much is left (nova's libvirt driver pauses the guest to the same end).
 */
const FORCE_DOWNTIME_MS = 2_000_000;

/** Source: the running migration finishes at its next round. @throws InstanceNotFoundError, InstanceStateError (none running) */
export async function liveMigrationForceComplete(host: QemuHost, ref: InstanceRef): Promise<void> {
  const m = activeInstance(host, ref);
  if (!m.outgoing || !m.vm) throw new InstanceStateError(ref.uuid, m.rec.task ?? 'not migrating', 'force a live migration to complete');
  await m.vm.execute('migrate-set-parameters', { 'downtime-limit': FORCE_DOWNTIME_MS });
}

/** Source, after success: stops the paused leftover and deletes its files; idempotent. @throws InstanceStateError (the migration did not complete) */
export async function postLiveMigration(host: QemuHost, ref: InstanceRef, _data: LiveMigrateData): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = host.table.active.get(ref.uuid);
    if (!m) return;
    // migrated-out, or (the agent restarted mid-migration and QEMU finished it alone) postmigrate.
    const finished = m.rec.task === 'migrated-out' || (m.rec.task === null && (await m.vm?.runState().catch(() => undefined)) === 'postmigrate');
    if (!finished) throw new InstanceStateError(ref.uuid, m.rec.task ?? 'not migrated', 'clean up after a live migration');
    await host.table.stop(m, 0);
    host.table.active.delete(ref.uuid);
    await rm(m.paths.dir, { recursive: true, force: true });
    host.log.info({ instance: ref.uuid }, 'live-migrated instance removed from the source');
  });
}
