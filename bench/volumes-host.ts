/**
 * The agent of the volumes bench, in this process: the compute manager as the daemon builds it
 * (its method rows, the durable journal as its record store, a real pino logger whose lines are
 * formatted and dropped) over the qemu driver on real QEMU (TCG) and the bench's Ceph, with the
 * in-process Cinder of `volumes-cinder.ts`. One guest, the net guest (128 MiB), whose record is
 * put in the journal as a build leaves it.
 *
 * Each attach or detach is one method row run as the dispatcher runs it (decode, then the flow),
 * and is split by instrumentation, not by estimate: Cinder's calls are timed by the stand-in, the
 * driver's `attachVolume`/`detachVolume` by a wrapper, the journal's writes by a timed store, and
 * inside the driver every QMP command's round trip and the guest's `DEVICE_DELETED` by a tap on the
 * instance's one QMP connection (the driver caches it, so every command it sends passes there);
 * the probes are in `volumes-probes.ts`.
 *
 * Not in it: AMQP delivery and the RPC server's journal record of the request (the rpc scenario's),
 * Placement (attach and detach make no Placement request; the claim service the manager needs
 * points at a closed port, so a request would fail the run), nova's conductor (standalone mode).
 */
import { randomUUID } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { computeMethods } from '../agent/compute/methods';
import { bindMethod, type ComputeMethod } from '../agent/compute/method-table';
import { ComputeManager } from '../agent/compute/manager';
import type { ComputePeers, RequestContext } from '../agent/compute/ports';
import { DurableJournal } from '../agent/journal/durable';
import { loadConfig } from '../config/loader';
import { systemClock } from '../lib/clock';
import { createLogger } from '../lib/logging/logger';
import type { Flavor, InstanceRecord } from '../model/instance';
import { NoAuth } from '../tracker/placement/auth';
import { PlacementClient } from '../tracker/placement/client';
import { PlacementHttp } from '../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../tracker/tracker';
import { ProcessExec } from '../virt-drivers/host/exec';
import { RootedHostFs } from '../virt-drivers/host/host-fs';
import { QemuDriver } from '../virt-drivers/qemu/driver';
import type { TimedCinder } from './volumes-cinder';
import { GuestConsole } from './volumes-guest';
import { DroppingNotifier, QmpTap, TimedStore } from './volumes-probes';

const HOST = 'bench-volumes';
const IMAGE = 'net-guest.qcow2';
const FLAVOR: Flavor = { name: 'bench.volumes', vcpus: 1, memory_mb: 128, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };
/** Nothing listens on port 9 (discard) here: a Placement request would fail loudly. */
const NO_PLACEMENT = 'http://127.0.0.1:9/';

/** One attach (reserve + attach_volume) or detach (detach_volume), split by who spent the time (ms). */
export interface FlowSample {
  /** `reserve_block_device_name` (a call; attach only, 0 for a detach). */
  readonly reserveMs: number;
  /** The `attach_volume` or `detach_volume` row: decode and flow. */
  readonly flowMs: number;
  readonly cinderMs: number;
  readonly cinderCalls: readonly string[];
  /** The compute flow's records written to the journal (each on disk, fsync'd, before the next step). */
  readonly journalMs: number;
  /** The driver's `attachVolume`/`detachVolume`, everything inside included. */
  readonly driverMs: number;
  /** QEMU's answers to the driver's QMP commands (blockdev-add opens the RBD image: librbd's connect is here). */
  readonly qmpMs: number;
  /** Each QMP command with its round trip (ms). */
  readonly qmpCommands: ReadonlyArray<{ readonly command: string; readonly ms: number }>;
  /** From QEMU's answer to `device_del` to the guest's `DEVICE_DELETED` (detach only). */
  readonly guestMs: number;
}

const NO_PEERS: ComputePeers = {
  cast: () => Promise.reject(new Error('volumes bench: attach and detach talk to no other host')),
  call: () => Promise.reject(new Error('volumes bench: attach and detach talk to no other host')),
};

