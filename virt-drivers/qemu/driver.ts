/**
 * The `qemu` virt driver: real VMs, one `qemu-system-x86_64` process per instance, managed over
 * QMP; cold and live migration between hosts; VMs that outlive the agent and are adopted again
 * when it restarts. Call sequences and data formats: `README.md` beside this file.
 *
 * Discovery is the fake driver's: the host probes (`host/`) laid out by `layout/`, plus this
 * driver's capability traits. Instance state lives in each instance's directory under
 * `instances_path` (`instance-files.ts`), so nothing the driver needs is held only in memory.
 *
 * It is: a map from the `VirtDriver` contract onto the operation modules (`lifecycle`, `nics`,
 * `cold-migration`, `live-source`, `live-destination`, `recovery`). It is not: the operations
 * themselves (volume hot plug is `volume-hotplug.ts`). NICs are Neutron ports plugged into Open
 * vSwitch (`../net/`). Images are local files or Glance images in the host's image cache
 * (`image-setup.ts`).
 */
import { stat } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import type { Logger } from '../../lib/logging/logger';
import type { ProviderTree } from '../../model/provider-tree';
import type { AllocationsByConsumer, MoveInstruction } from '../../model/provider-types';
import type { NetworkInfo, Vif } from '../../model/network';
import { capabilityTraits, type ConsoleEndpoint, type ConsoleKind, type DriverCapabilities, type PowerOffOptions, type SnapshotImage, type SpawnOptions, type VirtDriver } from '../driver';
import { DriverError, DriverInitError, InstanceNotFoundError, InstanceStateError } from '../errors';
import { discoverHost, type HostFacts } from '../host/discover';
import { applyPlan, RootProviderMissingError } from '../layout/apply';
import { SpeedMemory } from '../layout/nic';
import { layoutOptionsFromConfig, type LayoutOptions } from '../layout/options';
import { planHost } from '../layout/plan';
import type { AttachedVolume, DriverContext, Flavor, HostRef, InstanceInfo, InstanceRef, InstanceSpec, LiveMigrateData, MigrateDiskResult, MigrationRef } from '../types';
import * as cold from './cold-migration';
import { getConsole } from './consoles';
import { notInitialised, plugAll, type QemuFacts, type QemuHost } from './context';
import { chooseAccel, probeQemu, tcgMigrationHazard } from './host';
import type { GlanceApi } from '../glance/api';
import { buildImages, CacheManager } from './image-setup';
import { InstanceTable } from './instances';
import * as life from './lifecycle';
import * as liveDest from './live-destination';
import * as liveSource from './live-source';
import { defaultPlugger, type VifPlugger } from '../net/plugger';
import * as nics from './nics';
import * as vols from './volume-hotplug';
import * as swap from './volume-swap';
import * as suspension from './suspend';
import * as guestAgentOps from './guest-agent-ops';
import * as snap from './snapshot';
import * as rescuing from './rescue';
import { MAX_SOCKET_PATH, qemuOptionsFromConfig, type QemuOptions } from './options';
import { HostProcesses, type VmProcesses } from './process';
import type { QmpClient } from './qmp';
import { recoverInstances, type RecoveredInstance } from './recovery';

/** What this driver can do, as nova's capability flags (the rest are false). */
const CAPABILITIES: DriverCapabilities = {
  supports_attach_interface: true,
  // COMPUTE_VOLUME_EXTEND: a Linux guest sees an RBD volume grow after block_resize
  // (test/integration/virt-drivers/qemu/rbd-volumes.test.ts).
  supports_extend_volume: true,
  supports_image_type_qcow2: true,
  supports_image_type_raw: true,
};

/** Ports a test may replace; the defaults are the real ones. */
export interface QemuDriverPorts {
  readonly processes?: VmProcesses;
  /** Whether /dev/kvm opens read-write (for `accel = auto | kvm`). */
  readonly kvmUsable?: () => Promise<boolean>;
  /** Glance, in place of the client `[glance]` and the context's auth would make. */
  readonly glance?: GlanceApi;
  /** VIF plugging, in place of Open vSwitch through `[os_vif_ovs]`. */
  readonly plugger?: VifPlugger;
}

