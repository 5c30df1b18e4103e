/**
 * The `fake` virt driver: a real provider tree, simulated instances.
 *
 * Inventory comes from the real host probes (`host/`), or, when `[fake] host_file` is set, from a
 * YAML/JSON host file read on every pass (parsed again when it changed), so editing it at run
 * time produces reshape scenarios (split a NIC, rename a device, add sharing storage; a restart
 * with another `vgpu_provider_layout` moves vGPUs between the root and the GPUs).
 * Instances live in memory (`hypervisor.ts`); every lifecycle method can be delayed or failed on
 * purpose (`faults`). The tree is laid out exactly as a real driver would (`layout/`).
 *
 * It is: the driver the agent runs on hosts without a hypervisor, and the reference the
 * conformance suite is checked against. It is not: persistent; instances vanish with the process.
 */
import { promises as fsp } from 'node:fs';
import { Readable } from 'node:stream';
import type { Logger } from '../../lib/logging/logger';
import type { ProviderTree } from '../../model/provider-tree';
import type { AllocationsByConsumer, MoveInstruction } from '../../model/provider-types';
import type { NetworkInfo, Vif } from '../../model/network';
import { capabilityTraits, type ConsoleEndpoint, type ConsoleKind, type DriverCapabilities, type PowerOffOptions, type SnapshotImage, type SpawnOptions, type VirtDriver } from '../driver';
import { DriverError, DriverInitError, GuestAgentNotEnabledError, InstanceExistsError, InstanceStateError, MigrationPreCheckError } from '../errors';
import { discoverHost, type HostFacts } from '../host/discover';
import { applyPlan, RootProviderMissingError } from '../layout/apply';
import { gpuProviderName } from '../layout/ids';
import type { Locator } from '../layout/moves';
import { SpeedMemory } from '../layout/nic';
import { layoutOptionsFromConfig, type LayoutOptions } from '../layout/options';
import { planHost, SHARES_VIA_AGGREGATE } from '../layout/plan';
import type { AttachedVolume, DriverContext, Flavor, HostRef, InstanceInfo, InstanceRef, InstanceSpec, LiveMigrateData, MigrateDiskResult, MigrationRef } from '../types';
import { FaultInjector } from './faults';
import { assignGpu } from './gpu-assign';
import { FakeHypervisor } from './hypervisor';
import { FakeNics, FakeVifs } from './vifs';
import { HostFileError, hostFileFacts, parseHostFile, type HostFileData, type SharedStorageSpec } from './host-file';

// Only what a server on this driver gets when nova asks for it (each trait is a promise the
// scheduler acts on): raw and qcow2 images (never read), interface attach (`vifs.ts`). Not: device
// tagging, volumes, trusted certs, supports_migrate_to_same_host (the manager refuses same-host resizes).
const CAPABILITIES: DriverCapabilities = {
  supports_attach_interface: true,
  supports_image_type_qcow2: true,
  supports_image_type_raw: true,
};

export class FakeDriver implements VirtDriver {
  readonly name = 'fake';
  readonly capabilities = CAPABILITIES;
  /** Arm delays and failures per lifecycle method. */
  readonly faults: FaultInjector;
  readonly hypervisor: FakeHypervisor;
  /** The VIFs plugged on this host (tests assert on `vifs.plugged` and `vifs.history`). */
  readonly vifs = new FakeVifs();
  private readonly nics: FakeNics;
  private readonly log: Logger;
  private layout: LayoutOptions;
  private readonly lineages = new Map<string, string>();
  private readonly speeds = new SpeedMemory();
  private hostFile: { content: string; data: HostFileData } | undefined;
  private sharedAggregate: string | undefined;
  private lastFacts: HostFacts | undefined;
  private startedAt: number;

  constructor(private ctx: DriverContext) {
    this.log = ctx.logger.child({ driver: 'fake' });
    this.faults = new FaultInjector(ctx.clock);
    this.hypervisor = new FakeHypervisor(ctx.config.fake.instances_file);
    this.nics = new FakeNics(this.hypervisor, this.vifs);
    this.layout = layoutOptionsFromConfig(ctx.config, capabilityTraits(CAPABILITIES));
    this.startedAt = ctx.clock.now();
  }

  async init(host: string): Promise<void> {
    this.startedAt = this.ctx.clock.now();
    if (this.ctx.config.fake.host_file) {
      try {
        await this.readHostFile();
      } catch (e) {
        throw new DriverInitError(e instanceof Error ? e.message : String(e), { cause: e });
      }
    }
    this.log.info({ host, source: this.ctx.config.fake.host_file ?? 'host probes' }, 'fake driver ready');
  }

