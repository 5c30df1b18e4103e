// Private RabbitMQ nodes for tests that stop and start the broker: each with its own node name
// (`...@localhost`), AMQP and distribution ports, database, logs and config in a temp dir,
// listening on 127.0.0.1 only; a cluster of them shares one cookie through one HOME. A node runs
// the host's RabbitMQ, or an OpenStack release's (scripts/release-root: RabbitMQ 4 for 2025.1 on
// Debian 12). The shared broker on 5672 and the host's epmd (4369, which every node registers
// with) are never stopped or reconfigured.
import { execFile, execFileSync, type ExecFileException } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { portFree } from '../../helpers/wait';
import { pidRunning } from '../../helpers/process';

const BIN = '/usr/lib/rabbitmq/bin';
const RELEASE_ROOT = join(__dirname, '..', '..', '..', 'scripts', 'release-root');

/** A release whose RabbitMQ runs from scripts/release-root's root instead of the host's. */
export type RabbitRelease = '2025.1';

export interface PrivateRabbit {
  /** The TLS listener's port, when `extra` configured one. */
  readonly tlsPort: number;
  readonly url: string;
  readonly node: string;
  readonly port: number;
  ctl(...args: string[]): Promise<string>;
  stopApp(): Promise<void>;
  startApp(): Promise<void>;
  /** Stops the whole node (its Erlang VM), keeping its data, so `startNode` brings it back as it was. */
  stopNode(): Promise<void>;
  /** Kills the node's VM (SIGKILL, a crash: no goodbye to its clients or peers), keeping its data. */
  killNode(): Promise<void>;
  startNode(): Promise<void>;
  queues(): Promise<string[]>;
  /** Stops the node and removes its directory. */
  stop(): Promise<void>;
}

/** Extra rabbitmq.conf lines (a TLS listener, say); `port` is the node's TCP port, `tlsPort` the next free one. */
export type ExtraConf = (ports: { port: number; tlsPort: number }) => string;

export interface PrivateRabbitOptions {
  readonly extra?: ExtraConf;
  /** Default: the host's RabbitMQ. */
  readonly release?: RabbitRelease;
}

/**
 * Why `release`'s RabbitMQ cannot run here, or undefined when it can. Builds the release's root
 * when it is missing (minutes, once per machine): only a root that cannot be built is a reason.
 */
export function releaseUnavailableReason(release: RabbitRelease): string | undefined {
  if (!existsSync(RELEASE_ROOT)) return `scripts/release-root is missing`;
  try {
    const root = execFileSync('bash', [RELEASE_ROOT, 'path', release], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 20 * 60_000 }).toString().trim();
    if (root !== '/' && process.getuid?.() !== 0) return `running from the ${release} root (${root}) needs root (chroot)`;
    return undefined;
  } catch (e) {
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim().split('\n').slice(-3).join(' ');
    return `the ${release} root cannot be built: ${stderr || String(e)}`;
  }
}

/** Where a node's files go: a release's root sees the machine's /tmp, whatever TMPDIR says. */
const tempBase = (o: PrivateRabbitOptions): string => (o.release ? '/tmp' : tmpdir());

/** Three consecutive free ports below the ephemeral range (beam refuses to listen inside it here). */
async function freePorts(taken: readonly number[] = []): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = 20000 + 3 * Math.floor(Math.random() * 3000);
    if (taken.some((t) => Math.abs(t - p) < 3)) continue;
    if ((await portFree(p)) && (await portFree(p + 1)) && (await portFree(p + 2))) return p;
  }
  throw new Error('no three free ports for a private RabbitMQ');
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env, timeout: timeoutMs }, (err: ExecFileException | null, stdout: string, stderr: string) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Whether `pid` runs (a zombie waiting for its reaper does not). */
const pidAlive = pidRunning;

interface NodeSetup {
  readonly options: PrivateRabbitOptions;
  /** The HOME holding the Erlang cookie; a cluster's nodes share one. */
  readonly home: string;
  readonly port: number;
}

