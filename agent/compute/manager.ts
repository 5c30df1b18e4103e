/**
 * The compute manager: the facade the method table (`methods.ts`), recovery and the daemon use.
 * It builds the one flow context (`flow-context.ts`) from its dependencies and exposes the entry
 * points: build and terminate (`lifecycle.ts`), the cold and live migration steps (`resize.ts`,
 * `live.ts`, their volume steps in `volume-moves.ts`), stop, start, reboot and the console
 * (`power.ts`), interface attach and detach (`interfaces.ts`), and the reads (list, show, what is
 * in flight).
 *
 * Every operation runs under its instance's lock (`locks.ts`), checks the instance's state, and
 * records each transition in the durable store BEFORE the side effect it describes, so recovery
 * (`recovery.ts`) always knows how far it got. Claims and allocation writes go through the claim
 * service (`tracker/claims/service.ts`); outcomes go to the control plane.
 *
 * Not here: flow logic (the flows), decoding (`decode.ts`), RPC registration (`register.ts`).
 */
import { ConsoleFlows, NO_CONSOLES, type ConsoleSettings } from './consoles';
import type { Logger } from '../../lib/logging/logger';
import { systemClock, type Clock } from '../../lib/clock';
import { NetworkService } from '../network/network-api';
import { InstanceEvents } from './instance-events';
import { InterfaceFlows } from './interfaces';
import { NetworkFlows } from './network-flows';
import { VolumeFlows } from './volume-flows';
import { VolumeAttachFlows } from './volume-attach';
import { VolumeSwapFlows } from './volume-swap';
import { VolumeMoves } from './volume-moves';
import type { CinderClients } from '../volume/factory';
import type { ClaimService } from '../../tracker/claims/service';
import type { VirtDriver } from '../../virt-drivers/driver';
import type { DecodedInstance } from './decode';
import { InstanceLocks } from './locks';
import type { Flavor, InstanceRecord } from '../../model/instance';
import { NotifierControlPlane, type ControlPlane } from './control-plane';
import { flowContext, type FlowContext } from './flow-context';
import { LifecycleFlows, type BuildOptions } from './lifecycle';
import { LiveFlows } from './live';
import { PowerFlows } from './power';
import type { ComputePeers, Notifier, RecordStore, RequestContext } from './ports';
import { AllocationRemovals } from './removals';
import { AttachmentDeletes } from './attachment-deletes';
import { ResizeFlows } from './resize';
import { SnapshotFlows } from './snapshot';
import { ShelveFlows } from './shelve';
import { SoftDeleteFlows } from './soft-delete';
import { QuiesceFlows } from './quiesce';
import { LiveMigrationControl } from './live-control';
import { RescueFlows } from './rescue';
import type { GlanceImageWrites } from '../../virt-drivers/glance/api';

export type { BuildOptions } from './lifecycle';

const DEFAULT_CALL_MS = 120000;

export interface ManagerDeps {
  readonly host: string;
  readonly driver: VirtDriver;
  /** Every claim and allocation write (the tracker's claim service). */
  readonly claims: ClaimService;
  readonly store: RecordStore;
  readonly peers: ComputePeers;
  readonly notifier: Notifier;
  readonly logger: Logger;
  readonly now?: () => number;
  /** The scheduler claims before a build (nova mode): verify instead of claiming. */
  readonly schedulerClaims?: boolean;
  /** Who hears about each flow step; defaults to versioned notifications through `notifier`. */
  readonly controlPlane?: ControlPlane;
  /** Timeout of agent-to-agent calls (live-migration checks). */
  readonly callTimeoutMs?: number;
  /** Neutron; absent: an agent without networking (builds that ask for networks fail clearly). */
  readonly network?: NetworkService;
  /** `[DEFAULT] vif_plugging_timeout` (s, default 300) and `vif_plugging_is_fatal` (default true). */
  /** `[DEFAULT] vif_plugging_timeout` / `vif_plugging_is_fatal`; `onWait` sees each build's wait (the metrics). */
  readonly vifPlugging?: { readonly timeoutS: number; readonly fatal: boolean; readonly onWait?: (outcome: string, seconds: number) => void };
  /** Timers of the event waits (tests pass a fake clock). */
  readonly clock?: Clock;
  /** Cinder, this host's address for it (`[DEFAULT] my_ip`), and how long a build waits for a volume it created. Absent: no Cinder (builds with volumes fail clearly). */
  readonly volumes?: { readonly cinder: CinderClients; readonly ip: string; readonly allocateRetries: number; readonly allocateIntervalS: number };
  /** Glance's image writes (snapshots, backups). Absent: no Glance (a snapshot fails with what to set). */
  readonly images?: GlanceImageWrites;
  /** `[DEFAULT] shelved_offload_time` (s): 0 offloads a shelved server at once (nova's default), -1 never. */
  readonly shelvedOffloadTimeS?: number;
  /** `[DEFAULT] reclaim_instance_interval` (s): how long a soft-deleted server stays before this host deletes it; 0 or less: never. */
  readonly reclaimIntervalS?: number;
  /** `[vnc]`, `[serial_console]`, `[consoleauth]`; absent: no consoles. */
  readonly consoles?: ConsoleSettings;
}

