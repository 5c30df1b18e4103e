/**
 * Pause, suspend and their undoing, and the crash-dump NMI, for QEMU instances, as nova's
 * libvirt driver does them:
 *
 * - pause / unpause: QMP `stop` / `cont`; the process and the guest's memory stay.
 * - suspend: libvirt's managed save. The vCPUs are stopped, QEMU's migration stream is written to
 *   the instance directory (`suspend.state`), and QEMU quits. The record says `suspended`, so the
 *   state is found again after an agent or host restart, and no process runs until resume.
 * - resume: QEMU starts from the record waiting for an incoming migration, reads the saved state,
 *   and runs on from where it stopped; the state file is removed only once the guest runs.
 * - crash dump: QMP `inject-nmi`.
 *
 * The stream goes through a unix socket in the instance directory that the agent serves and
 * QEMU connects to (and the other way round on resume), rather than QEMU's `exec:`, which the
 * sandbox (`spawn=deny`) forbids, or `file:`, which QEMU 7 lacks. It is streamed to and from
 * disk: the agent never holds a guest's memory.
 *
 * Not here: power on and off, reboot (`lifecycle.ts`); a hard reboot of a suspended instance
 * drops the saved state there.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { DriverError, InstanceStateError } from '../errors';
import type { InstanceRef } from '../types';
import type { QemuHost } from './context';
import type { Managed } from './instances';
import { settledInstance } from './lifecycle';
import type { QemuVm } from './vm';

const STREAM_SOCKET = 'state.sock';
/** How long a save or a restore may take before it is given up (a guest of many GiB on a slow disk). */
const STREAM_TIMEOUT_MS = 10 * 60_000;
const POLL_MS = 100;

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** The running QEMU of `m`, or InstanceStateError naming what it is instead. */
export async function runningVm(host: QemuHost, m: Managed, operation: string, want: readonly string[]): Promise<QemuVm> {
  const vm = m.vm;
  if (!vm || !(await vm.alive())) throw new InstanceStateError(m.rec.uuid, await host.table.powerState(m), operation);
  const state = await vm.runState();
  if (!want.includes(state)) throw new InstanceStateError(m.rec.uuid, state, operation);
  return vm;
}

/** Stops a running guest's vCPUs; a paused one is left. @throws InstanceNotFoundError, InstanceStateError */
export async function pause(host: QemuHost, ref: InstanceRef): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'pause');
    const vm = await runningVm(host, m, 'pause', ['running', 'paused']);
    await vm.execute('stop');
    await host.table.save(m, { power: 'paused' });
    host.log.info({ instance: ref.uuid }, 'instance paused');
  });
}

/** Runs a paused guest again; a running one is left. @throws InstanceNotFoundError, InstanceStateError */
export async function unpause(host: QemuHost, ref: InstanceRef): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'unpause');
    const vm = await runningVm(host, m, 'unpause', ['paused', 'running']);
    await vm.execute('cont');
    await host.table.save(m, { power: 'running' });
    host.log.info({ instance: ref.uuid }, 'instance unpaused');
  });
}

/** Sends the guest an NMI. @throws InstanceNotFoundError, InstanceStateError (not running) */
export async function triggerCrashDump(host: QemuHost, ref: InstanceRef): Promise<void> {
  const m = settledInstance(host, ref, 'trigger a crash dump');
  const vm = await runningVm(host, m, 'trigger a crash dump', ['running']);
  await vm.execute('inject-nmi');
  host.log.info({ instance: ref.uuid }, 'NMI sent to the guest');
}