  reconfigure(config: DriverContext['config']): void {
    this.ctx = { ...this.ctx, config };
    this.layout = layoutOptionsFromConfig(config, capabilityTraits(CAPABILITIES));
  }

  async cleanupHost(_host: string): Promise<void> {
    this.faults.clear();
  }

  /** nova's fake driver reports version 1.0 (1000). */
  hypervisorVersion(): number {
    return 1000;
  }

  /** The facts behind the last tree (for `discover --facts`). */
  lastHostFacts(): HostFacts | undefined {
    return this.lastFacts;
  }

  async updateProviderTree(tree: ProviderTree, nodename: string, allocations?: AllocationsByConsumer): Promise<MoveInstruction[]> {
    if (!tree.exists(nodename)) throw new RootProviderMissingError(nodename);
    const facts = await this.hostFacts();
    this.applySharedStorage(tree, nodename, this.hostFile?.data.shared_storage);
    const plan = planHost({ nodename, facts, options: this.layout, tree, speeds: this.speeds });
    for (const note of plan.notes) this.log.warn(note);
    const locate: Locator = (consumer, rc) => {
      const gpu = this.hypervisor.find(consumer)?.gpu;
      const name = gpu && rc !== 'VCPU' && rc !== 'MEMORY_MB' && rc !== 'DISK_GB' ? gpuProviderName(nodename, gpu) : undefined;
      return name && tree.exists(name) ? tree.uuidOf(name) : undefined;
    };
    const { moves, warnings } = applyPlan({ tree, nodename, plan, lineages: this.lineages, locate, ...(allocations ? { allocations } : {}) });
    for (const w of warnings) this.log.warn(w);
    this.lastFacts = facts;
    return moves;
  }

  capabilitiesAsTraits(): Readonly<Record<string, boolean>> {
    return capabilityTraits(CAPABILITIES);
  }

  async listInstances(): Promise<InstanceInfo[]> {
    return this.hypervisor.list();
  }

  async getInfo(instance: InstanceRef): Promise<InstanceInfo> {
    const i = this.hypervisor.get(instance);
    return { uuid: i.uuid, name: i.name, powerState: i.powerState };
  }

  async getHostUptime(): Promise<number> {
    if (this.ctx.config.fake.host_file) {
      const { uptime_seconds } = await this.readHostFile();
      if (uptime_seconds !== undefined) return uptime_seconds;
    } else {
      const raw = await this.ctx.fs.readValue('/proc/uptime');
      const seconds = Number(raw?.split(/\s+/)[0]);
      if (raw !== undefined && Number.isFinite(seconds)) return Math.floor(seconds);
    }
    return Math.floor((this.ctx.clock.now() - this.startedAt) / 1000);
  }

  /** Plugs the VIFs; with `beforeRun` the instance is PAUSED until it resolves; a failure leaves nothing. */
  async spawn(instance: InstanceSpec, opts: SpawnOptions = {}): Promise<void> {
    await this.faults.before('spawn');
    const powerOn = opts.powerOn !== false;
    const vifs = instance.network_info ?? [];
    const gpu = assignGpu(instance, this.lastFacts, this.lineages, this.hypervisor, this.layout);
    const inst = this.hypervisor.create(instance, !powerOn ? 'SHUTDOWN' : opts.beforeRun ? 'PAUSED' : 'RUNNING', gpu ? { gpu } : {});
    try {
      await this.vifs.plugAll(instance.uuid, vifs);
      if (powerOn && opts.beforeRun) {
        await opts.beforeRun();
        if (this.hypervisor.find(instance.uuid) !== inst) throw new InstanceStateError(instance.uuid, 'deleted', 'resume after beforeRun');
        inst.powerState = 'RUNNING';
        this.hypervisor.print(inst, 'booted');
      }
    } catch (e) {
      await this.vifs.unplugAll(vifs);
      if (this.hypervisor.find(instance.uuid) === inst) this.hypervisor.delete(instance.uuid);
      throw e;
    }
    await this.hypervisor.save();
  }

  async destroy(instance: InstanceRef): Promise<void> {
    await this.faults.before('destroy');
    await this.vifs.unplugAll(this.hypervisor.find(instance.uuid)?.vifs ?? []);
    this.hypervisor.delete(instance.uuid);
    await this.hypervisor.save();
  }

