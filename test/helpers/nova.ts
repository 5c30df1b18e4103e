/**
 * A real nova control plane for integration tests (scripts/nova-stack: nova-api, nova-conductor,
 * nova-scheduler from Debian, SQLite, noauth2, of the release OPENSTACK_RELEASE names) on a private API port, vhost and state directory,
 * the compute agents in nova mode as child processes running the current source (scripts/ts-run.js),
 * and a small client for nova's REST API.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLACEMENT_URL, RABBIT_PORT } from './stack';

const ROOT = join(__dirname, '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'nova-stack');

function run(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', [SCRIPT, ...args], { env, timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`scripts/nova-stack ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

export interface NovaStackOptions {
  /** nova's `[DEFAULT] service_down_time` (seconds). */
  readonly serviceDownTime?: number;
  /** The Glance nova-api looks images up in (image-less boots only without one). */
  readonly glanceUrl?: string;
  /**
   * A Keystone nova-api authenticates users with (noauth2 without one): its URL, the nova service
   * user's password, and where the API client gets its token.
   */
  readonly keystone?: { readonly url: string; readonly servicePassword: string; readonly token: () => Promise<string> };
  /**
   * nova's databases (scripts/nova-stack's NOVA_DB): SQLite by default; `postgres`, the machine's
   * PostgreSQL, for a test whose requests race nova's own writes (SQLite answers "database is
   * locked" after some of a request's writes were committed, and a retry then finds the action
   * half done).
   */
  readonly db?: 'sqlite' | 'postgres';
}

/** One private control plane: start with `up`, map hosts with `discover`, remove with `down`. */
export class NovaStack {
  readonly dir = mkdtempSync(join(tmpdir(), 'ca-nova-'));
  readonly apiPort = 18000 + 2 * (process.pid % 900);
  readonly vhost = `novacp-test-${this.apiPort}`;
  readonly transportUrl = `rabbit://guest:guest@127.0.0.1:${RABBIT_PORT}/${this.vhost}`;
  /**
   * The `[oslo_messaging_rabbit]` options nova's services run with (written by `up`: kolla-ansible
   * 2025.1's on that release, none on Zed); agents must declare their queues the same way.
   */
  readonly messagingFile = join(this.dir, 'nova', 'messaging.conf');
  readonly api: NovaApi;
  private readonly env: NodeJS.ProcessEnv;

  constructor(opts: NovaStackOptions = {}) {
    this.env = {
      ...process.env,
      NOVA_API_PORT: String(this.apiPort),
      NOVA_VHOST: this.vhost,
      NOVA_DIR: join(this.dir, 'nova'),
      NOVA_SERVICE_DOWN_TIME: String(opts.serviceDownTime ?? 60),
      NOVA_DB: opts.db ?? 'sqlite',
      ...(opts.glanceUrl === undefined ? {} : { GLANCE_URL: opts.glanceUrl }),
      ...(opts.keystone === undefined ? {} : { KEYSTONE_URL: opts.keystone.url, KEYSTONE_SERVICE_PASSWORD: opts.keystone.servicePassword }),
      PLACEMENT_PORT: new URL(PLACEMENT_URL).port || '80',
      RABBIT_PORT: String(RABBIT_PORT),
    };
    this.api = new NovaApi(`http://127.0.0.1:${this.apiPort}/v2.1`, opts.keystone?.token);
  }

  /** Installs nova's packages when missing (apt), creates the databases, starts the services. */
  async up(): Promise<void> {
    await run(['up'], this.env, 600_000);
  }

  /**
   * Stops nova's services and starts them on the same databases; rejects when one refuses to
   * start (nova's API, conductor and scheduler check every compute's service version at start).
   */
  async restart(): Promise<void> {
    await run(['restart'], this.env, 300_000);
  }

  /** `nova-manage cell_v2 discover_hosts`: maps compute hosts that registered. */
  async discover(): Promise<void> {
    await run(['discover'], this.env, 120_000);
  }

  /** The last ERROR lines of nova's logs (for failure reports). */
  errors(): Promise<string> {
    return run(['errors'], this.env, 30_000).catch((e: unknown) => String(e));
  }

  async down(): Promise<void> {
    await run(['down'], this.env, 120_000).catch(() => undefined);
  }
}