/**
 * The qemu driver. One instance per agent (per host); owns the VMs of its `instances_path` while it
 * runs, and lets go of them (never stopping them) at `cleanupHost`. Safe for concurrent calls:
 * each instance's operations are serialised by its own lock. Errors are `DriverError`s (see
 * `../errors.ts` and `errors.ts`); `init` throws `DriverInitError` when QEMU is missing or the
 * configuration cannot work on this host.
 */
export class QemuDriver implements VirtDriver {
  readonly name = 'qemu';
  readonly capabilities = CAPABILITIES;
  private readonly log: Logger;
  private readonly opts: QemuOptions;
  private readonly layout: LayoutOptions;
  private readonly lineages = new Map<string, string>();
  private readonly speeds = new SpeedMemory();
  private readonly host: QemuHost;
  private facts: QemuFacts | undefined;
  private lastFacts: HostFacts | undefined;
  private recovered: readonly RecoveredInstance[] = [];
  private readonly cacheManager: CacheManager | undefined;

  constructor(
    private readonly ctx: DriverContext,
    private readonly ports: QemuDriverPorts = {},
  ) {
    this.log = ctx.logger.child({ driver: 'qemu' });
    this.opts = qemuOptionsFromConfig(ctx.config);
    this.layout = layoutOptionsFromConfig(ctx.config, capabilityTraits(CAPABILITIES));
    const processes = ports.processes ?? new HostProcesses();
    const vmDeps = { processes, clock: ctx.clock, logger: this.log, opts: this.opts };
    const { images, cache } = buildImages(this.opts, { exec: ctx.exec, clock: ctx.clock, log: this.log, ...(ports.glance ? { glance: ports.glance } : {}), ...(ctx.glanceAuth ? { glanceAuth: ctx.glanceAuth } : {}) });
    this.host = {
      opts: this.opts,
      log: this.log,
      clock: ctx.clock,
      exec: ctx.exec,
      images,
      processes,
      vmDeps,
      table: new InstanceTable(vmDeps),
      plugger: ports.plugger ?? defaultPlugger(ctx.exec, { ...this.opts.ovs, ...(this.opts.netns === undefined ? {} : { netns: this.opts.netns }) }),
      facts: () => {
        if (!this.facts) throw notInitialised();
        return this.facts;
      },
    };
    this.host.table.beforeStart = (m) => plugAll(this.host, m.rec.uuid, m.rec.vifs ?? []);
    this.cacheManager = cache && new CacheManager(cache, () => this.imagesInUse(), this.log);
  }

  /** Probes QEMU and the accelerator, then finds this host's instances, adopting running VMs. */
  async init(host: string): Promise<void> {
    const longest = `${this.opts.instancesPath}/00000000-0000-0000-0000-000000000000_resize/qmp.sock`;
    if (Buffer.byteLength(longest) > MAX_SOCKET_PATH) {
      throw new DriverInitError(
        `[DEFAULT] instances_path ${this.opts.instancesPath} is too long: QMP socket paths under it would exceed ${MAX_SOCKET_PATH} bytes (keep it under ${MAX_SOCKET_PATH - longest.length + this.opts.instancesPath.length} characters)`,
      );
    }
    const version = await probeQemu(this.ctx.exec, this.opts.binary, this.opts.qemuImg);
    const accel = await chooseAccel(this.opts.accel, this.ctx.fs, this.ports.kvmUsable);
    this.facts = { version, accel };
    this.host.table.detachAll();
    this.host.table.active.clear();
    this.host.table.resized.clear();
    try {
      this.recovered = await recoverInstances(this.host);
    } catch (e) {
      throw new DriverInitError(`cannot read instances_path ${this.opts.instancesPath}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`, { cause: e });
    }
    await liveDest.sweepProbes(this.host);
    await snap.sweepSnapshots(this.host);
    if (this.cacheManager && this.opts.imageCache.intervalMs !== null) this.cacheManager.start(this.opts.imageCache.intervalMs);
    const count = (o: RecoveredInstance['outcome']): number => this.recovered.filter((r) => r.outcome === o).length;
    this.log.info(
      { host, qemu: version.text, accel: accel.accel, accel_reason: accel.reason, instances_path: this.opts.instancesPath, adopted: count('adopted'), died: count('died'), stopped: count('stopped'), unreadable: count('unreadable') },
      'qemu driver ready',
    );
    const hazard = tcgMigrationHazard(version, accel.accel);
    if (hazard) this.log.warn({ host, qemu: version.text, accel: accel.accel }, hazard);
  }