  async powerOn(instance: InstanceRef): Promise<void> {
    await this.faults.before('powerOn');
    this.hypervisor.powerOn(instance);
    await this.vifs.plugAll(instance.uuid, this.hypervisor.get(instance).vifs ?? []);
    await this.hypervisor.save();
  }

  // VIFs: `vifs.ts` (what is plugged, the instances' NIC lists).
  async plugVifs(instance: InstanceRef, vifs: NetworkInfo): Promise<void> { await this.faults.before('plugVifs'); await this.nics.plugVifs(instance, vifs); }
  async unplugVifs(_instance: InstanceRef, vifs: NetworkInfo): Promise<void> { await this.faults.before('unplugVifs'); await this.vifs.unplugAll(vifs); }
  async attachInterface(instance: InstanceRef, vif: Vif): Promise<void> { await this.faults.before('attachInterface'); await this.nics.attach(instance, vif); }
  async detachInterface(instance: InstanceRef, vif: Vif): Promise<void> { await this.faults.before('detachInterface'); await this.nics.detach(instance, vif); }

  /** The volume joins the instance's disks (a running guest prints it, as a kernel logs a new disk). */
  async attachVolume(instance: InstanceRef, volume: AttachedVolume): Promise<void> {
    await this.faults.before('attachVolume');
    const inst = this.hypervisor.get(instance);
    if (inst.volumes?.[volume.volume_id] !== undefined) return;
    inst.volumes = { ...(inst.volumes ?? {}), [volume.volume_id]: 0 };
    if (inst.powerState === 'RUNNING') this.hypervisor.print(inst, `disk ${volume.volume_id} attached`);
    await this.hypervisor.save();
  }

  async detachVolume(instance: InstanceRef, volumeId: string): Promise<void> {
    await this.faults.before('detachVolume');
    const inst = this.hypervisor.get(instance);
    if (inst.volumes?.[volumeId] === undefined) return;
    const { [volumeId]: _gone, ...rest } = inst.volumes;
    inst.volumes = rest;
    if (inst.powerState === 'RUNNING') this.hypervisor.print(inst, `disk ${volumeId} detached`);
    await this.hypervisor.save();
  }

  /** The disk of `oldVolumeId` becomes `newVolume`'s (its size kept: the copy is the old data). */
  async swapVolume(instance: InstanceRef, oldVolumeId: string, newVolume: AttachedVolume): Promise<void> {
    await this.faults.before('swapVolume');
    const inst = this.hypervisor.get(instance);
    const disks = inst.volumes ?? {};
    if (disks[newVolume.volume_id] !== undefined && disks[oldVolumeId] === undefined) return;
    const size = disks[oldVolumeId];
    if (size === undefined) throw new DriverError(`instance ${instance.uuid} has no volume ${oldVolumeId}`);
    const { [oldVolumeId]: _old, ...rest } = disks;
    inst.volumes = { ...rest, [newVolume.volume_id]: size };
    if (inst.powerState === 'RUNNING') this.hypervisor.print(inst, `disk ${oldVolumeId} swapped for ${newVolume.volume_id}`);
    await this.hypervisor.save();
  }

  async extendVolume(instance: InstanceRef, volumeId: string, bytes: number): Promise<void> {
    await this.faults.before('extendVolume');
    const inst = this.hypervisor.get(instance);
    if (inst.volumes?.[volumeId] === undefined) throw new DriverError(`instance ${instance.uuid} has no volume ${volumeId}`);
    inst.volumes = { ...inst.volumes, [volumeId]: bytes };
    await this.hypervisor.save();
  }

  async powerOff(instance: InstanceRef, _opts: PowerOffOptions = {}): Promise<void> {
    await this.faults.before('powerOff');
    this.hypervisor.powerOff(instance);
    await this.hypervisor.save();
  }

  async reboot(instance: InstanceRef, type: 'soft' | 'hard'): Promise<void> {
    await this.faults.before('reboot');
    this.hypervisor.reboot(instance, type);
    await this.vifs.plugAll(instance.uuid, this.hypervisor.get(instance).vifs ?? []);
    await this.hypervisor.save();
  }

  async pause(instance: InstanceRef): Promise<void> { await this.faults.before('pause'); this.hypervisor.setPower(instance, 'pause', 'RUNNING', 'PAUSED', 'paused'); }
  async unpause(instance: InstanceRef): Promise<void> { await this.faults.before('unpause'); this.hypervisor.setPower(instance, 'unpause', 'PAUSED', 'RUNNING', 'unpaused'); }
  async suspend(instance: InstanceRef): Promise<void> { await this.faults.before('suspend'); this.hypervisor.setPower(instance, 'suspend', 'RUNNING', 'SUSPENDED', 'suspended'); }
  async resume(instance: InstanceRef): Promise<void> { await this.faults.before('resume'); this.hypervisor.setPower(instance, 'resume', 'SUSPENDED', 'RUNNING', 'resumed'); }