/** Polls `query-migrate` until the stream is done. @throws DriverError when QEMU says it failed, or it takes too long */
async function migrationDone(host: QemuHost, vm: QemuVm, what: string, uuid: string): Promise<void> {
  const until = host.clock.now() + STREAM_TIMEOUT_MS;
  for (;;) {
    const info = (await vm.execute('query-migrate')) as { status?: unknown; 'error-desc'?: unknown };
    if (info.status === 'completed') return;
    if (info.status === 'failed' || info.status === 'cancelled') {
      const desc = typeof info['error-desc'] === 'string' ? info['error-desc'] : info.status;
      throw new DriverError(`instance ${uuid}: ${what} failed: ${desc}`);
    }
    if (host.clock.now() > until) throw new DriverError(`instance ${uuid}: ${what} took more than ${STREAM_TIMEOUT_MS / 1000} s`);
    await host.clock.sleep(POLL_MS);
  }
}

function listenOn(path: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(path, () => resolve(server));
  });
}

/**
 * Saves the guest's state and stops its QEMU; already suspended is fine. On failure the guest
 * runs on as before and no partial state is kept.
 * @throws InstanceNotFoundError, InstanceStateError (not running), DriverError
 */
export async function suspend(host: QemuHost, ref: InstanceRef): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'suspend');
    const state = m.paths.suspendState;
    if (m.rec.power === 'suspended' && !(m.vm && (await m.vm.alive())) && (await exists(state))) return;
    const vm = await runningVm(host, m, 'suspend', ['running', 'paused']);
    const t0 = host.clock.now();
    const partial = `${state}.part`;
    const sock = join(m.paths.dir, STREAM_SOCKET);
    await rm(sock, { force: true });
    const server = await listenOn(sock);
    let written: Promise<void> | undefined;
    server.once('connection', (conn: Socket) => {
      written = pipeline(conn, createWriteStream(partial, { mode: 0o600 }));
    });
    try {
      await vm.execute('stop');
      await vm.execute('migrate-set-parameters', { 'max-bandwidth': Number.MAX_SAFE_INTEGER });
      await vm.execute('migrate', { uri: `unix:${sock}` });
      await migrationDone(host, vm, 'saving the state', ref.uuid);
      if (!written) throw new DriverError(`instance ${ref.uuid}: QEMU reported the state saved but never connected`);
      await written;
      await rename(partial, state);
    } catch (e) {
      await rm(partial, { force: true });
      // The guest runs on as it did (a save that failed leaves QEMU paused).
      await vm.execute('cont').catch(() => undefined);
      throw e;
    } finally {
      server.close();
      await rm(sock, { force: true });
    }
    await host.table.stop(m, 0);
    await host.table.save(m, { power: 'suspended' });
    host.log.info({ instance: ref.uuid, bytes: (await stat(state)).size, ms: host.clock.now() - t0 }, 'instance suspended');
  });
}

/**
 * Starts the guest from its saved state; a running one is left. The state file goes once the
 * guest runs; on failure it is kept and no process is left.
 * @throws InstanceNotFoundError, InstanceStateError (not suspended), VmStartError, DriverError
 */
export async function resume(host: QemuHost, ref: InstanceRef): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'resume');
    if (m.vm && (await m.vm.alive()) && (await m.vm.runState()) === 'running') return;
    const state = m.paths.suspendState;
    if (m.rec.power !== 'suspended' || !(await exists(state))) throw new InstanceStateError(ref.uuid, await host.table.powerState(m), 'resume');
    const t0 = host.clock.now();
    const vm = await host.table.start(m, { incoming: true }); // plugs the VIFs first
    const sock = join(m.paths.dir, STREAM_SOCKET);
    try {
      await rm(sock, { force: true });
      await vm.execute('migrate-incoming', { uri: `unix:${sock}` });
      const conn = createConnection(sock);
      await pipeline(createReadStream(state), conn);
      await migrationDone(host, vm, 'restoring the state', ref.uuid);
      if ((await vm.runState()) !== 'running') await vm.execute('cont');
    } catch (e) {
      await host.table.stop(m, 0).catch(() => undefined);
      throw e;
    } finally {
      await rm(sock, { force: true });
    }
    await host.table.save(m, { power: 'running' });
    await rm(state, { force: true });
    host.log.info({ instance: ref.uuid, ms: host.clock.now() - t0 }, 'instance resumed');
  });
}
