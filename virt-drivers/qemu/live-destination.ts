/**
 * The destination's half of a live migration: the pre-check, a paused twin of the instance
 * waiting for its state (`-incoming defer` + `migrate-incoming`) and, when it has a disk, an NBD
 * export the source mirrors the disk into; then making the received instance an ordinary one, or
 * removing it after a failure.
 *
 * Ports: the NBD server and the incoming migration listen on `migration_listen_address`, each on
 * the first free port of `migration_port_range` (QEMU binds; a busy port is skipped), so there is
 * no bind-and-release race. The source connects to `live_migration_inbound_addr` (or the listen
 * address, or the name the migration gives this host when listening on a wildcard).
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DriverError, InstanceExistsError, InstanceStateError, MigrationPreCheckError } from '../errors';
import type { HostRef, InstanceRef, InstanceSpec, LiveMigrateData } from '../types';
import { DISK_DRIVE_ID } from './cmdline';
import { checkSpec, type QemuHost, unplugAllQuietly } from './context';
import { QmpCommandError } from './errors';
import { instancePaths, writeRecord, type InstanceRecord } from './instance-files';
import type { Managed } from './instances';
import { activeInstance, createInstanceDir } from './lifecycle';
import { boolField, intField, optStringField, tcpUri, vmField } from './live-data';
import type { QemuVm } from './vm';

const PROBE_PREFIX = '.compute-agent-shared-check-';
const PROBE_MAX_AGE_MS = 10 * 60 * 1000;

/** Removes shared-storage probe files older than ten minutes (a pre-check that went no further). */
export async function sweepProbes(host: QemuHost): Promise<void> {
  const dir = host.opts.instancesPath;
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names.filter((n) => n.startsWith(PROBE_PREFIX))) {
    const s = await stat(join(dir, name)).catch(() => undefined);
    if (s && host.clock.now() - s.mtimeMs > PROBE_MAX_AGE_MS) await rm(join(dir, name), { force: true });
  }
}

async function removeProbe(host: QemuHost, data: LiveMigrateData): Promise<void> {
  const name = data.filename;
  if (typeof name === 'string' && name.startsWith(PROBE_PREFIX) && !name.includes('/')) await rm(join(host.opts.instancesPath, name), { force: true });
}

/** Destination pre-check; writes the shared-storage probe file. @throws MigrationPreCheckError */
export async function checkCanLiveMigrateDestination(host: QemuHost, spec: InstanceSpec, source: HostRef): Promise<LiveMigrateData> {
  if (host.table.active.has(spec.uuid)) throw new MigrationPreCheckError(`instance ${spec.uuid} is already on host ${host.opts.host}`);
  const facts = host.facts();
  if (spec.image_ref !== undefined) {
    await host.images.resolve(spec.image_ref).catch((e: unknown) => {
      throw new MigrationPreCheckError(`host ${host.opts.host} cannot take instance ${spec.uuid}: ${(e as Error).message}`, { cause: e });
    });
  }
  await mkdir(host.opts.instancesPath, { recursive: true, mode: 0o750 });
  await sweepProbes(host);
  const filename = `${PROBE_PREFIX}${randomUUID()}`;
  await writeFile(join(host.opts.instancesPath, filename), `${source.host}\n`);
  const v = facts.version;
  return { driver: 'qemu', dest_host: host.opts.host, dest_accel: facts.accel.accel, dest_qemu_version: `${v.major}.${v.minor}.${v.micro}`, filename };
}

const BUSY = /Address already in use|Failed to find an available port/i;

/** Runs `bind(port)` on the first port of the range it succeeds on, skipping `skip`. @throws the last error */
async function onFreePort(host: QemuHost, skip: number | undefined, bind: (port: number) => Promise<unknown>): Promise<number> {
  const { min, max } = host.opts.migrationPorts;
  for (let port = min; port <= max; port++) {
    if (port === skip) continue;
    try {
      await bind(port);
      return port;
    } catch (e) {
      if (!(e instanceof QmpCommandError && BUSY.test(e.desc))) throw e;
    }
  }
  throw new DriverError(`no free port in [qemu] migration_port_range ${min}-${max}`);
}