/** Seconds between the test agents' heartbeats (`[DEFAULT] report_interval`). */
export const REPORT_INTERVAL = 4;

/** Config lines for one agent: `defaults` go into [DEFAULT], `sections` at the end of the file. */
export interface AgentConfLines {
  readonly defaults?: string;
  readonly sections?: string;
  /** A file of `[oslo_messaging_rabbit]` options (NovaStack.messagingFile), read at start. */
  readonly messagingFile?: string;
}

/** A compute agent in nova mode as a child process (fake driver unless `conf` says otherwise). */
export class NovaAgent {
  readonly dir = mkdtempSync(join(tmpdir(), 'ca-nova-agent-'));
  readonly file = join(this.dir, 'agent.conf');
  child: ChildProcess | undefined;
  output = '';
  private messagingAdded = false;

  constructor(
    readonly host: string,
    transportUrl: string,
    host_facts: { vcpus: number; memory_mb: number; disk_gb: number },
    private readonly conf: AgentConfLines = {},
  ) {
    mkdirSync(join(this.dir, 'state'));
    const hostFile = join(this.dir, 'host.json');
    writeFileSync(
      hostFile,
      JSON.stringify({
        cpu: { sockets: 1, cores_per_socket: host_facts.vcpus / 2, threads_per_core: 2, vendor: 'GenuineIntel', flags: ['avx2', 'sse4_2'] },
        memory: { total_mb: host_facts.memory_mb },
        disk: { total_gb: host_facts.disk_gb },
        gpus: [],
        nics: [],
      }),
    );
    writeFileSync(
      this.file,
      `[DEFAULT]\nhost = ${host}\nstate_path = ${join(this.dir, 'state')}\ntransport_url = ${transportUrl}\ncontrol_exchange = nova\n` +
        `control_plane = nova\nreport_interval = ${REPORT_INTERVAL}\nupdate_resources_interval = -1\ngraceful_shutdown_timeout = 5\nrpc_response_timeout = 30\n` +
        `reserved_host_memory_mb = 0\ninstances_path = ${join(this.dir, 'instances')}\ncompute_driver = fake\n${conf.defaults ?? ''}\n` +
        `[placement]\nendpoint_override = ${PLACEMENT_URL}\n[metrics]\nlisten =\n` +
        `[fake]\nhost_file = ${hostFile}\ninstances_file = ${join(this.dir, 'state', 'fake-instances.json')}\n${conf.sections ?? ''}`,
      { mode: 0o600 },
    );
  }