  /** A snapshot: the fake disk is one line naming the instance and its power state at the copy; a running guest with an agent is quiesced for it. */
  async snapshot(instance: InstanceRef, upload: (image: SnapshotImage) => Promise<void>, options?: { readonly requireQuiesce?: boolean }): Promise<void> {
    await this.faults.before('snapshot');
    const i = this.hypervisor.settled(instance, 'snapshot');
    const quiesced = i.powerState === 'RUNNING' && i.imageMeta?.hw_qemu_guest_agent === true;
    if (options?.requireQuiesce && !quiesced) throw new DriverError(`instance ${i.uuid}: os_require_quiesce is set and the guest cannot be quiesced`);
    const disk = Buffer.from(`fake disk of ${i.name}, ${i.powerState.toLowerCase()}${quiesced ? ', quiesced' : ''}\n`);
    this.hypervisor.print(i, 'disk copied for a snapshot');
    await upload({ data: Readable.from([disk]), bytes: disk.length, diskFormat: 'raw' });
  }

  /** Rescued: the console says from which image; the guest runs. */
  async rescue(instance: InstanceRef, imageRef: string, _cleanShutdown: boolean): Promise<void> {
    await this.faults.before('rescue');
    const i = this.hypervisor.settled(instance, 'rescue');
    if (i.rescueImage) return;
    i.rescueImage = imageRef;
    this.hypervisor.print(i, `booted from rescue image ${imageRef}, own disk second`);
    i.powerState = 'RUNNING';
  }

  async unrescue(instance: InstanceRef): Promise<void> {
    await this.faults.before('unrescue');
    const i = this.hypervisor.settled(instance, 'unrescue');
    if (!i.rescueImage) return;
    delete i.rescueImage;
    this.hypervisor.print(i, 'booted from its own disk');
    i.powerState = 'RUNNING';
  }

  /** The fake host shares no instance storage. */
  async instanceFileVisible(_path: string): Promise<boolean> {
    return false;
  }

  async triggerCrashDump(instance: InstanceRef): Promise<void> {
    await this.faults.before('triggerCrashDump');
    const i = this.hypervisor.settled(instance, 'trigger a crash dump');
    if (i.powerState !== 'RUNNING') throw new InstanceStateError(i.uuid, i.powerState, 'trigger a crash dump');
    this.hypervisor.print(i, 'NMI received');
  }

  /** Quiesced: the fake guest's agent "freezes" it (the console says so); a thaw says so too. */
  async quiesce(instance: InstanceRef): Promise<void> {
    await this.faults.before('quiesce');
    const i = this.hypervisor.settled(instance, 'quiesce');
    if (!i.imageMeta?.hw_qemu_guest_agent) throw new GuestAgentNotEnabledError(i.uuid);
    if (i.powerState !== 'RUNNING') throw new InstanceStateError(i.uuid, i.powerState, 'quiesce');
    this.hypervisor.print(i, 'filesystems frozen');
  }

  async unquiesce(instance: InstanceRef): Promise<void> {
    await this.faults.before('unquiesce');
    const i = this.hypervisor.settled(instance, 'unquiesce');
    if (!i.imageMeta?.hw_qemu_guest_agent) throw new GuestAgentNotEnabledError(i.uuid);
    if (i.powerState === 'RUNNING') this.hypervisor.print(i, 'filesystems thawed');
  }

  /** The fake guest's agent answers when its image asked for one: the password is kept per account, and the guest prints that it changed. */
  async setAdminPassword(instance: InstanceRef, password: string): Promise<void> {
    await this.faults.before('setAdminPassword');
    const i = this.hypervisor.settled(instance, 'set the admin password of');
    if (i.powerState !== 'RUNNING') throw new InstanceStateError(i.uuid, i.powerState, 'set the admin password of');
    if (!i.imageMeta?.hw_qemu_guest_agent) throw new GuestAgentNotEnabledError(i.uuid);
    const user = i.imageMeta.os_admin_user ?? 'root';
    i.passwords = { ...i.passwords, [user]: password };
    this.hypervisor.print(i, `password of ${user} changed`);
  }

