/**
 * Running one live migration on the source, over QMP, to completion or a clean failure.
 *
 * With a disk (storage is not shared) the disk goes first, the way libvirt does it: the
 * destination's NBD export is added as a block node (`blockdev-add`) and `blockdev-mirror` copies
 * the top layer of the overlay into it (the destination created its own overlay on the same
 * image) and keeps mirroring new writes; once the mirror is in sync,
 * `migrate` sends the memory. `pause-before-switchover` stops the migration after the guest is
 * paused but before the destination takes over, so the mirror is completed (`block-job-cancel`
 * of a ready mirror finishes it without pivoting) before the disks change hands; then
 * `migrate-continue`.
 *
 * The migration is polled (`query-migrate`, woken early by MIGRATION and BLOCK_JOB events);
 * `migrate` itself answers at once even when the destination refuses the connection, which only
 * `query-migrate` reveals. Progress is logged as structured fields (status, RAM transferred and
 * remaining, disk copied), at most once per second. The completion timeout is nova's: seconds per
 * GiB of RAM plus disk, counting at least 2 GiB. Abort or timeout sends `migrate_cancel`.
 *
 * It is: the mechanism. It is not: making sure the source runs afterwards (the caller does).
 */
import { DISK_DRIVE_ID } from './cmdline';
import type { QemuHost } from './context';
import { LiveMigrationAbortedError, LiveMigrationError, LiveMigrationTimeoutError } from './errors';
import type { NbdTarget } from './live-data';
import { qmpText } from './qmp';
import type { QemuVm } from './vm';

/** The block job id of the disk mirror, on the source. */
export const MIRROR_JOB = 'mirror-drive-disk0';
/** The block node of the destination's NBD export, on the source. */
export const NBD_NODE = 'migration-drive-disk0';
const GIB = 1024 * 1024 * 1024;

/** One live migration to run. */
export interface LiveRun {
  readonly uuid: string;
  readonly dest: string;
  readonly vm: QemuVm;
  readonly migrateUri: string;
  readonly nbd?: NbdTarget;
  readonly memoryMb: number;
  readonly diskBytes: number;
  readonly signal: AbortSignal;
}

/** What QEMU reported when the migration completed. */
export interface LiveStats {
  readonly wallMs: number;
  readonly totalTimeMs: number;
  readonly downtimeMs: number;
  readonly ramTransferred: number;
}

type Dict = Record<string, unknown>;
const dict = (v: unknown): Dict => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Dict) : {});
const num = (v: unknown): number => (typeof v === 'number' ? v : 0);

function mirrorJob(jobs: unknown): Dict | undefined {
  return Array.isArray(jobs) ? jobs.map(dict).find((j) => j.device === MIRROR_JOB) : undefined;
}