export class VolumeHost {
  readonly uuid = randomUUID();
  private tap: QmpTap | undefined;
  private driverSpent = 0;
  private console: GuestConsole;

  private constructor(
    private readonly driver: QemuDriver,
    private readonly journal: DurableJournal,
    private readonly store: TimedStore,
    private readonly manager: ComputeManager,
    private readonly rows: ReadonlyMap<string, ComputeMethod>,
    private readonly cinder: TimedCinder,
    private readonly instancesPath: string,
  ) {
    this.console = new GuestConsole(join(instancesPath, this.uuid, 'console.log'));
    // Instrumentation: the flows reach the driver through these two methods only.
    const attach = driver.attachVolume.bind(driver);
    const detach = driver.detachVolume.bind(driver);
    driver.attachVolume = (i, v) => this.timedDriver(() => attach(i, v));
    driver.detachVolume = (i, v) => this.timedDriver(() => detach(i, v));
  }

  /** The agent under `root` (its state, instances, images and the key directory `secrets`), the net guest's `image` copied in. */
  static async start(root: string, image: string, secrets: string, cinder: TimedCinder): Promise<VolumeHost> {
    const images = join(root, 'images');
    mkdirSync(images, { recursive: true });
    copyFileSync(image, join(images, IMAGE));
    const set: Record<string, string> = {
      DEFAULT__HOST: HOST,
      DEFAULT__STATE_PATH: join(root, 'state'),
      DEFAULT__INSTANCES_PATH: join(root, 'instances'),
      QEMU__ACCEL: 'tcg',
      QEMU__IMAGES_PATH: images,
      QEMU__RBD_SECRETS_DIR: secrets,
      QEMU__DESTROY_TIMEOUT: '5',
    };
    const env = Object.fromEntries(Object.entries(set).map(([k, v]) => [`COMPUTE_AGENT__${k}`, v]));
    const { config } = loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' });
    mkdirSync(config.DEFAULT.state_path, { recursive: true });
    const { logger } = createLogger({ level: 'info', sink: { write: () => undefined } });
    const driver = new QemuDriver({ config, logger, clock: systemClock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
    await driver.init(HOST);
    const journal = await DurableJournal.open(config.DEFAULT.state_path, { logger });
    const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(NO_PLACEMENT) }));
    const store = new TimedStore(journal);
    const tracker = new ResourceTracker({ api, driver, nodename: HOST, rootUuid: randomUUID(), initialRatios: initialRatiosFrom(config.DEFAULT), logger });
    const manager = new ComputeManager({
      host: HOST,
      driver,
      claims: tracker.claims,
      store,
      peers: NO_PEERS,
      notifier: new DroppingNotifier(),
      logger,
      volumes: { cinder: cinder.clients(), ip: '127.0.0.1', allocateRetries: 1, allocateIntervalS: 1 },
    });
    const rows = new Map(computeMethods(manager).map((m) => [m.name, m]));
    return new VolumeHost(driver, journal, store, manager, rows, cinder, config.DEFAULT.instances_path);
  }

  private async timedDriver(op: () => Promise<void>): Promise<void> {
    const t0 = performance.now();
    try {
      await op();
    } finally {
      this.driverSpent += performance.now() - t0;
    }
  }

  /** Spawns the guest, waits for it to report its boot disk, and records it as a finished build does. */
  async boot(timeoutMs = 180_000): Promise<void> {
    await this.driver.spawn({ uuid: this.uuid, name: `bench-${this.uuid.slice(0, 8)}`, flavor: FLAVOR, image_ref: IMAGE, allocations: {} });
    await this.console.until('its boot disk', (l) => l.disk === 'vda' && l.kind === 'seen', timeoutMs);
    this.tap = new QmpTap(await this.driver.monitor({ uuid: this.uuid, name: '' }));
    const now = new Date().toISOString();
    const rec: InstanceRecord = { uuid: this.uuid, name: `bench-${this.uuid.slice(0, 8)}`, host: HOST, vm_state: 'active', task_state: null, power_state: 1, flavor: FLAVOR, project_id: 'bench', user_id: 'bench', image_ref: IMAGE, allocations: {}, launched_at: now, updated_at: now };
    await this.manager.context.save(rec);
  }

  /** Runs a method row as the dispatcher does: arguments as they come off the wire, decoded, then the flow. */
  private async call(method: string, args: Record<string, unknown>): Promise<{ ms: number; reply: unknown }> {
    const row = this.rows.get(method);
    if (!row) throw new Error(`no method ${method}`);
    const wire = JSON.parse(JSON.stringify(args)) as Record<string, unknown>;
    const ctx: RequestContext = { request_id: `req-${randomUUID()}`, auth_token: 'bench-user-token', project_id: 'bench', user_id: 'bench' };
    const t0 = performance.now();
    const reply = await bindMethod(row, wire, ctx).run();
    return { ms: performance.now() - t0, reply };
  }

  private reset(): void {
    this.cinder.take();
    this.tap?.take();
    this.driverSpent = 0;
    this.store.spent = 0;
  }

  private sample(reserveMs: number, flowMs: number): FlowSample {
    const c = this.cinder.take();
    const q = this.tap?.take() ?? { ms: 0, commands: [], guestMs: 0 };
    const s = { reserveMs, flowMs, cinderMs: c.ms, cinderCalls: c.calls, journalMs: this.store.spent, driverMs: this.driverSpent, qmpMs: q.ms, qmpCommands: q.commands, guestMs: q.guestMs };
    this.driverSpent = 0;
    this.store.spent = 0;
    return s;
  }

  /** nova-api's attach: reserve (a call), its attachment (not timed), attach_volume. Resolves when the flow is done; the guest may not see the disk yet. */
  async attach(volumeId: string): Promise<{ sample: FlowSample; attachment: string }> {
    this.console.mark();
    this.reset();
    const instance = { uuid: this.uuid };
    const reserve = await this.call('reserve_block_device_name', { instance, device: null, volume_id: volumeId, disk_bus: null, device_type: null, tag: null, multiattach: false });
    const attachment = this.cinder.reserve(volumeId);
    const bdm = { ...(reserve.reply as Record<string, unknown>), attachment_id: attachment };
    const flow = await this.call('attach_volume', { instance, bdm });
    return { sample: this.sample(reserve.ms, flow.ms), attachment };
  }

  /** nova-api's detach (the volume `detaching` in Cinder): detach_volume. The driver waits for the guest's DEVICE_DELETED. */
  async detach(volumeId: string, attachment: string): Promise<FlowSample> {
    this.console.mark();
    this.reset();
    const flow = await this.call('detach_volume', { instance: { uuid: this.uuid }, volume_id: volumeId, attachment_id: attachment });
    return this.sample(0, flow.ms);
  }

  /** The guest's console since the last attach or detach began. */
  get guest(): GuestConsole {
    return this.console;
  }

  qemuPid(): number {
    return Number(readFileSync(join(this.instancesPath, this.uuid, 'qemu.pid'), 'utf8').trim());
  }

  /** Bytes of the instance's record as the journal keeps it (JSON) and of the driver's `instance.json`. */
  recordBytes(): { journal: number; driver: number } {
    const file = join(this.instancesPath, this.uuid, 'instance.json');
    return { journal: JSON.stringify(this.manager.record(this.uuid) ?? {}).length, driver: existsSync(file) ? statSync(file).size : 0 };
  }

  /** Destroys the guest, lets the driver go and closes the journal. Never throws. */
  async close(): Promise<void> {
    await this.driver.destroy({ uuid: this.uuid, name: '' }).catch(() => undefined);
    await this.driver.cleanupHost(HOST).catch(() => undefined);
    await this.journal.close().catch(() => undefined);
  }
}