/** The address the source should connect to. */
function inboundAddress(host: QemuHost): string {
  const listen = host.opts.migrationListenAddress;
  if (host.opts.inboundAddress) return host.opts.inboundAddress;
  if (listen !== '0.0.0.0' && listen !== '::') return listen;
  return host.opts.host;
}

/** Starts listening for the disk copy and the VM state on a started incoming twin. */
async function listen(host: QemuHost, vm: QemuVm, disk: boolean): Promise<LiveMigrateData> {
  const addr = host.opts.migrationListenAddress;
  const target = inboundAddress(host);
  let nbdPort: number | undefined;
  if (disk) {
    nbdPort = await onFreePort(host, undefined, (port) => vm.execute('nbd-server-start', { addr: { type: 'inet', data: { host: addr, port: String(port) } } }));
    await vm.execute('nbd-server-add', { device: DISK_DRIVE_ID, writable: true });
  }
  const port = await onFreePort(host, nbdPort, (p) => vm.execute('migrate-incoming', { uri: tcpUri(addr, p) }));
  return {
    target_connect_addr: target,
    migrate_uri: tcpUri(target, port),
    nbd_host: disk ? target : null,
    nbd_port: nbdPort ?? null,
    nbd_export: disk ? DISK_DRIVE_ID : null,
  };
}

/** Destination: starts the paused twin and listens; on failure nothing is left. @throws InstanceExistsError, MigrationDataError, ImageError, VmStartError, DriverError (no free port) */
export async function preLiveMigration(host: QemuHost, spec: InstanceSpec, data: LiveMigrateData): Promise<LiveMigrateData> {
  checkSpec(spec);
  await removeProbe(host, data);
  const def = vmField(data);
  const blockMigration = boolField(data, 'block_migration');
  if (blockMigration !== def.disk) throw new DriverError(`instance ${spec.uuid}: block_migration is ${blockMigration} but the instance ${def.disk ? 'has' : 'has no'} disk`);
  const imageRef = optStringField(data, 'image_ref') ?? spec.image_ref ?? null;
  const diskBytes = def.disk ? intField(data, 'disk_virtual_size') : 0;
  return host.table.withLock(spec.uuid, async () => {
    if (host.table.active.has(spec.uuid)) throw new InstanceExistsError(spec.uuid);
    const dir = await createInstanceDir(host, spec.uuid);
    const paths = instancePaths(dir);
    let m: Managed | undefined;
    try {
      if (def.disk && !imageRef) throw new DriverError(`instance ${spec.uuid}: its disk has no image to sit on (image_ref missing)`);
      const image = def.disk && imageRef ? await host.images.resolve(imageRef) : null;
      if (image) await host.images.createOverlayBytes(paths.disk, image, diskBytes);
      const rec: InstanceRecord = {
        uuid: spec.uuid,
        name: spec.name,
        host: host.opts.host,
        flavor: spec.flavor,
        imageRef,
        image: image && { path: image.path, format: image.format },
        vm: def,
        power: 'running',
        task: 'incoming',
        migration: null,
        process: null,
        lastExit: null,
        vifs: spec.network_info ?? [], // the destination binding's VIFs, plugged before QEMU starts
      };
      await writeRecord(dir, rec);
      m = { rec, paths };
      host.table.active.set(spec.uuid, m);
      const vm = await host.table.start(m, { incoming: true });
      const listening = await listen(host, vm, def.disk);
      host.log.info({ instance: spec.uuid, migrate_uri: listening.migrate_uri, nbd_port: listening.nbd_port }, 'waiting for the incoming live migration');
      return { ...data, ...listening };
    } catch (e) {
      if (m) await host.table.stop(m, 0).catch(() => undefined);
      host.table.active.delete(spec.uuid);
      await unplugAllQuietly(host, spec.uuid, spec.network_info ?? []);
      await rm(dir, { recursive: true, force: true });
      throw e;
    }
  });
}