/** Runs the migration to completion. @throws LiveMigrationError, LiveMigrationAbortedError, LiveMigrationTimeoutError */
export async function runLiveMigration(host: QemuHost, run: LiveRun): Promise<LiveStats> {
  const { opts, clock, log } = host;
  const qmp = await run.vm.qmp();
  const started = clock.now();
  const gib = Math.max(2, run.memoryMb / 1024 + run.diskBytes / GIB);
  const timeoutMs = opts.completionTimeoutMsPerGib > 0 ? opts.completionTimeoutMsPerGib * gib : Number.POSITIVE_INFINITY;
  const fields = { instance: run.uuid, dest: run.dest };
  let wake: (() => void) | undefined;
  let mirrorError: string | undefined;
  const off = qmp.onEvent((e) => {
    if (e.event === 'BLOCK_JOB_COMPLETED' && e.data.device === MIRROR_JOB && typeof e.data.error === 'string') mirrorError = e.data.error;
    if (e.event === 'BLOCK_JOB_ERROR' && e.data.device === MIRROR_JOB) mirrorError = `disk copy ${qmpText(e.data.operation, 'I/O')} error`;
    if (e.event === 'MIGRATION' || e.event.startsWith('BLOCK_JOB')) wake?.();
  });
  const nap = async (): Promise<void> => {
    const stop = new AbortController();
    await Promise.race([clock.sleep(opts.migrationPollMs, stop.signal).catch(() => undefined), new Promise<void>((r) => (wake = r))]);
    stop.abort();
    wake = undefined;
  };
  let lastLog = 0;
  const progress = (extra: Dict): void => {
    if (clock.now() - lastLog < opts.migrationLogEveryMs) return;
    lastLog = clock.now();
    log.info({ ...fields, elapsed_ms: clock.now() - started, ...extra }, 'live migration progress');
  };
  const fail = (why: 'abort' | 'timeout'): LiveMigrationError =>
    why === 'abort' ? new LiveMigrationAbortedError(run.uuid, run.dest) : new LiveMigrationTimeoutError(run.uuid, run.dest, timeoutMs);
  const stopReason = (): 'abort' | 'timeout' | undefined => (run.signal.aborted ? 'abort' : clock.now() - started > timeoutMs ? 'timeout' : undefined);

  let nbdAdded = false;
  let mirrorRunning = false;
  try {
    await qmp.execute('migrate-set-capabilities', {
      capabilities: [
        { capability: 'events', state: true },
        { capability: 'pause-before-switchover', state: run.nbd !== undefined },
        { capability: 'auto-converge', state: opts.autoConverge },
      ],
    });
    const bandwidth = opts.bandwidthBytes > 0 ? opts.bandwidthBytes : Number.MAX_SAFE_INTEGER;
    await qmp.execute('migrate-set-parameters', { 'max-bandwidth': bandwidth, 'downtime-limit': opts.downtimeMs });
    if (run.nbd) {
      const { host: nbdHost, port, export: name } = run.nbd;
      await qmp.execute('blockdev-add', { driver: 'nbd', 'node-name': NBD_NODE, server: { type: 'inet', host: nbdHost, port: String(port) }, export: name });
      nbdAdded = true;
      await qmp.execute('blockdev-mirror', {
        'job-id': MIRROR_JOB,
        device: DISK_DRIVE_ID,
        target: NBD_NODE,
        sync: 'top',
        ...(opts.bandwidthBytes > 0 ? { speed: opts.bandwidthBytes } : {}),
      });
      mirrorRunning = true;
      for (;;) {
        const job = mirrorJob(await qmp.execute('query-block-jobs'));
        if (!job) throw new LiveMigrationError(run.uuid, run.dest, `the disk copy stopped: ${mirrorError ?? 'no reason given'}`);
        if (job.ready === true) break;
        const why = stopReason();
        if (why) throw fail(why);
        progress({ phase: 'disk', disk_copied: num(job.offset), disk_total: num(job.len) });
        await nap();
      }
      log.info({ ...fields, ms: clock.now() - started }, 'disk in sync with the destination; migrating memory');
    }
    await qmp.execute('migrate', { uri: run.migrateUri });
    let cancelled: 'abort' | 'timeout' | undefined;
    for (;;) {
      const info = dict(await qmp.execute('query-migrate'));
      const status = qmpText(info.status, 'none');
      const ram = dict(info.ram);
      if (status === 'completed') {
        const stats = { wallMs: clock.now() - started, totalTimeMs: num(info['total-time']), downtimeMs: num(info.downtime), ramTransferred: num(ram.transferred) };
        log.info({ ...fields, ...stats }, 'live migration completed');
        return stats;
      }
      if (status === 'failed') throw new LiveMigrationError(run.uuid, run.dest, qmpText(info['error-desc'], 'QEMU reported failure'));
      if (status === 'cancelled') throw fail(cancelled ?? 'abort');
      if (mirrorError) throw new LiveMigrationError(run.uuid, run.dest, `the disk copy failed: ${mirrorError}`);
      const why = cancelled ? undefined : stopReason();
      if (why) {
        cancelled = why;
        log.warn({ ...fields, reason: why }, 'cancelling the live migration');
        await qmp.execute('migrate_cancel');
      } else if (status === 'pre-switchover' && !cancelled) {
        await completeMirror(host, run.vm, () => mirrorError);
        mirrorRunning = false;
        await qmp.execute('blockdev-del', { 'node-name': NBD_NODE });
        nbdAdded = false;
        await qmp.execute('migrate-continue', { state: 'pre-switchover' });
      }
      progress({ phase: 'memory', status, ram_transferred: num(ram.transferred), ram_remaining: num(ram.remaining), ram_total: num(ram.total), mbps: num(ram.mbps) });
      await nap();
    }
  } catch (e) {
    if (e instanceof LiveMigrationError) throw e;
    throw new LiveMigrationError(run.uuid, run.dest, (e as Error).message, { cause: e });
  } finally {
    off();
    if (mirrorRunning) {
      await qmp.execute('block-job-cancel', { device: MIRROR_JOB, force: true }).catch(() => undefined);
      await waitJobGone(host, run.vm).catch(() => undefined);
    }
    if (nbdAdded) await qmp.execute('blockdev-del', { 'node-name': NBD_NODE }).catch((e: unknown) => log.warn({ ...fields, err: (e as Error).message }, 'cannot remove the NBD node'));
  }
}

/** Waits until the mirror job has left `query-block-jobs`. @throws Error after qmp_command_timeout */
async function waitJobGone(host: QemuHost, vm: QemuVm): Promise<void> {
  const deadline = host.clock.now() + host.opts.qmpTimeoutMs;
  while (mirrorJob(await vm.execute('query-block-jobs'))) {
    if (host.clock.now() > deadline) throw new Error('the disk copy job did not end');
    await host.clock.sleep(10);
  }
}

/** Finishes a ready mirror without pivoting (the source keeps its disk) and waits until it is gone. */
async function completeMirror(host: QemuHost, vm: QemuVm, error: () => string | undefined): Promise<void> {
  await vm.execute('block-job-cancel', { device: MIRROR_JOB });
  await waitJobGone(host, vm);
  const e = error();
  if (e) throw new Error(`the disk copy failed at switch-over: ${e}`);
}