/** Cinder when none is configured: builds with volume mappings fail with what to set. */
const NO_CINDER: CinderClients = {
  configured: false,
  forRequest: () => {
    throw new Error('Cinder is not configured');
  },
};

export class ComputeManager {
  readonly locks = new InstanceLocks();
  readonly controlPlane: ControlPlane;
  /** What the flows work with. */
  readonly context: FlowContext;
  readonly resize: ResizeFlows;
  readonly live: LiveFlows;
  /** stop, start, reboot, the console, and the power-state sync. */
  readonly power: PowerFlows;
  /** Allocation removals deletes owe Placement; the daemon stops their drain on shutdown. */
  readonly removals: AllocationRemovals;
  /** Cinder attachment deletes owed after an outage; the daemon starts their drain after recovery and stops it on shutdown. */
  readonly attachmentDeletes: AttachmentDeletes;
  /** The network steps, and `external_instance_event`. */
  readonly networking: NetworkFlows;
  /** `attach_interface`, `detach_interface`. */
  readonly interfaces: InterfaceFlows;
  /** The volume steps of builds and deletes. */
  readonly volumes: VolumeFlows;
  /** `reserve_block_device_name`, `attach_volume`, `detach_volume`, `volume-extended`. */
  readonly volumeAttach: VolumeAttachFlows;
  readonly volumeSwap: VolumeSwapFlows;
  /** `snapshot_instance`, `backup_instance`. */
  readonly snapshots: SnapshotFlows;
  /** `shelve_instance`, `shelve_offload_instance`, `unshelve_instance`. */
  readonly shelving: ShelveFlows;
  /** `quiesce_instance`, `unquiesce_instance` (a volume-backed server's snapshot). */
  readonly quiescing: QuiesceFlows;
  /** `soft_delete_instance`, `restore_instance`, and the periodic reclaim. */
  readonly softDeletes: SoftDeleteFlows;
  /** `live_migration_abort`, `live_migration_force_complete` (never behind the instance's lock). */
  readonly liveControl: LiveMigrationControl;
  /** `rescue_instance`, `unrescue_instance`. */
  readonly rescues: RescueFlows;
  /** get_vnc_console, get_serial_console, validate_console_port. */
  readonly consoles: ConsoleFlows;
  private readonly lifecycle: LifecycleFlows;

