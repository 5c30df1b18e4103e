/**
 * A private Neutron 2025.1 (ML2/OVN, or ML2/OVS when asked) for integration tests:
 * scripts/keystone-stack (Keystone, and the Placement behind it when asked), scripts/neutron-stack
 * and its agent hosts, on ports and a STACK_DIR of the test's own, with the admin calls tests make
 * to Neutron and the hosts.
 *
 * It is not: a stand-in. Every answer comes from Debian's Keystone, Placement and Neutron; the
 * 2025.1 RabbitMQ Neutron uses is the machine-wide one scripts/stack keeps.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tapName } from '../../model/network';
import { agentSpec, type AgentSpec } from './agents';
import { release2025Unavailable } from './release';
import { portFree } from './wait';

const REPO = join(__dirname, '..', '..');
const script = (name: string): string => join(REPO, 'scripts', name);

export const CLOUD_ADMIN_PASSWORD = 'nt-admin';
export const CLOUD_SERVICE_PASSWORD = 'nt-service';

/** Why no 2025.1 Neutron can run here (not root, no 2025.1 root), or undefined. Builds the root once. */
export const neutronUnavailable = release2025Unavailable;

/** The mechanism driver of a private Neutron (scripts/neutron-stack's NEUTRON_ML2). */
export type Ml2 = 'ovn' | 'openvswitch';
/** An ML2/OVS host's security-group firewall (NEUTRON_OVS_FIREWALL): it decides the binding's `ovs_hybrid_plug`. */
export type OvsFirewall = 'openvswitch' | 'iptables_hybrid';

export interface CloudPorts {
  readonly keystone: number;
  readonly placement: number;
  readonly neutron: number;
}

async function freePorts(): Promise<CloudPorts> {
  for (let i = 0; i < 50; i++) {
    const base = 31000 + 4 * Math.floor(Math.random() * 2000);
    if ((await portFree(base)) && (await portFree(base + 1)) && (await portFree(base + 2))) return { keystone: base, placement: base + 1, neutron: base + 2 };
  }
  throw new Error('no free ports for a private Keystone, Placement and Neutron');
}

/** A Neutron port as a "VM" namespace needs it. */
export interface PluggablePort {
  readonly id: string;
  readonly mac_address: string;
  readonly fixed_ips: ReadonlyArray<{ readonly ip_address: string }>;
}

const ip = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8' });

/**
 * A "VM" for `port` on chassis `host`: namespace `ns` holding one end of a veth with the port's
 * MAC, address (/24) and the geneve MTU; the other end, named as nova names a tap, is plugged
 * into the host's br-int as os-vif plugs (iface-id, iface-status, attached-mac, vm-uuid).
 * `inHost` runs a command in the host's namespace against its OVS (scripts/neutron-stack host-exec).
 */
export async function plugVmNamespace(inHost: (...cmd: string[]) => Promise<string>, host: string, port: PluggablePort, ns: string): Promise<void> {
  const dev = tapName(port.id);
  const peer = `vm${Math.random().toString(36).slice(2, 9)}`;
  ip('netns', 'add', ns);
  ip('-n', ns, 'link', 'set', 'lo', 'up');
  ip('link', 'add', dev, 'type', 'veth', 'peer', 'name', peer);
  ip('link', 'set', dev, 'netns', `ca-${host}`);
  ip('link', 'set', peer, 'netns', ns);
  ip('-n', ns, 'link', 'set', peer, 'name', 'eth0');
  ip('-n', ns, 'link', 'set', 'eth0', 'address', port.mac_address, 'mtu', '1442', 'up');
  ip('-n', ns, 'addr', 'add', `${port.fixed_ips[0]?.ip_address}/24`, 'dev', 'eth0');
  ip('-n', `ca-${host}`, 'link', 'set', dev, 'up');
  await inHost('ovs-vsctl', '--', '--may-exist', 'add-port', 'br-int', dev, '--', 'set', 'Interface', dev,
    `external_ids:iface-id=${port.id}`, 'external_ids:iface-status=active', `external_ids:attached-mac=${port.mac_address}`, `external_ids:vm-uuid=${port.id}`);
}

export interface NeutronReply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export class NeutronCloud {
  readonly dir = mkdtempSync('/tmp/ca-ncloud-');
  private started = { keystone: false, placement: false, neutron: false };
  /** Namespaces `plugVm` made, deleted by `down`. */
  private readonly vmNamespaces: string[] = [];
  private adminToken = '';