/** Destination, after success: the received instance becomes an ordinary one; idempotent. @throws InstanceNotFoundError, InstanceStateError */
export async function postLiveMigrationAtDestination(host: QemuHost, ref: InstanceRef, _data: LiveMigrateData): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = activeInstance(host, ref);
    if (m.rec.task === null) return; // done already
    if (m.rec.task !== 'incoming') throw new InstanceStateError(ref.uuid, m.rec.task, 'finish an incoming live migration');
    const vm = m.vm;
    if (!vm || !(await vm.alive())) throw new InstanceStateError(ref.uuid, 'gone', 'finish an incoming live migration');
    const state = await receivedState(host, ref.uuid, vm);
    if (state === 'inmigrate') throw new InstanceStateError(ref.uuid, 'still receiving', 'finish an incoming live migration');
    if (m.rec.vm.disk) await vm.execute('nbd-server-stop').catch(() => undefined);
    // QEMU announced the guest (RARP, and the guest's own gratuitous ARP) as it started running
    // here; that is what lets OVN pass the destination port's traffic. Announcing again, for
    // switches that learnt the old path late, is nova's opt-in workaround: each round interrupts
    // the guest, for nothing on a network that already follows it.
    const again = host.opts.announceAfterLiveMigration;
    if (again && m.rec.vm.nics?.length) await announceAgain(host, ref, vm, again);
    // A guest that left paused arrives paused (QEMU carries the run state across).
    await host.table.save(m, { task: null, power: state === 'paused' ? 'paused' : 'running' });
    host.log.info({ instance: ref.uuid, runState: state }, 'live migration received');
  });
}

/** How often the destination looks whether QEMU has loaded the last of the guest's state. */
const RECEIVED_POLL_MS = 50;

/**
 * The run state once QEMU has loaded the incoming state, or 'inmigrate' if it has not within
 * `[qemu] qmp_command_timeout`. The source sees its migration complete when it has sent the last
 * bytes; the destination may still be loading them (seconds on a busy TCG host), so finishing
 * waits rather than fail a migration that has in fact succeeded.
 */
async function receivedState(host: QemuHost, uuid: string, vm: QemuVm): Promise<string> {
  let state = await vm.runState();
  if (state !== 'inmigrate') return state;
  const started = host.clock.now();
  while (state === 'inmigrate' && host.clock.now() - started < host.opts.qmpTimeoutMs) {
    await host.clock.sleep(RECEIVED_POLL_MS);
    state = await vm.runState();
  }
  host.log.info({ instance: uuid, waited_ms: host.clock.now() - started, runState: state }, 'waited for QEMU to load the incoming state');
  return state;
}

/** Has QEMU announce the guest `count` times, `intervalMs` apart; best effort, as nova's workaround. */
async function announceAgain(host: QemuHost, ref: InstanceRef, vm: QemuVm, again: { readonly count: number; readonly intervalMs: number }): Promise<void> {
  for (let i = 0; i < again.count; i++) {
    if (i > 0) await host.clock.sleep(again.intervalMs);
    try {
      await vm.execute('announce-self', { initial: 50, max: 550, rounds: 5, step: 100 });
    } catch (e) {
      host.log.warn({ instance: ref.uuid, reason: (e as Error).message }, 'announce-self failed');
      return;
    }
  }
}

/** Destination, after failure: removes the twin and its files; idempotent. @throws the fs error */
export async function rollbackLiveMigrationAtDestination(host: QemuHost, ref: InstanceRef, data: LiveMigrateData): Promise<void> {
  await removeProbe(host, data);
  await host.table.withLock(ref.uuid, async () => {
    const m = host.table.active.get(ref.uuid);
    if (!m || m.rec.task !== 'incoming') return;
    await host.table.stop(m, 0);
    host.table.active.delete(ref.uuid);
    await unplugAllQuietly(host, ref.uuid, m.rec.vifs ?? []);
    await rm(m.paths.dir, { recursive: true, force: true });
    host.log.info({ instance: ref.uuid }, 'incoming live migration rolled back');
  });
}
