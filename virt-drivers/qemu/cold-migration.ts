/**
 * Cold migration and resize, nova's four steps:
 * 1. source `migrateDiskAndPowerOff`: clean power off (ACPI, then hard after `shutdown_timeout`), its VIFs unplugged,
 *    the instance directory renamed `<uuid>_resize` (kept until confirm or revert; the name frees
 *    `<uuid>` for a resize to the same host), and a `diskInfo` saying where the files are;
 * 2. destination `finishMigration`: fetches the files (`disk-transfer.ts`) into a staging
 *    directory, re-points the overlay at this host's copy of the image, grows it to the new
 *    flavor, writes a new record, renames the staging directory `<uuid>` and starts the VM;
 * 3. source `confirmMigration`: deletes `<uuid>_resize`; or
 * 4. source `finishRevertMigration` (after the destination's `destroy`): renames it back and
 *    starts it from its own, unchanged disk.
 *
 * `diskInfo` (JSON, version 1): `{version, driver: "qemu", instance, migration, source: {host,
 * dir}, files: [...], disk: {file, virtual_size, image_ref, backing_format} | null}`; `dir` is the
 * absolute path of `<uuid>_resize` on the source. A cold migration reboots the guest; disk
 * contents move, memory does not.
 */
import { mkdir, rename, rm } from 'node:fs/promises';
import { DriverError, InstanceExistsError, InstanceNotFoundError, InstanceStateError } from '../errors';
import type { Flavor, InstanceRef, InstanceSpec, MigrateDiskResult, MigrationRef } from '../types';
import { checkSpec, newDefinition, type QemuHost, unplugAllQuietly } from './context';
import { fetchInstanceFiles } from './disk-transfer';
import { MigrationDataError } from './errors';
import { instanceDirs, instancePaths, readRecord, writeRecord, type InstanceRecord } from './instance-files';
import type { Managed } from './instances';
import { settledInstance } from './lifecycle';

const GIB = 1024 * 1024 * 1024;

/** The `diskInfo` of a qemu cold migration, version 1 (see the module comment). */
export interface ColdDiskInfo {
  readonly version: 1;
  readonly driver: 'qemu';
  readonly instance: string;
  readonly migration: string;
  readonly source: { readonly host: string; readonly dir: string };
  readonly files: readonly string[];
  readonly disk: { readonly file: string; readonly virtual_size: number; readonly image_ref: string | null; readonly backing_format: 'raw' | 'qcow2' | null } | null;
}

/** Decodes and checks `diskInfo`. @throws MigrationDataError naming the bad field */
export function parseDiskInfo(text: string): ColdDiskInfo {
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new MigrationDataError('diskInfo', 'JSON written by the qemu driver');
  }
  if (d.version !== 1 || d.driver !== 'qemu') throw new MigrationDataError('diskInfo.version', 'version 1 of the qemu driver');
  const str = (v: unknown, f: string): string => {
    if (typeof v !== 'string' || v === '') throw new MigrationDataError(`diskInfo.${f}`, 'a non-empty string');
    return v;
  };
  const source = (d.source ?? {}) as Record<string, unknown>;
  const files = d.files;
  if (!Array.isArray(files) || !files.every((f) => typeof f === 'string' && /^[A-Za-z0-9._-]+$/.test(f))) throw new MigrationDataError('diskInfo.files', 'a list of file names');
  const disk = d.disk as Record<string, unknown> | null | undefined;
  if (disk !== null && (typeof disk !== 'object' || disk === undefined || typeof disk.virtual_size !== 'number')) throw new MigrationDataError('diskInfo.disk', 'null or {file, virtual_size, image_ref, backing_format}');
  return {
    version: 1,
    driver: 'qemu',
    instance: str(d.instance, 'instance'),
    migration: str(d.migration, 'migration'),
    source: { host: str(source.host, 'source.host'), dir: str(source.dir, 'source.dir') },
    files: files as string[],
    disk: disk && {
      file: str(disk.file, 'disk.file'),
      virtual_size: disk.virtual_size as number,
      image_ref: typeof disk.image_ref === 'string' ? disk.image_ref : null,
      backing_format: disk.backing_format === 'raw' || disk.backing_format === 'qcow2' ? disk.backing_format : null,
    },
  };
}

