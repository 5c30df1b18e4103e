/**
 * Two (or more) compute managers in one process for fast flow tests: fake drivers on a host file,
 * trackers synced to Placement (mocked, or the real one), in-memory record stores, and peers that
 * route agent-to-agent casts and calls straight into the other manager's method table (arguments
 * decoded by the table's rows, as the dispatcher decodes them). Casts run asynchronously, in order
 * per instance, like messages on a queue.
 */
import type { ControlPlane } from '../../agent/compute/control-plane';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { silentLogger, type Logger } from '../../lib/logging/logger';
import { systemClock, type Clock } from '../../lib/clock';
import { NetworkService } from '../../agent/network/network-api';
import type { NeutronApi } from '../../agent/network/neutron-api';
import { ComputeManager, type ManagerDeps } from '../../agent/compute/manager';
import { computeMethods } from '../../agent/compute/methods';
import { bindMethod, type BoundMethod, type ComputeMethod } from '../../agent/compute/method-table';
import { MemoryNotifier, type ComputePeers, type RecordStore, type RequestContext } from '../../agent/compute/ports';
import { loadConfig } from '../../config/loader';
import type { Conductor } from '../../agent/nova/conductor';
import { NovaControlPlane } from '../../agent/nova/control-plane';
import type { PlacementApi } from '../../tracker/placement/api';
import { NoAuth } from '../../tracker/placement/auth';
import { PlacementClient } from '../../tracker/placement/client';
import { PlacementHttp } from '../../tracker/placement/http';
import { MockPlacement } from './mock-placement';
import { FakeNeutron } from './fake-neutron';
import { ManualClock } from './manual-clock';
import { initialRatiosFrom, ResourceTracker } from '../../tracker/tracker';
import { FakeDriver } from '../../virt-drivers/fake/driver';
import { ProcessExec } from '../../virt-drivers/host/exec';
import { RootedHostFs } from '../../virt-drivers/host/host-fs';

export class MemoryStore implements RecordStore {
  readonly data = new Map<string, Map<string, unknown>>();
  put(kind: string, key: string, value: unknown): Promise<void> {
    (this.data.get(kind) ?? this.data.set(kind, new Map()).get(kind))?.set(key, JSON.parse(JSON.stringify(value)) as unknown);
    return Promise.resolve();
  }
  del(kind: string, key: string): Promise<void> {
    this.data.get(kind)?.delete(key);
    return Promise.resolve();
  }
  get<T>(kind: string, key: string): T | undefined {
    const v = this.data.get(kind)?.get(key);
    return v === undefined ? undefined : (JSON.parse(JSON.stringify(v)) as T);
  }
  list<T>(kind: string): Array<[string, T]> {
    return [...(this.data.get(kind) ?? new Map<string, unknown>()).entries()].map(([k, v]) => [k, JSON.parse(JSON.stringify(v)) as T]);
  }
}

export const HOST_FILE = {
  cpu: { sockets: 2, cores_per_socket: 16, threads_per_core: 2, vendor: 'GenuineIntel', flags: ['avx2', 'sse4_2'] },
  memory: { total_mb: 262144 },
  disk: { total_gb: 4000 },
  gpus: [],
  nics: [],
};

/** Routes peer messages to the managers registered by host name. */
export class InProcessPeers implements ComputePeers {
  readonly tables = new Map<string, Map<string, ComputeMethod>>();
  readonly pending = new Set<Promise<unknown>>();
  readonly failures: Array<{ host: string; method: string; error: string }> = [];
  private readonly chains = new Map<string, Promise<unknown>>();

  register(host: string, methods: ComputeMethod[]): void {
    this.tables.set(host, new Map(methods.map((x) => [x.name, x])));
  }

  private find(host: string, method: string): ComputeMethod {
    const m = this.tables.get(host)?.get(method);
    if (!m) throw new Error(`no method ${method} on ${host}`);
    return m;
  }

  /** Decodes `args` with the row's decoders, as the dispatcher does on arrival (a JSON copy, as on the wire). */
  private bind(row: ComputeMethod, args: Readonly<Record<string, unknown>>, ctx: RequestContext): BoundMethod {
    return bindMethod(row, JSON.parse(JSON.stringify(args)) as Record<string, unknown>, ctx);
  }

  cast(host: string, method: string, args: Readonly<Record<string, unknown>>, ctx: RequestContext): Promise<void> {
    const m = this.find(host, method);
    let bound: BoundMethod;
    try {
      bound = this.bind(m, args, ctx);
    } catch (e) {
      this.failures.push({ host, method, error: (e as Error).message });
      return Promise.resolve();
    }
    const key = `${host}/${bound.key ?? ''}`;
    const prev = this.chains.get(key) ?? Promise.resolve();
    const p = prev
      .then(() => new Promise((r) => setImmediate(r)))
      .then(() => bound.run())
      .catch((e: unknown) => {
        this.failures.push({ host, method, error: (e as Error).message });
      });
    this.chains.set(key, p);
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
    return Promise.resolve();
  }