  /** Lets go of the VMs (closes QMP connections); they keep running for the next agent to adopt. */
  async cleanupHost(_host: string): Promise<void> {
    this.cacheManager?.stop();
    this.host.table.detachAll();
  }

  /** One pass of the image cache manager now (removes unused cached images); nothing without Glance. */
  async pruneImageCache(): Promise<void> {
    await this.cacheManager?.runOnce();
  }

  /** The cached images the instances of this host (and their cold-migration copies) sit on. */
  private imagesInUse(): ReadonlySet<string> {
    const { active, resized } = this.host.table;
    return new Set([...active.values(), ...resized.values()].flatMap((m) => (m.rec.image ? [m.rec.image.path] : [])));
  }

  /** What `init` found in instances_path, for the compute manager to reconcile with its journal. */
  recoveryReport(): readonly RecoveredInstance[] {
    return this.recovered;
  }

  /** QEMU's version in libvirt's integer form (7.2.0: 7002000), as nova's libvirt driver reports it; 0 before init. */
  hypervisorVersion(): number {
    const v = this.facts?.version;
    return v ? v.major * 1_000_000 + v.minor * 1_000 + v.micro : 0;
  }

  /** The facts behind the last tree. */
  lastHostFacts(): HostFacts | undefined {
    return this.lastFacts;
  }

  /** The accelerator and QEMU version `init` found. @throws DriverError before init */
  hostFacts(): QemuFacts {
    return this.host.facts();
  }

  /**
   * The shared QMP connection of a running instance, for diagnostics and tests. Commands that
   * change the VM behind the driver's back (quit, stop, migrate) void what it reports.
   * @throws InstanceNotFoundError, InstanceStateError when no process runs, QmpError
   */
  async monitor(instance: InstanceRef): Promise<QmpClient> {
    const m = life.activeInstance(this.host, instance);
    if (!m.vm || !(await m.vm.alive())) throw new InstanceStateError(instance.uuid, 'not running', 'open its monitor');
    return m.vm.qmp();
  }

  async updateProviderTree(tree: ProviderTree, nodename: string, allocations?: AllocationsByConsumer): Promise<MoveInstruction[]> {
    if (!tree.exists(nodename)) throw new RootProviderMissingError(nodename);
    const c = this.ctx.config.compute;
    const facts = await discoverHost(this.ctx, {
      instancesPath: this.opts.instancesPath,
      probeTimeoutMs: c.probe_timeout * 1000,
      commandTimeoutMs: c.probe_command_timeout * 1000,
      disabled: c.disabled_host_probes,
    });
    this.lastFacts = facts;
    const plan = planHost({ nodename, facts, options: this.layout, tree, speeds: this.speeds });
    for (const note of plan.notes) this.log.warn(note);
    // Instances hold no devices (no GPU or NIC passthrough yet): nothing to locate on children.
    const { moves, warnings } = applyPlan({ tree, nodename, plan, lineages: this.lineages, locate: () => undefined, ...(allocations ? { allocations } : {}) });
    for (const w of warnings) this.log.warn(w);
    return moves;
  }

  capabilitiesAsTraits(): Readonly<Record<string, boolean>> {
    return capabilityTraits(CAPABILITIES);
  }