  private constructor(
    readonly ports: CloudPorts,
    /** The compute endpoint registered in the catalog (where Neutron's notifier sends events). */
    private readonly computePort: number,
    private readonly log: (line: string) => void,
    readonly ml2: Ml2,
  ) {}

  static async create(opts: { computePort?: number; log?: (line: string) => void; ml2?: Ml2 } = {}): Promise<NeutronCloud> {
    return new NeutronCloud(await freePorts(), opts.computePort ?? 1, opts.log ?? (() => undefined), opts.ml2 ?? 'ovn');
  }

  get keystoneUrl(): string {
    return `http://127.0.0.1:${this.ports.keystone}/v3`;
  }

  get neutronUrl(): string {
    return `http://127.0.0.1:${this.ports.neutron}`;
  }

  /** This Neutron's own directory (OVN sockets, per-host OVS sockets, logs). */
  get neutronDir(): string {
    return join(this.dir, `neutron-${this.ports.neutron}`);
  }

  /** The OVSDB socket of agent host `host` (`[os_vif_ovs] ovsdb_connection`). */
  ovsdb(host: string): string {
    return `unix:${join(this.neutronDir, 'hosts', host, 'db.sock')}`;
  }

  env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
    return {
      ...process.env,
      OPENSTACK_RELEASE: '2025.1',
      STACK_DIR: this.dir,
      KEYSTONE_PORT: String(this.ports.keystone),
      KEYSTONE_PLACEMENT_PORT: String(this.ports.placement),
      KEYSTONE_URL: this.keystoneUrl,
      KEYSTONE_ADMIN_PASSWORD: CLOUD_ADMIN_PASSWORD,
      KEYSTONE_SERVICE_PASSWORD: CLOUD_SERVICE_PASSWORD,
      NEUTRON_PORT: String(this.ports.neutron),
      NOVA_API_PORT: String(this.computePort),
      NEUTRON_ML2: this.ml2,
      ...extra,
    };
  }

  /** Runs a stack script; resolves its stdout, rejects with its stderr's tail. */
  run(name: string, args: readonly string[], extraEnv: NodeJS.ProcessEnv = {}, timeoutMs = 600_000): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile('bash', [script(name), ...args], { env: this.env(extraEnv), timeout: timeoutMs, maxBuffer: 1 << 24 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${name} ${args.join(' ')}: ${err.message}\n${stderr.split('\n').slice(-15).join('\n')}`)) : resolve(stdout),
      );
    });
  }

  /** A command inside agent host `host`'s namespace, with its OVS as the default database. */
  inHost(host: string, ...cmd: string[]): Promise<string> {
    return this.run('neutron-stack', ['host-exec', host, ...cmd], {}, 60_000);
  }

  /** A "VM" namespace `ns` for `port` on chassis `host` (see `plugVmNamespace`); `down` deletes it. */
  async plugVm(host: string, port: PluggablePort, ns: string): Promise<void> {
    this.vmNamespaces.push(ns);
    await plugVmNamespace((...cmd) => this.inHost(host, ...cmd), host, port, ns);
  }

  /** Keystone (and its Placement with `placement`), the 2025.1 RabbitMQ, Neutron, and `hosts` (ML2/OVS ones with their `firewalls`, default openvswitch). */
  async up(opts: { placement?: boolean; hosts?: readonly string[]; firewalls?: Readonly<Record<string, OvsFirewall>> } = {}): Promise<void> {
    this.started.keystone = true;
    await this.timed('keystone-stack up keystone', () => this.run('keystone-stack', ['up', 'keystone']));
    if (opts.placement) {
      this.started.placement = true;
      await this.timed('keystone-stack up placement', () => this.run('keystone-stack', ['up', 'placement']));
    }
    await this.timed('stack up rabbitmq (2025.1, shared)', () => this.run('stack', ['up', 'rabbitmq']));
    this.started.neutron = true;
    await this.timed('neutron-stack up', () => this.run('neutron-stack', ['up']));
    for (const h of opts.hosts ?? []) {
      const firewall = opts.firewalls?.[h];
      await this.timed(`host-up ${h}`, () => this.run('neutron-stack', ['host-up', h], firewall ? { NEUTRON_OVS_FIREWALL: firewall } : {}));
    }
    this.adminToken = await this.token('admin', CLOUD_ADMIN_PASSWORD, 'admin');
  }

  /** Stops everything `up` started and removes the directory. Never throws. */
  async down(): Promise<void> {
    const quietly = (what: string, p: Promise<unknown>): Promise<unknown> => p.catch((e: Error) => this.log(`${what}: ${e.message}`));
    for (const ns of this.vmNamespaces) execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
    if (this.started.neutron) await quietly('neutron-stack reset', this.run('neutron-stack', ['reset']));
    if (this.started.placement) await quietly('placement down', this.run('keystone-stack', ['down', 'placement']));
    if (this.started.keystone) await quietly('keystone down', this.run('keystone-stack', ['down', 'keystone']));
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** A project-scoped token for `user`. */
  async token(user: string, password: string, project: string): Promise<string> {
    const res = await fetch(`${this.keystoneUrl}/auth/tokens`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        auth: { identity: { methods: ['password'], password: { user: { name: user, domain: { id: 'default' }, password } } }, scope: { project: { name: project, domain: { id: 'default' } } } },
      }),
    });
    const t = res.headers.get('x-subject-token');
    if (res.status !== 201 || !t) throw new Error(`keystone: ${res.status} ${await res.text()}`);
    return t;
  }

  /** The id of project `name`, as the admin sees it. */
  async projectId(name: string): Promise<string> {
    const res = await fetch(`${this.keystoneUrl}/projects?name=${encodeURIComponent(name)}`, { headers: { 'X-Auth-Token': this.adminToken } });
    const body = (await res.json()) as { projects: Array<{ id: string }> };
    const id = body.projects[0]?.id;
    if (!id) throw new Error(`keystone: no project ${name}`);
    return id;
  }

  /** One Neutron API request as the cloud's admin. */
  async neutron(method: string, path: string, body?: unknown): Promise<NeutronReply> {
    const res = await fetch(`${this.neutronUrl}/v2.0${path}`, {
      method,
      headers: { 'Content-Type': 'application/json', 'X-Auth-Token': this.adminToken },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  /** A Neutron request that must answer one of `ok`; resolves the body's `key`. */
  async must<T>(method: string, path: string, body: unknown, key: string, ok: readonly number[] = [200, 201]): Promise<T> {
    const r = await this.neutron(method, path, body);
    if (!ok.includes(r.status)) throw new Error(`neutron ${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body[key] as T;
  }

  private async timed<T>(what: string, f: () => Promise<T>): Promise<T> {
    const t0 = Date.now();
    const r = await f();
    this.log(`${what}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return r;
  }
}

/**
 * A qemu agent's spec for agent host `host` of `cloud`: instances under its directory, TCG, QEMU
 * and its VIFs in the host's namespace and Open vSwitch, Placement through the cloud's Keystone,
 * network-vif-plugged waited for `vifTimeoutS` (fatal or not).
 */
export function neutronQemuAgent(cloud: NeutronCloud, host: string, exchange: string, o: { vifTimeoutS: number; fatal: boolean }): AgentSpec {
  const s = agentSpec(host, exchange);
  const instances = join(s.dir, 'instances');
  mkdirSync(instances);
  const conf = readFileSync(s.file, 'utf8')
    .replace(/^compute_driver = .*\n/m, '')
    .replace('[DEFAULT]\n', `[DEFAULT]\ncompute_driver = qemu\ninstances_path = ${instances}\nvif_plugging_timeout = ${o.vifTimeoutS}\nvif_plugging_is_fatal = ${o.fatal}\n`)
    .replace(
      /^\[placement\]\nendpoint_override = .*\n/m,
      `[placement]\nauth_type = password\nauth_url = ${cloud.keystoneUrl}\nusername = nova\npassword = ${CLOUD_SERVICE_PASSWORD}\nproject_name = service\n`,
    )
    .concat(`[qemu]\naccel = tcg\nshutdown_timeout = 1\ndestroy_timeout = 5\nnetwork_namespace = ca-${host}\n`)
    .concat(`[os_vif_ovs]\novsdb_connection = ${cloud.ovsdb(host)}\ndatapath_type = netdev\n`);
  writeFileSync(s.file, conf, { mode: 0o600 });
  return s;
}