/** Lays out and starts one node; `dir` is removed by its `stop`. */
async function startNode(dir: string, s: NodeSetup): Promise<PrivateRabbit> {
  const { port, home, options } = s;
  const node = `rabbit-ca-test-${process.pid}-${randomBytes(3).toString('hex')}@localhost`;
  for (const d of ['mnesia', 'log']) mkdirSync(join(dir, d));
  const tlsPort = port + 2;
  const extra = options.extra ? options.extra({ port, tlsPort }) : '';
  writeFileSync(join(dir, 'rabbitmq.conf'), `listeners.tcp.local = 127.0.0.1:${port}\nloopback_users = none\n${extra}`);
  writeFileSync(join(dir, 'enabled_plugins'), '[].\n');
  writeFileSync(join(dir, 'rabbitmq-env.conf'), '');
  const pidFile = join(dir, 'rabbit.pid');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    RABBITMQ_NODENAME: node,
    RABBITMQ_DIST_PORT: String(port + 1),
    RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
    RABBITMQ_LOG_BASE: join(dir, 'log'),
    RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq.conf'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
    RABBITMQ_CONF_ENV_FILE: join(dir, 'rabbitmq-env.conf'),
    RABBITMQ_PID_FILE: pidFile,
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1}',
    ERL_EPMD_ADDRESS: '127.0.0.1',
  };
  // In a release's root the same paths hold that release's RabbitMQ (/tmp is shared with it).
  const tool = (name: string, args: string[], timeoutMs?: number): Promise<string> =>
    options.release ? run('bash', [RELEASE_ROOT, 'exec', options.release, join(BIN, name), ...args], env, timeoutMs) : run(join(BIN, name), args, env, timeoutMs);
  const ctl = (...args: string[]): Promise<string> => tool('rabbitmqctl', ['-n', node, ...args]);
  const pid = (): number | undefined => {
    const n = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) : NaN;
    return Number.isInteger(n) && n > 0 ? n : undefined;
  };
  const awaitStartup = async (): Promise<void> => {
    const deadline = Date.now() + 90_000;
    for (;;) {
      try {
        await ctl('await_startup', '--timeout', '30');
        return;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await sleep(500);
      }
    }
  };
  const stopNode = async (): Promise<void> => {
    const p = pid();
    await ctl('stop').catch(() => undefined);
    // `stop` returns once the node said goodbye; its VM may still be exiting, or never answered.
    const deadline = Date.now() + 15_000;
    while (p !== undefined && pidAlive(p) && Date.now() < deadline) await sleep(100);
    if (p !== undefined && pidAlive(p)) process.kill(p, 'SIGKILL');
    rmSync(pidFile, { force: true });
  };
  const killNode = async (): Promise<void> => {
    const p = pid();
    if (p === undefined) throw new Error(`${node} has no pid file`);
    process.kill(p, 'SIGKILL');
    while (pidAlive(p)) await sleep(20);
    rmSync(pidFile, { force: true });
  };
  const boot = async (): Promise<void> => {
    await tool('rabbitmq-server', ['-detached']);
    await awaitStartup();
  };
  const stop = async (): Promise<void> => {
    await stopNode();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await boot();
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    url: `rabbit://guest:guest@127.0.0.1:${port}/`,
    node,
    port,
    tlsPort,
    ctl,
    stop,
    stopNode,
    killNode,
    startNode: boot,
    stopApp: async () => void (await ctl('stop_app')),
    startApp: async () => {
      await ctl('start_app');
      await ctl('await_startup', '--timeout', '60');
    },
    queues: async () =>
      (await ctl('list_queues', '-q', '--no-table-headers', 'name'))
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== ''),
  };
}

export async function startPrivateRabbit(options: PrivateRabbitOptions = {}): Promise<PrivateRabbit> {
  const dir = mkdtempSync(join(tempBase(options), 'ca-rabbit-'));
  mkdirSync(join(dir, 'home'));
  try {
    return await startNode(dir, { options, home: join(dir, 'home'), port: await freePorts() });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

export interface PrivateCluster {
  readonly nodes: readonly PrivateRabbit[];
  /** A transport_url naming every node, in `nodes` order. */
  readonly url: string;
  /** Stops every node and removes their directories. */
  stop(): Promise<void>;
}

/** A transport_url naming `nodes`, in that order (the order a client tries them). */
export function clusterUrl(nodes: readonly PrivateRabbit[]): string {
  return `rabbit://${nodes.map((n) => `guest:guest@127.0.0.1:${n.port}`).join(',')}/`;
}

/**
 * `size` private nodes clustered with the first one (each of the others: stop_app, join_cluster,
 * start_app). Node directories live under one temp dir with the shared HOME.
 */
export async function startPrivateCluster(options: PrivateRabbitOptions & { readonly size?: number } = {}): Promise<PrivateCluster> {
  const size = options.size ?? 3;
  const base = mkdtempSync(join(tempBase(options), 'ca-rabbit-cluster-'));
  const home = join(base, 'home');
  mkdirSync(home);
  // One cookie for all: written before any node starts (a node would create its own otherwise).
  writeFileSync(join(home, '.erlang.cookie'), randomBytes(16).toString('hex').toUpperCase(), { mode: 0o400 });
  const nodes: PrivateRabbit[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)));
    rmSync(base, { recursive: true, force: true });
  };
  try {
    const ports: number[] = [];
    for (let i = 0; i < size; i++) ports.push(await freePorts(ports));
    const started = await Promise.allSettled(
      ports.map((port, i) => {
        const dir = join(base, `node${i + 1}`);
        mkdirSync(dir);
        return startNode(dir, { options, home, port });
      }),
    );
    for (const r of started) if (r.status === 'fulfilled') nodes.push(r.value);
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const [first, ...rest] = nodes;
    for (const n of rest) {
      await n.ctl('stop_app');
      await n.ctl('join_cluster', (first as PrivateRabbit).node);
      await n.startApp();
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { nodes, url: clusterUrl(nodes), stop };
}