  async listInstances(): Promise<InstanceInfo[]> {
    const { active, resized } = this.host.table;
    const out: InstanceInfo[] = [];
    for (const m of active.values()) {
      if (m.rec.task === 'migrated-out') continue;
      out.push({ uuid: m.rec.uuid, name: m.rec.name, powerState: await this.host.table.powerState(m) });
    }
    for (const m of resized.values()) if (!active.has(m.rec.uuid)) out.push({ uuid: m.rec.uuid, name: m.rec.name, powerState: 'SHUTDOWN' });
    return out.sort((a, b) => a.uuid.localeCompare(b.uuid));
  }

  async getInfo(instance: InstanceRef): Promise<InstanceInfo> {
    const m = this.host.table.active.get(instance.uuid) ?? this.host.table.resized.get(instance.uuid);
    if (!m) throw new InstanceNotFoundError(instance.uuid);
    return { uuid: m.rec.uuid, name: m.rec.name, powerState: await this.host.table.powerState(m) };
  }

  async getHostUptime(): Promise<number> {
    const raw = await this.ctx.fs.readValue('/proc/uptime');
    const seconds = Number(raw?.split(/\s+/)[0]);
    if (raw === undefined || !Number.isFinite(seconds)) throw new DriverError('/proc/uptime cannot be read');
    return Math.floor(seconds);
  }

  async spawn(instance: InstanceSpec, opts: SpawnOptions = {}): Promise<void> {
    this.host.facts();
    return life.spawn(this.host, instance, opts.powerOn !== false, opts.beforeRun);
  }

  // VIFs: `nics.ts` (plugging through `../net/`, hot plug over QMP).
  async plugVifs(instance: InstanceRef, vifs: NetworkInfo): Promise<void> { return nics.plugVifs(this.host, instance, vifs); }
  async unplugVifs(instance: InstanceRef, vifs: NetworkInfo): Promise<void> { return nics.unplugVifs(this.host, instance, vifs); }
  async attachInterface(instance: InstanceRef, vif: Vif): Promise<void> { return nics.attachInterface(this.host, instance, vif); }
  async detachInterface(instance: InstanceRef, vif: Vif): Promise<void> { return nics.detachInterface(this.host, instance, vif); }

  async destroy(instance: InstanceRef): Promise<void> {
    return life.destroy(this.host, instance);
  }
  // Volumes: `volume-hotplug.ts` (QMP hot plug of RBD disks, the definition kept in step).
  async attachVolume(instance: InstanceRef, volume: AttachedVolume): Promise<void> { return vols.attachVolume(this.host, instance, volume); }
  async detachVolume(instance: InstanceRef, volumeId: string): Promise<void> { return vols.detachVolume(this.host, instance, volumeId); }
  async extendVolume(instance: InstanceRef, volumeId: string, bytes: number): Promise<void> { return vols.extendVolume(this.host, instance, volumeId, bytes); }
  async swapVolume(instance: InstanceRef, oldVolumeId: string, newVolume: AttachedVolume): Promise<void> { return swap.swapVolume(this.host, instance, oldVolumeId, newVolume); }


  async powerOn(instance: InstanceRef): Promise<void> {
    return life.powerOn(this.host, instance);
  }

  async powerOff(instance: InstanceRef, opts: PowerOffOptions = {}): Promise<void> {
    return life.powerOff(this.host, instance, opts);
  }

  async reboot(instance: InstanceRef, type: 'soft' | 'hard'): Promise<void> {
    return life.reboot(this.host, instance, type);
  }

  async pause(instance: InstanceRef): Promise<void> { return suspension.pause(this.host, instance); }
  async unpause(instance: InstanceRef): Promise<void> { return suspension.unpause(this.host, instance); }
  async suspend(instance: InstanceRef): Promise<void> { return suspension.suspend(this.host, instance); }
  async resume(instance: InstanceRef): Promise<void> { return suspension.resume(this.host, instance); }
  async triggerCrashDump(instance: InstanceRef): Promise<void> { return suspension.triggerCrashDump(this.host, instance); }
  async setAdminPassword(instance: InstanceRef, password: string): Promise<void> { return guestAgentOps.setAdminPassword(this.host, instance, password); }
  async quiesce(instance: InstanceRef): Promise<void> { return guestAgentOps.setFrozen(this.host, instance, true); }
  async unquiesce(instance: InstanceRef): Promise<void> { return guestAgentOps.setFrozen(this.host, instance, false); }
  async rescue(instance: InstanceRef, imageRef: string, cleanShutdown: boolean): Promise<void> { return rescuing.rescue(this.host, instance, imageRef, cleanShutdown); }
  async unrescue(instance: InstanceRef): Promise<void> { return rescuing.unrescue(this.host, instance); }