/** Source: powers off, keeps the files as `<uuid>_resize`, returns `diskInfo`. @throws InstanceNotFoundError, InstanceStateError, DriverError (disk would shrink) */
export async function migrateDiskAndPowerOff(host: QemuHost, ref: InstanceRef, migration: MigrationRef, flavor: Flavor): Promise<MigrateDiskResult> {
  return host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'migrate');
    const { resized } = instanceDirs(host.opts.instancesPath, ref.uuid);
    if (host.table.resized.has(ref.uuid)) throw new InstanceStateError(ref.uuid, 'resized-away already', 'migrate');
    const size = m.rec.vm.disk ? (await host.images.info(m.paths.disk)).virtualSize : 0;
    if (m.rec.vm.disk && flavor.root_gb > 0 && flavor.root_gb * GIB < size) {
      throw new DriverError(`instance ${ref.uuid}: cannot resize its disk down from ${(size / GIB).toFixed(1)} GiB to ${flavor.root_gb} GiB`);
    }
    const how = await host.table.stop(m, host.opts.shutdownTimeoutMs);
    // As nova's migrate_disk_and_power_off: the VIFs leave this host with the guest (the
    // destination plugs them once their binding moved; a revert plugs them here again).
    await unplugAllQuietly(host, ref.uuid, m.rec.vifs ?? []);
    await rename(m.paths.dir, resized);
    host.table.active.delete(ref.uuid);
    const moved: Managed = { rec: m.rec, paths: instancePaths(resized) };
    host.table.resized.set(ref.uuid, moved);
    await host.table.save(moved, { task: 'resized-away', migration: migration.uuid });
    const info: ColdDiskInfo = {
      version: 1,
      driver: 'qemu',
      instance: ref.uuid,
      migration: migration.uuid,
      source: { host: host.opts.host, dir: resized },
      files: ['instance.json', 'console.log', ...(m.rec.vm.disk ? ['disk.qcow2'] : [])],
      disk: m.rec.vm.disk ? { file: 'disk.qcow2', virtual_size: size, image_ref: m.rec.imageRef, backing_format: m.rec.image?.format ?? null } : null,
    };
    host.log.info({ instance: ref.uuid, migration: migration.uuid, dest: migration.dest.host, stopped: how }, 'instance powered off for cold migration; files kept until confirm');
    return { diskInfo: JSON.stringify(info) };
  });
}

