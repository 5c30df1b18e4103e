// A private RabbitMQ node for tests that stop and start the broker: its own node name, ports,
// cookie (HOME), database, logs and config in a temp dir, listening on 127.0.0.1 only. The shared
// broker on 5672 is never touched.
import { execFile, type ExecFileException } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { portFree } from '../../helpers/wait';

const BIN = '/usr/lib/rabbitmq/bin';

export interface PrivateRabbit {
  /** The TLS listener's port, when `extra` configured one. */
  readonly tlsPort: number;
  readonly url: string;
  readonly node: string;
  readonly port: number;
  ctl(...args: string[]): Promise<string>;
  stopApp(): Promise<void>;
  startApp(): Promise<void>;
  queues(): Promise<string[]>;
  stop(): Promise<void>;
}

/** Two consecutive free ports below the ephemeral range (beam refuses to listen inside it here). */
async function freePorts(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const p = 20000 + 3 * Math.floor(Math.random() * 3000);
    if ((await portFree(p)) && (await portFree(p + 1)) && (await portFree(p + 2))) return p;
  }
  throw new Error('no free port pair for a private RabbitMQ');
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env, timeout: timeoutMs }, (err: ExecFileException | null, stdout: string, stderr: string) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** Extra rabbitmq.conf lines (a TLS listener, say); `port` is the node's TCP port, `tlsPort` the next free one. */
export type ExtraConf = (ports: { port: number; tlsPort: number }) => string;

export async function startPrivateRabbit(extra?: ExtraConf): Promise<PrivateRabbit> {
  const dir = mkdtempSync(join(tmpdir(), 'ca-rabbit-'));
  const port = await freePorts();
  const node = `rabbit-ca-test-${process.pid}-${randomBytes(3).toString('hex')}@localhost`;
  for (const d of ['home', 'mnesia', 'log']) mkdirSync(join(dir, d));
  const tlsPort = port + 2;
  writeFileSync(join(dir, 'rabbitmq.conf'), `listeners.tcp.local = 127.0.0.1:${port}\nloopback_users = none\n${extra ? extra({ port, tlsPort }) : ''}`);
  writeFileSync(join(dir, 'enabled_plugins'), '[].\n');
  writeFileSync(join(dir, 'rabbitmq-env.conf'), '');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: join(dir, 'home'),
    RABBITMQ_NODENAME: node,
    RABBITMQ_DIST_PORT: String(port + 1),
    RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
    RABBITMQ_LOG_BASE: join(dir, 'log'),
    RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq.conf'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
    RABBITMQ_CONF_ENV_FILE: join(dir, 'rabbitmq-env.conf'),
    RABBITMQ_PID_FILE: join(dir, 'rabbit.pid'),
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1}',
    ERL_EPMD_ADDRESS: '127.0.0.1',
  };
  const ctl = (...args: string[]): Promise<string> => run(join(BIN, 'rabbitmqctl'), ['-n', node, ...args], env);
  const stop = async (): Promise<void> => {
    await ctl('stop').catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  await run(join(BIN, 'rabbitmq-server'), ['-detached'], env);
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      await ctl('await_startup', '--timeout', '30');
      break;
    } catch (e) {
      if (Date.now() > deadline) {
        await stop();
        throw e;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  return {
    url: `rabbit://guest:guest@127.0.0.1:${port}/`,
    node,
    port,
    tlsPort,
    ctl,
    stop,
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