  async snapshot(instance: InstanceRef, upload: (image: SnapshotImage) => Promise<void>, options?: { readonly requireQuiesce?: boolean }): Promise<void> {
    return snap.snapshot(this.host, instance, upload, options?.requireQuiesce === true);
  }

  async instanceFileVisible(path: string): Promise<boolean> {
    const root = resolve(this.host.opts.instancesPath);
    if (!isAbsolute(path) || !resolve(path).startsWith(`${root}/`)) return false;
    return stat(path).then(
      () => true,
      () => false,
    );
  }

  async getConsoleOutput(instance: InstanceRef): Promise<Buffer> {
    return life.consoleOutput(this.host, instance);
  }

  async getConsole(instance: InstanceRef, kind: ConsoleKind): Promise<ConsoleEndpoint> {
    return getConsole(this.host, instance, kind);
  }

  async migrateDiskAndPowerOff(instance: InstanceRef, migration: MigrationRef, flavor: Flavor): Promise<MigrateDiskResult> {
    return cold.migrateDiskAndPowerOff(this.host, instance, migration, flavor);
  }

  async finishMigration(instance: InstanceSpec, migration: MigrationRef, disk: MigrateDiskResult, opts: { readonly powerOn?: boolean } = {}): Promise<void> {
    this.host.facts();
    return cold.finishMigration(this.host, instance, migration, disk, opts.powerOn !== false);
  }

  async confirmMigration(instance: InstanceRef, migration: MigrationRef): Promise<void> {
    return cold.confirmMigration(this.host, instance, migration);
  }

  async finishRevertMigration(instance: InstanceRef, migration: MigrationRef, opts: { readonly powerOn?: boolean } = {}): Promise<void> {
    return cold.finishRevertMigration(this.host, instance, migration, opts.powerOn !== false);
  }

  async checkCanLiveMigrateDestination(instance: InstanceSpec, source: HostRef): Promise<LiveMigrateData> {
    return liveDest.checkCanLiveMigrateDestination(this.host, instance, source);
  }

  async checkCanLiveMigrateSource(instance: InstanceRef, data: LiveMigrateData): Promise<LiveMigrateData> {
    return liveSource.checkCanLiveMigrateSource(this.host, instance, data);
  }

  async preLiveMigration(instance: InstanceSpec, data: LiveMigrateData): Promise<LiveMigrateData> {
    return liveDest.preLiveMigration(this.host, instance, data);
  }

  async liveMigration(instance: InstanceRef, dest: HostRef, data: LiveMigrateData): Promise<void> {
    return liveSource.liveMigration(this.host, instance, dest, data);
  }

  async liveMigrationAbort(instance: InstanceRef): Promise<void> {
    return liveSource.liveMigrationAbort(this.host, instance);
  }

  async liveMigrationForceComplete(instance: InstanceRef): Promise<void> {
    return liveSource.liveMigrationForceComplete(this.host, instance);
  }

  async postLiveMigration(instance: InstanceRef, data: LiveMigrateData): Promise<void> {
    return liveSource.postLiveMigration(this.host, instance, data);
  }

  async postLiveMigrationAtDestination(instance: InstanceRef, data: LiveMigrateData): Promise<void> {
    return liveDest.postLiveMigrationAtDestination(this.host, instance, data);
  }

  async rollbackLiveMigrationAtDestination(instance: InstanceRef, data: LiveMigrateData): Promise<void> {
    return liveDest.rollbackLiveMigrationAtDestination(this.host, instance, data);
  }
}