  async call<T>(host: string, method: string, args: Readonly<Record<string, unknown>>, ctx: RequestContext): Promise<T> {
    return (await this.bind(this.find(host, method), args, ctx).run()) as T;
  }

  /** Waits until no cast is in flight (casts may cast further). */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}

export interface HarnessHost {
  readonly name: string;
  readonly rootUuid: string;
  readonly driver: FakeDriver;
  readonly tracker: ResourceTracker;
  readonly manager: ComputeManager;
  readonly store: MemoryStore;
  readonly notifier: MemoryNotifier;
}

/** What a test may add to a host's manager: a Neutron (a `NetworkService` over a fake), the vif plugging options, the clock of event waits, Cinder, Glance's writes. */
export type HostExtras = Partial<Pick<ManagerDeps, 'network' | 'vifPlugging' | 'clock' | 'volumes' | 'images' | 'shelvedOffloadTimeS' | 'reclaimIntervalS' | 'now' | 'consoles'>>;

/**
 * The extras of host `name` whose ports live in `neutron`: a `NetworkService` binding to `name`,
 * the vif plugging options (default: no wait, fatal) and the clock event waits run on.
 */
export function neutronExtras(name: string, neutron: NeutronApi, clock: Clock, vifPlugging: { timeoutS: number; fatal: boolean; onWait?: (outcome: string, seconds: number) => void } = { timeoutS: 0, fatal: true }): HostExtras {
  return { network: new NetworkService({ neutron, host: name, logger: silentLogger(), clock }), vifPlugging, clock };
}

export async function makeHost(name: string, api: PlacementApi, peers: InProcessPeers, logger: Logger = silentLogger(), controlPlane?: ControlPlane, extras: HostExtras = {}): Promise<HarnessHost> {
  const dir = mkdtempSync(join(tmpdir(), `ca-${name}-`));
  const hostFile = join(dir, 'host.json');
  writeFileSync(hostFile, JSON.stringify(HOST_FILE));
  const { config } = loadConfig({
    files: [],
    env: { COMPUTE_AGENT__DEFAULT__HOST: name, COMPUTE_AGENT__DEFAULT__STATE_PATH: dir, COMPUTE_AGENT__FAKE__HOST_FILE: hostFile },
    defaultFile: '/nonexistent',
  });
  const driver = new FakeDriver({ config, logger, clock: systemClock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
  await driver.init(name);
  const rootUuid = randomUUID();
  const tracker = new ResourceTracker({ api, driver, nodename: name, rootUuid, initialRatios: initialRatiosFrom(config.DEFAULT), logger });
  await tracker.updateFromDriver();
  const store = new MemoryStore();
  const notifier = new MemoryNotifier();
  const manager = new ComputeManager({ host: name, driver, claims: tracker.claims, store, peers, notifier, logger, ...(controlPlane ? { controlPlane } : {}), ...extras });
  peers.register(name, computeMethods(manager));
  return { name, rootUuid, driver, tracker, manager, store, notifier };
}

/**
 * One host on a mocked Placement, in nova mode when `conductor` is given (nova's control plane
 * writing through it): what the single-host flow tests share.
 */
export async function singleHost(name: string, conductor?: Conductor, extras: HostExtras = {}): Promise<{ mock: MockPlacement; api: PlacementClient; peers: InProcessPeers; host: HarnessHost }> {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  // A host given console settings serves consoles: nova mode cleans their tokens as nova-compute does.
  const cp = conductor ? new NovaControlPlane({ conductor, host: name, myIp: '192.0.2.10', computeNodeId: () => 1, logger: silentLogger(), consoles: extras.consoles !== undefined }) : undefined;
  return { mock, api, peers, host: await makeHost(name, api, peers, silentLogger(), cp, extras) };
}

export { FLAVOR, instanceArgs } from './instance-args';

/**
 * Two hosts (`host-a`, `host-b`) on one mocked Placement and one in-memory Neutron with a network
 * `private`, their RPC between them in-process: the setting of the network move tests. `destAlive:
 * false`: host-b has no network agent, so Neutron cannot bind ports there.
 */
export async function neutronPair(o: { timeoutS?: number; destAlive?: boolean; ctx?: RequestContext } = {}) {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const neutron = new FakeNeutron();
  neutron.aliveHosts.add('host-a');
  if (o.destAlive !== false) neutron.aliveHosts.add('host-b');
  const net = neutron.addNetwork({ name: 'private' }).network.id;
  const clock = new ManualClock();
  const host = (name: string): Promise<HarnessHost> => makeHost(name, api, peers, silentLogger(), undefined, neutronExtras(name, neutron, clock, { timeoutS: o.timeoutS ?? 0, fatal: true }));
  const a = await host('host-a');
  const b = await host('host-b');
  const ctx = o.ctx ?? { request_id: 'req-neutron-pair' };
  const call = (h: HarnessHost, method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(h.name, method, args, ctx);
  return { mock, neutron, net, peers, clock, a, b, call };
}