  /** Starts the agent; resolves once it logged "compute-agent up". */
  async start(): Promise<void> {
    if (this.conf.messagingFile !== undefined && !this.messagingAdded) {
      appendFileSync(this.file, `\n[oslo_messaging_rabbit]\n${readFileSync(this.conf.messagingFile, 'utf8')}`);
      this.messagingAdded = true;
    }
    const child = spawn(process.execPath, [join(ROOT, 'scripts', 'ts-run.js'), join(ROOT, 'agent', 'cli', 'main.ts'), 'run', '--config-file', this.file], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout?.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (this.output += d.toString()));
    const deadline = Date.now() + 90_000;
    while (!this.output.includes('"msg":"compute-agent up"')) {
      if (child.exitCode !== null) throw new Error(`agent ${this.host} exited (${child.exitCode}):\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`agent ${this.host} did not come up:\n${this.output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** SIGKILL: no goodbye to nova, heartbeats just stop. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const gone = new Promise((r) => c.once('exit', r));
    c.kill(signal);
    await gone;
  }

  /** Log lines at warn level or above, and refused requests (for failure messages). */
  problems(): string[] {
    return this.output.split('\n').filter((l) => /"level":"(warn|error|fatal)"|"msg":"RPC method raised"/.test(l));
  }
}

export interface Server {
  readonly id: string;
  readonly status: string;
  readonly 'OS-EXT-SRV-ATTR:host': string | null;
  readonly 'OS-EXT-STS:task_state': string | null;
  readonly 'OS-EXT-STS:power_state'?: number;
  readonly fault?: { message: string };
}

export interface Hypervisor {
  readonly hypervisor_hostname: string;
  readonly vcpus: number;
  readonly memory_mb: number;
  readonly vcpus_used: number;
  readonly memory_mb_used: number;
  readonly running_vms: number;
  readonly state: string;
  readonly status: string;
}

/** nova's compute API with a noauth2 admin token. */
export class NovaApi {
  /** `token`: where a Keystone-authenticated API's token comes from; noauth2's admin token without one. */
  constructor(
    readonly base: string,
    private readonly token: () => Promise<string> = () => Promise.resolve('admin:admin'),
  ) {}

  /**
   * One API request. nova-api on SQLite answers 500 (sqlalchemy OperationalError, "database is
   * locked") when its write races another service's; the transaction was rolled back, so the
   * request is sent again, up to 3 times, as a client would.
   */
  async request<T>(method: string, path: string, body?: unknown, microversion = '2.37'): Promise<{ status: number; body: T }> {
    for (let attempt = 0; ; attempt++) {
      const res = await fetch(`${this.base}${path}`, {
        method,
        headers: { 'X-Auth-Token': await this.token(), 'Content-Type': 'application/json', 'X-OpenStack-Nova-API-Version': microversion },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (res.status === 500 && text.includes('OperationalError') && attempt < 3) {
        await new Promise((r) => setTimeout(r, 300 * (attempt + 1)));
        continue;
      }
      return { status: res.status, body: (text ? JSON.parse(text) : {}) as T };
    }
  }

  async ok<T>(method: string, path: string, body?: unknown, microversion?: string): Promise<T> {
    const r = await this.request<T>(method, path, body, microversion);
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  /** A flavor of `disk 0, ephemeral 1`: image-less boots on a blank local root disk. */
  async ensureFlavor(id: string, vcpus: number, ramMb: number): Promise<void> {
    const r = await this.request('GET', `/flavors/${id}`);
    if (r.status === 200) return;
    await this.ok('POST', '/flavors', { flavor: { id, name: id, vcpus, ram: ramMb, disk: 0, 'OS-FLV-EXT-DATA:ephemeral': 1 } });
  }

  /** `POST /servers` with `"networks": "none"` and a blank local root disk; returns the id. */
  async boot(name: string, flavor: string, extra: Record<string, unknown> = {}, microversion?: string): Promise<string> {
    const body = {
      server: { name, flavorRef: flavor, networks: 'none', block_device_mapping_v2: [{ boot_index: 0, source_type: 'blank', destination_type: 'local', volume_size: 1 }], ...extra },
    };
    const r = await this.ok<{ server: { id: string } }>('POST', '/servers', body, microversion);
    return r.server.id;
  }

  async server(id: string): Promise<Server | undefined> {
    const r = await this.request<{ server: Server }>('GET', `/servers/${id}`);
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw new Error(`GET /servers/${id}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.server;
  }

  /** Polls until `ok(server)`; throws with the last state seen. */
  async waitFor(id: string, ok: (s: Server | undefined) => boolean, ms = 60_000): Promise<Server | undefined> {
    const deadline = Date.now() + ms;
    let last: Server | undefined;
    for (;;) {
      last = await this.server(id);
      if (ok(last)) return last;
      if (last?.status === 'ERROR') throw new Error(`server ${id} went to ERROR: ${JSON.stringify(last.fault)}`);
      if (Date.now() > deadline) throw new Error(`server ${id}: condition not met within ${ms} ms; last ${JSON.stringify(last)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  action(id: string, body: unknown, microversion?: string): Promise<unknown> {
    return this.ok('POST', `/servers/${id}/action`, body, microversion);
  }

  async services(): Promise<Array<{ binary: string; host: string; state: string; status: string }>> {
    return (await this.ok<{ services: Array<{ binary: string; host: string; state: string; status: string }> }>('GET', '/os-services')).services;
  }

  async hypervisors(): Promise<Hypervisor[]> {
    return (await this.ok<{ hypervisors: Hypervisor[] }>('GET', '/os-hypervisors/detail', undefined, '2.1')).hypervisors;
  }

  async migrations(instance: string): Promise<Array<{ status: string; source_compute: string; dest_compute: string; migration_type: string }>> {
    const all = (await this.ok<{ migrations: Array<{ status: string; source_compute: string; dest_compute: string; migration_type: string; instance_uuid: string }> }>('GET', '/os-migrations', undefined, '2.59')).migrations;
    return all.filter((m) => m.instance_uuid === instance);
  }
}
