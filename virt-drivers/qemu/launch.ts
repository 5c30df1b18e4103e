/**
 * Starting an instance's QEMU process and waiting until it answers on QMP, or failing with the
 * reason QEMU gave.
 *
 * A start races the QMP handshake against the process's exit: QEMU that rejects its command
 * line (a wrong machine type, a locked disk, a busy pidfile) exits within milliseconds, and the
 * caller gets the last lines of its log instead of a connect timeout. On any failure the process
 * is killed, so nothing half-started is left running.
 *
 * The volumes' cephx key files are checked first (`rbd-secrets.ts`): QEMU reads them itself, and
 * a bad one would otherwise show only as librados' words in QEMU's log.
 *
 * It is: one start. It is not: the decision to start (the driver's), nor the record update.
 */
import { open, rm, stat } from 'node:fs/promises';
import { qemuCommandLine } from './cmdline';
import { VmStartError } from './errors';
import type { InstancePaths, VmDefinition } from './instance-files';
import { LaunchError } from './process';
import { checkRbdSecrets } from './rbd-secrets';
import { QemuVm, type VmDeps } from './vm';

/** What to start. */
export interface StartRequest {
  readonly uuid: string;
  readonly name: string;
  readonly def: VmDefinition;
  readonly paths: InstancePaths;
  /** Wait for an incoming migration instead of booting. */
  readonly incoming?: boolean;
  /** Start with the vCPUs stopped (QMP `cont` runs the guest). */
  readonly paused?: boolean;
}

/** The last `lines` non-empty lines QEMU wrote to its log since byte `from`. */
export async function logTail(path: string, from: number, lines = 3): Promise<string> {
  try {
    const fh = await open(path, 'r');
    try {
      const size = (await fh.stat()).size;
      const start = Math.max(from, size - 8192);
      const buf = Buffer.alloc(Math.max(0, size - start));
      await fh.read(buf, 0, buf.length, start);
      return buf
        .toString('utf8')
        .split('\n')
        .map((l) => l.trim().replace(/^\d{4}-\d\d-\d\dT[\d:.]+Z\s+/, ''))
        .filter((l) => l !== '')
        .slice(-lines)
        .join(' / ');
    } finally {
      await fh.close();
    }
  } catch {
    return '';
  }
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

/**
 * Starts QEMU for an instance and resolves once QMP answers (the guest runs, or waits for an
 * incoming migration).
 * @throws VmStartError with QEMU's own words when it cannot be started, exits, or stays silent;
 *   VolumeSecretError (nothing started) when a volume's key file is missing or unsafe
 */
export async function startVm(deps: VmDeps, req: StartRequest): Promise<QemuVm> {
  const { opts, processes, logger } = deps;
  const { paths } = req;
  await checkRbdSecrets(req.uuid, opts.rbdSecretsDir, req.def.volumes);
  await rm(paths.qmp, { force: true }); // a socket file left by a killed QEMU
  const logStart = await sizeOf(paths.log);
  const args = qemuCommandLine({ uuid: req.uuid, name: req.name, def: req.def, paths, sandbox: opts.sandbox, rbdSecretsDir: opts.rbdSecretsDir, consoles: opts.consoles, ...(req.incoming ? { incoming: true } : {}), ...(req.paused ? { paused: true } : {}) });
  // In a named namespace, `ip netns exec` enters it and execs QEMU (same pid), so QEMU opens its
  // taps there; QMP is a unix socket on the file system, reachable from any namespace.
  const command = opts.netns === undefined ? { binary: opts.binary, args } : { binary: 'ip', args: ['netns', 'exec', opts.netns, opts.binary, ...args] };
  let launched;
  try {
    launched = await processes.launch({ ...command, logPath: paths.log, cwd: paths.dir });
  } catch (e) {
    const reason = e instanceof LaunchError ? `${e.binary} cannot be executed (${e.code}); check [qemu] binary${opts.netns === undefined ? '' : ' and that ip (iproute2) is installed'}` : (e as Error).message;
    throw new VmStartError(req.uuid, reason, { cause: e });
  }
  const vm = new QemuVm(req.uuid, paths, launched.pid, launched.startTicks, deps, launched.exited);
  const started = deps.clock.now();
  type Outcome = { ok: true } | { ok: false; reason: string; cause?: unknown };
  const exitedFirst = launched.exited.then(
    async (s): Promise<Outcome> => ({ ok: false, reason: `exited (${s.signal ?? `code ${s.code}`})` }),
  );
  const answered = vm
    .qmp()
    .then(async (): Promise<Outcome> => {
      const state = await vm.runState();
      const want = req.incoming ? 'inmigrate' : req.paused ? 'prelaunch' : 'running';
      return state === want ? { ok: true } : { ok: false, reason: `is ${state}, expected ${want}` };
    })
    .catch((e: unknown): Outcome => ({ ok: false, reason: (e as Error).message, cause: e }));
  const outcome = await Promise.race([answered, exitedFirst]);
  if (outcome.ok) {
    logger.info({ instance: req.uuid, pid: launched.pid, accel: req.def.accel, ms: deps.clock.now() - started, incoming: req.incoming === true }, 'qemu started');
    return vm;
  }
  await vm.stop().catch(() => undefined);
  vm.detach();
  const tail = await logTail(paths.log, logStart);
  throw new VmStartError(req.uuid, `${outcome.reason}${tail ? `: ${tail}` : ''}`, outcome.cause === undefined ? undefined : { cause: outcome.cause });
}
