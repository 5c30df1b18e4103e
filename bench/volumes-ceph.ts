/**
 * The volumes bench's own Ceph: `scripts/ceph-stack` (Debian 13's Ceph 18.2 from the 2025.1 root)
 * under a STACK_DIR and on a monitor port of its own (3410-3419, and the OSD's ports 3500 above
 * it), never the dev stack's or the integration tests' (3390-3399); Cinder's cephx key written
 * where the qemu driver reads it (`<secrets>/<fsid>.base64`, mode 600, as `ceph auth get-key`
 * prints it); 1 GiB volumes made with the root's `rbd` as Cinder's user, as cinder-volume makes
 * them. `reset` removes the cluster.
 *
 * It is not: a Cinder (the scenario's stand-in is `volumes-cinder.ts`), nor the judge of whether
 * this machine can run it (`volumesUnavailable` in `volumes-guest.ts`).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { shellAssignments } from './cloud-api';

/** The repository root, from `bench/` (ts-node) or `dist/bench/` (built). */
export const REPO = [join(__dirname, '..'), join(__dirname, '..', '..')].find((d) => existsSync(join(d, 'scripts', 'ceph-stack'))) ?? join(__dirname, '..', '..');

/** Monitor ports tried: msgr2 on the even port, msgr1 on the next. */
const MON_PORTS = [3410, 3412, 3414, 3416, 3418];
/** The OSD binds CEPH_MON_PORT+3500..+3507 (scripts/ceph-stack). */
const OSD_OFFSET = 3500;

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

function run(args: readonly string[], env: Readonly<Record<string, string>>, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', args, { env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 1 << 24 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${args.slice(0, 3).join(' ')}: ${err.message}\n${stderr.split('\n').slice(-10).join('\n')}`)) : resolve(stdout),
    );
  });
}

/** What the qemu driver's connection info points at. */
export interface RbdTarget {
  readonly pool: string;
  readonly monHost: string;
  /** msgr1, the port Cinder's RBD driver reports from `ceph mon dump`'s v1 address. */
  readonly monPort: string;
  /** The cluster's fsid: Cinder's secret_uuid when rbd_secret_uuid is unset, and the key file's name. */
  readonly secretUuid: string;
  readonly user: string;
}

export class BenchCeph {
  private constructor(
    private readonly dir: string,
    readonly port: number,
    readonly env: Readonly<Record<string, string>>,
  ) {}

  private static stackEnv(dir: string, port: number): Record<string, string> {
    return { OPENSTACK_RELEASE: '2025.1', STACK_DIR: dir, CEPH_MON_PORT: String(port) };
  }

  /**
   * Brings a cluster up under `dir` on the first port pair whose monitor and OSD ports are free.
   * `started` is told the port before `up` runs, so the caller can reset a half-made cluster.
   * @throws Error when no port is free or the stack does not come up
   */
  static async up(dir: string, started: (port: number) => void): Promise<BenchCeph> {
    let port = 0;
    for (const p of MON_PORTS) {
      const needed = [p, p + 1, ...Array.from({ length: 8 }, (_, k) => p + OSD_OFFSET + k)];
      if ((await Promise.all(needed.map(portFree))).every(Boolean)) {
        port = p;
        break;
      }
    }
    if (port === 0) throw new Error(`no free monitor port pair (and its OSD ports) in ${MON_PORTS.join(', ')}`);
    started(port);
    const stack = BenchCeph.stackEnv(dir, port);
    await run([join(REPO, 'scripts', 'ceph-stack'), 'up'], stack, 600_000);
    const env = shellAssignments(await run([join(REPO, 'scripts', 'ceph-stack'), 'env'], stack, 60_000));
    return new BenchCeph(dir, port, env);
  }

  /** Removes the cluster that `up` made (or began) on `port` under `dir`. Never throws. */
  static reset(dir: string, port: number): Promise<string | undefined> {
    return run([join(REPO, 'scripts', 'ceph-stack'), 'reset'], BenchCeph.stackEnv(dir, port), 300_000).then(
      () => undefined,
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
  }

  get target(): RbdTarget {
    return { pool: this.env.CEPH_POOL ?? 'volumes', monHost: '127.0.0.1', monPort: String(this.port + 1), secretUuid: this.env.CEPH_FSID ?? '', user: 'cinder' };
  }

  /** Writes client.cinder's key into `secrets` (made 700) as `<fsid>.base64` (600), where `[qemu] rbd_secrets_dir` points. */
  async writeKey(secrets: string): Promise<void> {
    const key = (await run([join(REPO, 'scripts', 'ceph-stack'), 'ceph', 'auth', 'get-key', 'client.cinder'], BenchCeph.stackEnv(this.dir, this.port), 60_000)).trim();
    if (!/^[A-Za-z0-9+/]+=*$/.test(key)) throw new Error('ceph auth get-key client.cinder printed no key');
    mkdirSync(secrets, { recursive: true, mode: 0o700 });
    writeFileSync(join(secrets, `${this.target.secretUuid}.base64`), key, { mode: 0o600 });
  }

  /** `rbd create --size 1024 <pool>/volume-<id>` with the root's rbd as Cinder's user. */
  async createVolume(id: string): Promise<void> {
    const rbd = ['--conf', this.env.CEPH_CONF ?? '', '--id', 'cinder', '--keyring', this.env.CEPH_CINDER_KEYRING ?? ''];
    await run([join(REPO, 'scripts', 'release-root'), 'exec', '2025.1', 'rbd', ...rbd, 'create', '--size', '1024', `${this.target.pool}/volume-${id}`], { STACK_DIR: this.dir }, 120_000);
  }
}