/** Destination: fetches the files, adapts the disk, starts the instance. @throws InstanceExistsError, MigrationDataError, DiskTransferError, ImageError, VmStartError */
export async function finishMigration(host: QemuHost, spec: InstanceSpec, migration: MigrationRef, disk: MigrateDiskResult, powerOn: boolean): Promise<void> {
  checkSpec(spec);
  const info = parseDiskInfo(disk.diskInfo);
  if (info.instance !== spec.uuid) throw new MigrationDataError('diskInfo.instance', spec.uuid);
  if (info.migration !== migration.uuid) throw new MigrationDataError('diskInfo.migration', migration.uuid);
  await host.table.withLock(spec.uuid, async () => {
    if (host.table.active.has(spec.uuid)) throw new InstanceExistsError(spec.uuid);
    const dirs = instanceDirs(host.opts.instancesPath, spec.uuid);
    await rm(dirs.staging, { recursive: true, force: true });
    await mkdir(dirs.staging, { recursive: true, mode: 0o750 });
    let m: Managed | undefined;
    try {
      const t0 = host.clock.now();
      const fetchReq = { uuid: spec.uuid, migration: migration.uuid, sourceDir: info.source.dir, sourceAddress: migration.source.address ?? migration.source.host, files: info.files, into: dirs.staging };
      const via = await fetchInstanceFiles(host.exec, host.opts.coldTransport, fetchReq);
      const fetched = await readRecord(dirs.staging).catch(() => undefined);
      if (fetched?.uuid !== spec.uuid || fetched.migration !== migration.uuid) throw new MigrationDataError('diskInfo.source.dir', `the source copy of ${spec.uuid} for migration ${migration.uuid}`);
      const stagedDisk = instancePaths(dirs.staging).disk;
      let image = null;
      if (info.disk) {
        const ref = info.disk.image_ref ?? spec.image_ref;
        if (!ref) throw new MigrationDataError('diskInfo.disk.image_ref', 'the image the disk sits on');
        image = await host.images.resolve(ref);
        if ((await host.images.info(stagedDisk)).backingFile !== image.path) await host.images.rebase(stagedDisk, image);
        await host.images.growTo(stagedDisk, spec.flavor.root_gb);
      }
      const rec: InstanceRecord = {
        uuid: spec.uuid,
        name: spec.name,
        host: host.opts.host,
        flavor: spec.flavor,
        imageRef: info.disk?.image_ref ?? spec.image_ref ?? null,
        image: image && { path: image.path, format: image.format },
        vm: newDefinition(host, spec, info.disk !== null),
        power: powerOn ? 'running' : 'stopped',
        task: null,
        migration: null,
        process: null,
        lastExit: null,
        vifs: spec.network_info ?? [],
      };
      await writeRecord(dirs.staging, rec);
      await rename(dirs.staging, dirs.active);
      m = { rec, paths: instancePaths(dirs.active) };
      host.table.active.set(spec.uuid, m);
      if (powerOn) await host.table.start(m);
      host.log.info({ instance: spec.uuid, migration: migration.uuid, source: migration.source.host, via, ms: host.clock.now() - t0 }, 'cold-migrated instance finished here');
    } catch (e) {
      if (m) await host.table.stop(m, 0).catch(() => undefined);
      host.table.active.delete(spec.uuid);
      if (m) await unplugAllQuietly(host, spec.uuid, spec.network_info ?? []);
      await rm(dirs.staging, { recursive: true, force: true });
      if (m) await rm(dirs.active, { recursive: true, force: true });
      throw e;
    }
  });
}

/** Source: deletes the kept copy; idempotent. @throws the fs error */
export async function confirmMigration(host: QemuHost, ref: InstanceRef, migration: MigrationRef): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = host.table.resized.get(ref.uuid);
    if (!m) return;
    if (m.rec.migration !== migration.uuid) host.log.warn({ instance: ref.uuid, migration: migration.uuid, kept_for: m.rec.migration }, 'confirming a migration other than the one the source copy was kept for');
    await host.table.stop(m, 0);
    host.table.resized.delete(ref.uuid);
    await rm(m.paths.dir, { recursive: true, force: true });
    host.log.info({ instance: ref.uuid, migration: migration.uuid }, 'cold migration confirmed; source copy deleted');
  });
}

/** Source: brings the kept copy back and starts it; idempotent. @throws InstanceNotFoundError, InstanceStateError (the migrated copy is still here), VmStartError */
export async function finishRevertMigration(host: QemuHost, ref: InstanceRef, migration: MigrationRef, powerOn: boolean): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const kept = host.table.resized.get(ref.uuid);
    if (!kept) {
      if (host.table.active.get(ref.uuid)?.rec.task === null) return; // reverted already
      throw new InstanceNotFoundError(ref.uuid);
    }
    if (host.table.active.has(ref.uuid)) throw new InstanceStateError(ref.uuid, 'present here (destroy the migrated copy first)', 'revert a migration');
    const { active } = instanceDirs(host.opts.instancesPath, ref.uuid);
    await rename(kept.paths.dir, active);
    host.table.resized.delete(ref.uuid);
    const m: Managed = { rec: kept.rec, paths: instancePaths(active) };
    host.table.active.set(ref.uuid, m);
    await host.table.save(m, { task: null, migration: null, power: powerOn ? 'running' : 'stopped' });
    if (powerOn) await host.table.start(m);
    host.log.info({ instance: ref.uuid, migration: migration.uuid, powerOn }, 'cold migration reverted; instance back on its own disk');
  });
}