  constructor(readonly deps: ManagerDeps) {
    const log = deps.logger.child({ component: 'compute' });
    this.controlPlane =
      deps.controlPlane ??
      new NotifierControlPlane(deps.notifier, deps.host, (event, instance, reason) => log.warn({ instance, event, reason }, 'notification not sent'), {
        schedulerClaims: deps.schedulerClaims ?? false,
      });
    this.removals = new AllocationRemovals({ store: deps.store, claims: deps.claims, log });
    this.context = flowContext({
      host: deps.host,
      store: deps.store,
      locks: this.locks,
      claims: deps.claims,
      removals: this.removals,
      driver: deps.driver,
      peers: deps.peers,
      controlPlane: this.controlPlane,
      log,
      callTimeoutMs: deps.callTimeoutMs ?? DEFAULT_CALL_MS,
      clock: deps.now ?? Date.now,
    });
    const clock = deps.clock ?? systemClock;
    const network = deps.network ?? new NetworkService({ neutron: undefined, host: deps.host, logger: log, clock });
    this.networking = new NetworkFlows(this.context, {
      network,
      events: new InstanceEvents(clock),
      vifPluggingTimeoutS: deps.vifPlugging?.timeoutS ?? 300,
      vifPluggingIsFatal: deps.vifPlugging?.fatal ?? true,
      ...(deps.vifPlugging?.onWait ? { onVifWait: deps.vifPlugging.onWait } : {}),
      clock,
    });
    this.interfaces = new InterfaceFlows(this.context, network);
    const v = deps.volumes;
    // os-brick's connector properties for RBD (the only back end this agent connects).
    const connector = { platform: 'x86_64', os_type: 'linux', ip: v?.ip ?? '127.0.0.1', host: deps.host, multipath: false, enforce_multipath: true, do_local_attach: false };
    const cinder = v?.cinder ?? NO_CINDER;
    this.attachmentDeletes = new AttachmentDeletes({ store: deps.store, cinder, log, clock });
    const owed = this.attachmentDeletes;
    this.volumes = new VolumeFlows(this.context, {
      cinder,
      owed,
      connector,
      allocateRetries: v?.allocateRetries ?? 60,
      allocateIntervalS: v?.allocateIntervalS ?? 3,
      clock,
    });
    this.volumeAttach = new VolumeAttachFlows(this.context, { cinder, connector, owed });
    this.quiescing = new QuiesceFlows(this.context, { cinder, clock });
    this.volumeSwap = new VolumeSwapFlows(this.context, { cinder, connector });
    this.lifecycle = new LifecycleFlows({ ...this.context, networking: this.networking, volumes: this.volumes });
    const volumeMoves = new VolumeMoves(this.context, { cinder, connector });
    this.resize = new ResizeFlows(this.context, this.networking, volumeMoves);
    this.live = new LiveFlows(this.context, this.networking, volumeMoves);
    this.power = new PowerFlows(this.context);
    this.snapshots = new SnapshotFlows(this.context, deps.images);
    this.shelving = new ShelveFlows(this.context, this.networking, this.snapshots, this.volumes, deps.shelvedOffloadTimeS ?? 0);
    const lifecycle = this.lifecycle;
    this.softDeletes = new SoftDeleteFlows(this.context, (uuid, ctx) => lifecycle.reclaim(uuid, ctx), deps.reclaimIntervalS ?? 0);
    this.liveControl = new LiveMigrationControl(this.context);
    this.rescues = new RescueFlows(this.context);
    this.consoles = new ConsoleFlows(this.context, deps.consoles ?? NO_CONSOLES);
  }

  get host(): string {
    return this.deps.host;
  }

  /** `build_and_run_instance` (see `LifecycleFlows.build`). */
  build(inst: DecodedInstance, flavor: Flavor, opts: BuildOptions, ctx: RequestContext): Promise<void> {
    return this.lifecycle.build(inst, flavor, opts, ctx);
  }

  /** `terminate_instance` (see `LifecycleFlows.terminate`). */
  terminate(uuid: string, ctx: RequestContext): Promise<void> {
    return this.lifecycle.terminate(uuid, ctx);
  }

  record(uuid: string): InstanceRecord | undefined {
    return this.context.record(uuid);
  }

  instances(): InstanceRecord[] {
    return this.context.instances();
  }

  /** Consumers with an operation under way: the audit must not call them orphaned. */
  inFlight(): Set<string> {
    const out = new Set<string>([...this.locks.busy(), ...this.removals.pending()]);
    for (const r of this.instances()) {
      if (r.task_state || r.vm_state === 'building') out.add(r.uuid);
      if (r.migration) out.add(r.migration.uuid).add(r.uuid);
    }
    return out;
  }

  list(): Array<Pick<InstanceRecord, 'uuid' | 'name' | 'vm_state' | 'task_state' | 'power_state' | 'host'>> {
    return this.instances()
      .map((r) => ({ uuid: r.uuid, name: r.name, vm_state: r.vm_state, task_state: r.task_state, power_state: r.power_state, host: r.host }))
      .sort((a, b) => a.uuid.localeCompare(b.uuid));
  }

  /** One instance with its allocations as Placement holds them now. @throws InstanceNotFoundError */
  async show(uuid: string): Promise<InstanceRecord & { placement_allocations: Record<string, Record<string, number>> }> {
    const rec = this.context.require(uuid);
    const placement = await this.deps.claims.read(uuid);
    return { ...rec, placement_allocations: placement };
  }
}
