/**
 * Spawn, destroy, power on/off and reboot of QEMU instances, following nova's libvirt driver:
 * a clean power off presses the ACPI button and waits `shutdown_timeout` before stopping hard;
 * destroy stops hard at once; a soft reboot is a clean power off and a start (falling back to
 * hard when the guest ignores ACPI for `wait_soft_reboot_seconds`); a hard reboot is a new QEMU process from the record.
 *
 * The console output is the serial port's log (`console.log`), its last `CONSOLE_MAX_BYTES`.
 *
 * Every operation that changes an instance holds the instance's lock. A failed spawn leaves nothing: the process is
 * stopped, the VIFs unplugged and the directory removed. Every start (spawn, power on, reboot) plugs the
 * recorded VIFs first (`InstanceTable.beforeStart`), without waiting for Neutron's events, as nova does.
 */
import { mkdir, open, rm } from 'node:fs/promises';
import { InstanceExistsError, InstanceNotFoundError, InstanceStateError } from '../errors';
import type { PowerOffOptions } from '../driver';
import type { InstanceRef, InstanceSpec } from '../types';
import { checkSpec, newDefinition, plugAll, unplugAllQuietly, type QemuHost } from './context';
import { instanceDirs, instancePaths, writeRecord, type InstanceRecord } from './instance-files';
import type { Managed } from './instances';
import type { ResolvedImage } from './images';

/** The active instance, or InstanceNotFoundError. */
export function activeInstance(host: QemuHost, ref: InstanceRef): Managed {
  const m = host.table.active.get(ref.uuid);
  if (!m) throw new InstanceNotFoundError(ref.uuid);
  return m;
}

/** The active instance, not in the middle of a move. @throws InstanceNotFoundError, InstanceStateError */
export function settledInstance(host: QemuHost, ref: InstanceRef, operation: string): Managed {
  const m = activeInstance(host, ref);
  if (m.rec.task) throw new InstanceStateError(ref.uuid, m.rec.task, operation);
  if (m.outgoing) throw new InstanceStateError(ref.uuid, 'migrating', operation);
  return m;
}

/** Creates the instance directory; @throws InstanceExistsError when it is there already. */
export async function createInstanceDir(host: QemuHost, uuid: string): Promise<string> {
  const { active } = instanceDirs(host.opts.instancesPath, uuid);
  await mkdir(host.opts.instancesPath, { recursive: true, mode: 0o750 });
  try {
    await mkdir(active, { mode: 0o750 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new InstanceExistsError(uuid);
    throw e;
  }
  return active;
}

/**
 * Rebases an unshelved instance's new disk onto its own image `ref` (see `InstanceSpec.rebase_image_ref`);
 * resolves to that image, or null when it cannot be had (the disk keeps the snapshot under it, logged).
 */
async function onOwnImage(host: QemuHost, uuid: string, disk: string, ref: string): Promise<ResolvedImage | null> {
  try {
    const own = await host.images.resolve(ref);
    const t0 = host.clock.now();
    await host.images.rebaseKeepingData(disk, own);
    host.log.info({ instance: uuid, image: ref, ms: host.clock.now() - t0 }, 'unshelved disk rebased onto the instance’s own image');
    return own;
  } catch (e) {
    host.log.warn({ instance: uuid, image: ref, reason: e instanceof Error ? e.message : String(e) }, 'unshelved disk left on the shelved snapshot: its own image cannot be had; moves of it will need that snapshot');
    return null;
  }
}

/**
 * Creates and (with `powerOn`) starts an instance with its VIFs plugged; with `beforeRun`, QEMU
 * starts with the vCPUs stopped and `cont` runs them once `beforeRun` resolves. On failure
 * (`beforeRun`'s included) nothing is left: process stopped, VIFs unplugged, directory removed,
 * and the error rethrown as it came.
 * @throws InstanceExistsError, ImageError, VmStartError, VifPlugError, VifTypeNotSupportedError, DriverError, what `beforeRun` threw
 */
export async function spawn(host: QemuHost, spec: InstanceSpec, powerOn: boolean, beforeRun?: () => Promise<void>): Promise<void> {
  checkSpec(spec);
  await host.table.withLock(spec.uuid, async () => {
    if (host.table.active.has(spec.uuid)) throw new InstanceExistsError(spec.uuid);
    const dir = await createInstanceDir(host, spec.uuid);
    const paths = instancePaths(dir);
    let m: Managed | undefined;
    try {
      let image = spec.image_ref === undefined ? null : await host.images.resolve(spec.image_ref);
      if (image) await host.images.createOverlay(paths.disk, image, spec.flavor.root_gb);
      let imageRef = spec.image_ref ?? null;
      if (image && spec.rebase_image_ref !== undefined && spec.rebase_image_ref !== spec.image_ref) {
        const own = await onOwnImage(host, spec.uuid, paths.disk, spec.rebase_image_ref);
        if (own) [image, imageRef] = [own, spec.rebase_image_ref];
      }
      const rec: InstanceRecord = {
        uuid: spec.uuid,
        name: spec.name,
        host: host.opts.host,
        flavor: spec.flavor,
        imageRef,
        image: image && { path: image.path, format: image.format },
        vm: newDefinition(host, spec, image !== null),
        power: powerOn ? 'running' : 'stopped',
        task: null,
        migration: null,
        process: null,
        lastExit: null,
        vifs: spec.network_info ?? [],
      };
      await writeRecord(dir, rec);
      m = { rec, paths };
      host.table.active.set(spec.uuid, m);
      if (!powerOn) await plugAll(host, spec.uuid, rec.vifs ?? []);
      else if (!beforeRun) await host.table.start(m); // plugs first (beforeStart)
      else {
        const vm = await host.table.start(m, { paused: true });
        const t0 = host.clock.now();
        await beforeRun();
        await vm.execute('cont');
        host.log.info({ instance: spec.uuid, waited_ms: host.clock.now() - t0 }, 'guest resumed after beforeRun');
      }
      host.log.info({ instance: spec.uuid, image: image?.path ?? null, vcpus: rec.vm.vcpus, memory_mb: rec.vm.memoryMb, nics: rec.vm.nics?.length ?? 0, volumes: rec.vm.volumes?.map((v) => v.volumeId) ?? [], powerOn }, 'instance spawned');
    } catch (e) {
      if (m) await host.table.stop(m, 0).catch(() => undefined);
      host.table.active.delete(spec.uuid);
      await unplugAllQuietly(host, spec.uuid, spec.network_info ?? []);
      await rm(dir, { recursive: true, force: true });
      throw e;
    }
  });
}

/** Stops (hard) and deletes an instance; idempotent. @throws the fs error */
export async function destroy(host: QemuHost, ref: InstanceRef): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const { active, resized } = instanceDirs(host.opts.instancesPath, ref.uuid);
    const m = host.table.active.get(ref.uuid);
    // A cold-migration source copy goes only when it is all that is left of the instance here.
    const target = m ?? host.table.resized.get(ref.uuid);
    if (target) {
      await host.table.stop(target, 0);
      if (m) host.table.active.delete(ref.uuid);
      else host.table.resized.delete(ref.uuid);
      await unplugAllQuietly(host, ref.uuid, target.rec.vifs ?? []);
    }
    await rm(m || !target ? active : resized, { recursive: true, force: true });
    host.log.info({ instance: ref.uuid, found: target !== undefined }, 'instance destroyed');
  });
}