  /**
   * The fake guest's consoles "listen" on loopback at a port derived from its uuid (VNC from 5900,
   * serial from 10000); nothing is there to connect to.
   */
  async getConsole(instance: InstanceRef, kind: ConsoleKind): Promise<ConsoleEndpoint> {
    await this.faults.before('getConsole');
    const i = this.hypervisor.get(instance);
    if (i.powerState !== 'RUNNING') throw new InstanceStateError(i.uuid, i.powerState, `open its ${kind} console`);
    const offset = parseInt(i.uuid.replace(/-/g, '').slice(0, 4), 16) % 1000;
    return { host: '127.0.0.1', port: (kind === 'vnc' ? 5900 : 10000) + (Number.isNaN(offset) ? 0 : offset) };
  }

  async getConsoleOutput(instance: InstanceRef): Promise<Buffer> {
    await this.faults.before('getConsoleOutput');
    const lines = this.hypervisor.get(instance).console ?? [];
    return Buffer.from(lines.map((l) => `${l}\n`).join(''));
  }

  async migrateDiskAndPowerOff(instance: InstanceRef, migration: MigrationRef, flavor: Flavor): Promise<MigrateDiskResult> {
    await this.faults.before('migrateDiskAndPowerOff');
    const out = this.hypervisor.migrateOut(instance);
    await this.vifs.unplugAll(out.vifs ?? []); // as a real host: the VIFs leave with the guest
    await this.hypervisor.save();
    return { diskInfo: JSON.stringify({ instance: instance.uuid, migration: migration.uuid, root_gb: flavor.root_gb, ephemeral_gb: flavor.ephemeral_gb }) };
  }

  async finishMigration(instance: InstanceSpec, _migration: MigrationRef, _disk: MigrateDiskResult, opts: { readonly powerOn?: boolean } = {}): Promise<void> {
    await this.faults.before('finishMigration');
    this.hypervisor.migrateIn(instance, opts.powerOn !== false);
    if (opts.powerOn !== false) await this.vifs.plugAll(instance.uuid, instance.network_info ?? []);
    await this.hypervisor.save();
  }

  async confirmMigration(instance: InstanceRef, _migration: MigrationRef): Promise<void> {
    await this.faults.before('confirmMigration');
    this.hypervisor.confirm(instance);
    await this.hypervisor.save();
  }

  async finishRevertMigration(instance: InstanceRef, _migration: MigrationRef, opts: { readonly powerOn?: boolean } = {}): Promise<void> {
    await this.faults.before('finishRevertMigration');
    this.hypervisor.revert(instance, opts.powerOn !== false);
    if (opts.powerOn !== false) await this.vifs.plugAll(instance.uuid, this.hypervisor.get(instance).vifs ?? []);
    await this.hypervisor.save();
  }

  async checkCanLiveMigrateDestination(instance: InstanceSpec, source: HostRef): Promise<LiveMigrateData> {
    await this.faults.before('checkCanLiveMigrateDestination');
    if (this.hypervisor.find(instance.uuid)) throw new MigrationPreCheckError(`instance ${instance.uuid} is already on this host`);
    return { source_host: source.host, block_migration: false };
  }

  async checkCanLiveMigrateSource(instance: InstanceRef, data: LiveMigrateData): Promise<LiveMigrateData> {
    await this.faults.before('checkCanLiveMigrateSource');
    const i = this.hypervisor.settled(instance, 'live migrate');
    if (i.powerState !== 'RUNNING' && i.powerState !== 'PAUSED') throw new MigrationPreCheckError(`instance ${i.uuid} is ${i.powerState}; only running or paused instances live migrate`);
    return data;
  }

  async preLiveMigration(instance: InstanceSpec, data: LiveMigrateData): Promise<LiveMigrateData> {
    await this.faults.before('preLiveMigration');
    const here = this.hypervisor.find(instance.uuid);
    if (here && here.task !== 'incoming') throw new InstanceExistsError(instance.uuid);
    this.hypervisor.receive(instance);
    await this.vifs.plugAll(instance.uuid, instance.network_info ?? []); // the destination binding's VIFs, before the guest arrives
    await this.hypervisor.save();
    return data;
  }

  async liveMigration(instance: InstanceRef, dest: HostRef, _data: LiveMigrateData): Promise<void> {
    if (this.hypervisor.find(instance.uuid)?.task === 'migrated-out') return; // repeated after a crash: done
    const i = this.hypervisor.settled(instance, 'live migrate');
    i.task = 'migrating-out';
    try {
      await this.faults.before('liveMigration');
    } catch (e) {
      delete i.task;
      throw e;
    }
    if (i.abortRequested) {
      delete i.task;
      delete i.abortRequested;
      throw new DriverError(`live migration of ${i.uuid} to ${dest.host} aborted`);
    }
    i.task = 'migrated-out';
    await this.hypervisor.save();
  }