/** Starts a stopped instance; a running one is left alone. @throws InstanceNotFoundError, InstanceStateError, VmStartError */
export async function powerOn(host: QemuHost, ref: InstanceRef): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'power on');
    if (!(m.vm && (await m.vm.alive()))) await host.table.start(m);
    else await plugAll(host, ref.uuid, m.rec.vifs ?? []);
    await host.table.save(m, { power: 'running' });
  });
}

/** Stops an instance, cleanly within `timeoutSec` (default shutdown_timeout), else hard. @throws InstanceNotFoundError, InstanceStateError */
export async function powerOff(host: QemuHost, ref: InstanceRef, opts: PowerOffOptions): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'power off');
    const cleanMs = opts.timeoutSec === undefined ? host.opts.shutdownTimeoutMs : opts.timeoutSec * 1000;
    const how = await host.table.stop(m, cleanMs);
    await host.table.save(m, { power: 'stopped' });
    host.log.info({ instance: ref.uuid, how }, 'instance powered off');
  });
}

/** Restarts an instance: soft is a clean power off (within wait_soft_reboot_seconds, else hard) and a start, hard a new process. @throws InstanceNotFoundError, InstanceStateError, VmStartError */
export async function reboot(host: QemuHost, ref: InstanceRef, type: 'soft' | 'hard'): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, `${type} reboot`);
    if (type === 'soft') {
      const state = await host.table.powerState(m);
      if (state !== 'RUNNING') throw new InstanceStateError(ref.uuid, state, 'soft reboot');
    }
    const how = await host.table.stop(m, type === 'soft' ? host.opts.softRebootTimeoutMs : 0);
    if (type === 'soft' && how === 'hard') host.log.warn({ instance: ref.uuid }, 'the guest did not shut down within wait_soft_reboot_seconds; soft reboot done hard');
    // A hard reboot boots afresh: a suspended guest's saved state is dropped, as libvirt drops its managed save.
    await rm(m.paths.suspendState, { force: true });
    await host.table.start(m);
    await host.table.save(m, { power: 'running' });
  });
}

/** The most of the console log returned (nova libvirt's `MAX_CONSOLE_BYTES`). */
export const CONSOLE_MAX_BYTES = 100 * 1024;

/** The end of the instance's serial console log (empty before the guest wrote anything). @throws InstanceNotFoundError */
export async function consoleOutput(host: QemuHost, ref: InstanceRef): Promise<Buffer> {
  const m = activeInstance(host, ref);
  let f;
  try {
    f = await open(m.paths.console, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0);
    throw e;
  }
  try {
    const { size } = await f.stat();
    const length = Math.min(size, CONSOLE_MAX_BYTES);
    const buf = Buffer.alloc(length);
    const { bytesRead } = await f.read(buf, 0, length, size - length);
    return buf.subarray(0, bytesRead);
  } finally {
    await f.close();
  }
}