  async liveMigrationAbort(instance: InstanceRef): Promise<void> {
    const i = this.hypervisor.get(instance);
    if (i.task !== 'migrating-out') throw new InstanceStateError(i.uuid, i.task ?? i.powerState, 'abort a live migration');
    i.abortRequested = true;
  }

  /** The fake migration has no rounds: a force complete only says that it was asked. */
  async liveMigrationForceComplete(instance: InstanceRef): Promise<void> {
    const i = this.hypervisor.get(instance);
    if (i.task !== 'migrating-out') throw new InstanceStateError(i.uuid, i.task ?? i.powerState, 'force a live migration to complete');
    this.hypervisor.print(i, 'live migration forced to complete');
  }

  async postLiveMigration(instance: InstanceRef, _data: LiveMigrateData): Promise<void> {
    await this.faults.before('postLiveMigration');
    this.hypervisor.delete(instance.uuid);
    await this.hypervisor.save();
  }

  async postLiveMigrationAtDestination(instance: InstanceRef, _data: LiveMigrateData): Promise<void> {
    await this.faults.before('postLiveMigrationAtDestination');
    const i = this.hypervisor.get(instance);
    if (!i.task && i.powerState === 'RUNNING') return; // repeated after a crash: already finished
    if (i.task !== 'incoming') throw new InstanceStateError(i.uuid, i.task ?? i.powerState, 'finish an incoming live migration');
    delete i.task;
    i.powerState = 'RUNNING';
    await this.hypervisor.save();
  }

  async rollbackLiveMigrationAtDestination(instance: InstanceRef, _data: LiveMigrateData): Promise<void> {
    await this.faults.before('rollbackLiveMigrationAtDestination');
    const incoming = this.hypervisor.find(instance.uuid);
    if (incoming?.task === 'incoming') {
      await this.vifs.unplugAll(incoming.vifs ?? []);
      this.hypervisor.delete(instance.uuid);
    }
    await this.hypervisor.save();
  }

  private async hostFacts(): Promise<HostFacts> {
    const instancesPath = this.ctx.config.DEFAULT.instances_path;
    if (this.ctx.config.fake.host_file) return hostFileFacts(await this.readHostFile(), instancesPath);
    const c = this.ctx.config.compute;
    return discoverHost(this.ctx, {
      instancesPath,
      probeTimeoutMs: c.probe_timeout * 1000,
      commandTimeoutMs: c.probe_command_timeout * 1000,
      disabled: c.disabled_host_probes,
    });
  }

  /** Reads the host file, parsing it again only when its content changed. @throws HostFileError */
  private async readHostFile(): Promise<HostFileData> {
    const file = this.ctx.config.fake.host_file as string;
    let content: string;
    try {
      content = await fsp.readFile(file, 'utf8');
    } catch (e) {
      throw new HostFileError(file, [`cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`], { cause: e });
    }
    if (this.hostFile?.content === content) return this.hostFile.data;
    const data = parseHostFile(file, content);
    this.hostFile = { content, data };
    return data;
  }

  /** Joins the root to the host file's storage aggregate and creates the sharing provider it names. */
  private applySharedStorage(tree: ProviderTree, nodename: string, spec: SharedStorageSpec | undefined): void {
    if (!tree.exists(nodename)) return;
    if (this.sharedAggregate && this.sharedAggregate !== spec?.aggregate) {
      const keep = tree.data(nodename).aggregates.filter((a) => a !== this.sharedAggregate);
      tree.updateAggregates(nodename, keep);
      this.sharedAggregate = undefined;
    }
    if (!spec) return;
    tree.addAggregates(nodename, spec.aggregate);
    this.sharedAggregate = spec.aggregate;
    const p = spec.provider;
    if (!p) return;
    if (!tree.exists(p.uuid)) tree.newRoot(p.name, p.uuid);
    tree.updateInventory(p.uuid, { DISK_GB: { total: p.disk_gb, reserved: 0, min_unit: 1, max_unit: p.disk_gb, step_size: 1, allocation_ratio: 1.0 } });
    tree.addTraits(p.uuid, SHARES_VIA_AGGREGATE);
    tree.addAggregates(p.uuid, spec.aggregate);
  }
}
