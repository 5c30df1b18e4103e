/**
 * The network steps of the compute flows, as nova-compute takes them (nova `compute/manager.py`
 * `_build_networks_for_instance`, `_create_guest_with_network`, `external_instance_event`,
 * `_try_deallocate_network`): ports bound to this host before the spawn, the guest kept paused
 * until Neutron says each new port is wired (`network-vif-plugged`), the ports given back when
 * the instance goes, and the events nova-api relays.
 *
 * It is: the glue between the Neutron side (`agent/network/`), the event waiters
 * (`instance-events.ts`), the virt driver (which plugs) and the control plane (nova's records).
 * It is not: a flow of its own; `lifecycle.ts` calls it, holding the instance's lock, except for
 * `events`, which must not wait for that lock (a build holds it while it waits for those events).
 */
import { vifPluggedEvent, type NetworkInfo, type ProviderMapping, type RequestedNetworks } from '../../model/network';
import type { InstanceRecord } from '../../model/instance';
import type { InstanceSpec } from '../../virt-drivers/types';
import { NeutronError, VifPlugTimeoutError } from '../network/errors';
import type { NetworkService } from '../network/network-api';
import type { DecodedInstance } from './decode';
import type { ExternalEvent } from './decode-network';
import type { FlowContext } from './flow-context';
import type { EventWaiter, InstanceEvents } from './instance-events';
import type { RequestContext } from './ports';
import { systemClock, type Clock } from '../../lib/clock';

/** nova's default availability zone (`[DEFAULT] default_availability_zone`). */
export const DEFAULT_AZ = 'nova';

export interface NetworkFlowOptions {
  readonly network: NetworkService;
  readonly events: InstanceEvents;
  /** `[DEFAULT] vif_plugging_timeout`, seconds (0: do not wait). */
  readonly vifPluggingTimeoutS: number;
  /** `[DEFAULT] vif_plugging_is_fatal`. */
  readonly vifPluggingIsFatal: boolean;
  /** Sees how long each build waited for its events, and how the wait ended (the metrics). */
  readonly onVifWait?: (outcome: string, seconds: number) => void;
  readonly clock?: Clock;
}

/** What a build asks of the network: nova's `requested_networks`, `security_groups`, and the scheduler's request group mapping. */
export interface BuildNetworks {
  readonly networks: RequestedNetworks;
  readonly securityGroups: readonly string[];
  /** From `request_spec`; where a port's resource request was allocated (see `agent/network/port-allocation.ts`). */
  readonly providerMapping?: ProviderMapping;
}

export type NetworkFlowContext = Pick<FlowContext, 'driver' | 'controlPlane' | 'log' | 'locks' | 'record' | 'save'>;

export class NetworkFlows {
  constructor(
    private readonly c: NetworkFlowContext,
    private readonly o: NetworkFlowOptions,
  ) {}

  /**
   * Binds the instance's ports to this host and records them (`rec.network_info`, nova's VIF rows
   * and info cache). A resumed build first gives back what an interrupted one had bound. A port
   * with a resource request names, in `binding:profile.allocation`, the provider the instance's
   * claim (`rec.allocations`) holds its resources on.
   * @throws NeutronError (nothing of this try is left bound)
   */
  async allocate(rec: InstanceRecord, inst: DecodedInstance, request: BuildNetworks, ctx: RequestContext, resuming: boolean): Promise<void> {
    const c = this.c;
    const requested = request.networks;
    if (requested.kind === 'none') {
      rec.network_info = [];
      return;
    }
    const userPorts = requested.kind === 'list' ? requested.requests.flatMap((r) => (r.kind === 'port' ? [r.port_id] : [])) : [];
    if (userPorts.length && !rec.preserved_ports) {
      rec.preserved_ports = userPorts;
      await c.save(rec);
    }
    if (resuming && this.o.network.configured) await this.o.network.deallocate(rec.uuid, new Set(userPorts));
    const info = await this.o.network.allocate(
      { uuid: rec.uuid, project_id: rec.project_id, hostname: rec.name, availability_zone: inst.availability_zone ?? DEFAULT_AZ },
      requested,
      request.securityGroups,
      { allocations: rec.allocations, ...(request.providerMapping ? { providerMapping: request.providerMapping } : {}) },
    );
    rec.network_info = info;
    c.log.info({ instance: rec.uuid, ports: info.map((v) => v.id) }, 'ports bound to this host');
    await c.controlPlane.network(rec.uuid, { kind: 'allocated', info, added: info }, ctx);
  }

  /**
   * Spawns the guest with its VIFs: the waiters for `network-vif-plugged` of every port Neutron
   * does not have ACTIVE yet are registered before the driver plugs, and the driver keeps the guest
   * paused until they came (or `vif_plugging_timeout` passed). A `resumed` spawn (an interrupted
   * build taken up again) plugs and runs without waiting.
   * @throws VifPlugTimeoutError (with vif_plugging_is_fatal), whatever the driver throws
   */
  async spawn(rec: InstanceRecord, spec: InstanceSpec, opts: { readonly resumed?: boolean } = {}): Promise<void> {
    const vifs = rec.network_info ?? [];
    // A resumed spawn re-plugs without waiting, as nova does after a restart: it may run in the
    // agent's start-up recovery, before the RPC server that would deliver the events consumes.
    const pending = this.o.vifPluggingTimeoutS > 0 && !opts.resumed ? vifs.filter((v) => !v.active).map((v) => v.id) : [];
    const waiter = this.o.events.prepare(rec.uuid, pending.map(vifPluggedEvent));
    try {
      await this.c.driver.spawn({ ...spec, network_info: vifs }, pending.length ? { beforeRun: () => this.plugged(rec.uuid, waiter, pending) } : {});
    } finally {
      waiter.cancel();
    }
  }

  /**
   * The ports of an instance that moved here (cold migration's destination, a revert's source)
   * bound to this host, re-read as VIFs into `rec.network_info` and nova's info cache; `preserved`
   * (the user's ports, as the source knew them) join `rec.preserved_ports`.
   * @throws NeutronError, PortBindingFailedError
   */
  async moveHere(rec: InstanceRecord, portIds: readonly string[], ctx: RequestContext, preserved: readonly string[] = []): Promise<void> {
    if (portIds.length === 0) return;
    const info = await this.o.network.bindHere(rec.uuid, portIds, this.preservedOf(rec, preserved), { allocations: rec.allocations });
    rec.network_info = info;
    await this.c.save(rec);
    await this.c.controlPlane.network(rec.uuid, { kind: 'refreshed', info }, ctx);
  }

  /** A shelve offload: the ports kept for the instance, bound to no host. @throws NeutronError */
  async unbindForOffload(rec: InstanceRecord): Promise<void> {
    await this.o.network.unbindKeepingDevice(rec.uuid, (rec.network_info ?? []).map((v) => v.id));
  }

  /** After a confirmed move: the ports' bindings to the old host `host` deleted. Never throws. */
  dropBindings(rec: InstanceRecord, host: string): Promise<void> {
    const ports = (rec.network_info ?? []).map((v) => v.id);
    return ports.length ? this.o.network.dropBindings(rec.uuid, ports, host) : Promise.resolve();
  }

  /**
   * Runs `start` (a driver step that plugs the instance's VIFs and starts it, such as a revert's)
   * and then waits up to `vif_plugging_timeout` for the `network-vif-plugged` of its ports that
   * Neutron does not have ACTIVE, as nova's finish_revert_migration does. The guest runs already:
   * a missing event is logged, never fatal (the move back is done either way).
   */
  async startAndWait(rec: InstanceRecord, start: () => Promise<void>): Promise<void> {
    const pending = this.o.vifPluggingTimeoutS > 0 ? (rec.network_info ?? []).filter((v) => !v.active).map((v) => v.id) : [];
    const waiter = this.o.events.prepare(rec.uuid, pending.map(vifPluggedEvent));
    try {
      await start();
      if (pending.length === 0) return;
      const outcome = await waiter.wait(this.o.vifPluggingTimeoutS * 1000);
      if (outcome.kind !== 'completed') this.c.log.warn({ instance: rec.uuid, ports: pending, outcome: outcome.kind }, 'no network-vif-plugged for every port after the move back; the guest runs anyway');
    } finally {
      waiter.cancel();
    }
  }

  /**
   * Gives the instance's ports back to Neutron (deletes the agent's, unbinds the user's) and
   * empties nova's records of them. Idempotent.
   * @throws NeutronError when Neutron could not be told (the ports stay as they were)
   */
  async release(rec: InstanceRecord | undefined, uuid: string, ctx: RequestContext): Promise<void> {
    if (!this.o.network.configured) return;
    // An interface attach a restart interrupted may have left a port bound that the record does not list.
    const attaching = rec?.interface_attach;
    const hadNetwork = (rec?.network_info?.length ?? 0) > 0 || (rec?.preserved_ports?.length ?? 0) > 0 || attaching !== undefined;
    // A build that allocated no network (`none`) bound nothing: Neutron need not be asked, and an
    // outage of it must not keep such an instance from being deleted. Without a record, or before
    // the allocation finished, the instance's ports are looked up.
    if (rec?.network_info && !hadNetwork) return;
    const preserved = new Set([
      ...(rec?.preserved_ports ?? []),
      ...(rec?.network_info ?? []).filter((v) => v.preserve_on_delete).map((v) => v.id),
      ...(attaching?.port_id ? [attaching.port_id] : []),
    ]);
    await this.o.network.deallocate(uuid, preserved);
    if (rec) {
      rec.network_info = [];
      delete rec.interface_attach;
    }
    if (hadNetwork) await this.c.controlPlane.network(uuid, { kind: 'released' }, ctx);
  }

  /** Whether this host can move ports with a live migration (it has a Neutron). */
  get movesPorts(): boolean {
    return this.o.network.configured;
  }

  /**
   * Live migration's destination, before QEMU starts: the ports `portIds` bound here INACTIVE with
   * `migrating_to` (see `agent/network/live-bindings.ts`), recorded as `rec.network_info`, the VIFs
   * the driver plugs. @throws PortBindingFailedError, NeutronError (nothing of it is left)
   */
  async liveArrive(rec: InstanceRecord, portIds: readonly string[], preserved: readonly string[]): Promise<void> {
    if (portIds.length === 0) return;
    rec.network_info = await this.o.network.live.prepareHere(rec.uuid, portIds, this.preservedOf(rec, preserved));
    await this.c.save(rec);
  }

  /** Live migration's source, the guest running at `dest`: the ports' bindings there activated. @throws NeutronError */
  liveActivate(rec: InstanceRecord, dest: string): Promise<void> {
    const ports = (rec.network_info ?? []).map((v) => v.id);
    return ports.length ? this.o.network.live.activate(rec.uuid, ports, dest) : Promise.resolve();
  }

  /**
   * Live migration's destination, after the move: `migrating_to` out, and the ports re-read (the
   * active binding is this host's now) into the record and nova's info cache. @throws NeutronError
   */
  async liveSettle(rec: InstanceRecord, ctx: RequestContext): Promise<void> {
    const ports = (rec.network_info ?? []).map((v) => v.id);
    if (ports.length === 0) return;
    await this.o.network.live.settleHere(ports);
    const info = await this.o.network.refresh(rec.uuid, rec.network_info ?? []);
    rec.network_info = info;
    await this.c.save(rec);
    await this.c.controlPlane.network(rec.uuid, { kind: 'refreshed', info }, ctx);
  }

  /** A live migration rolled back: the ports' inactive bindings to `dest` deleted, `migrating_to` out. Never throws. */
  liveAbandon(uuid: string, portIds: readonly string[], dest: string): Promise<void> {
    return portIds.length && this.o.network.configured ? this.o.network.live.abandon(uuid, portIds, dest) : Promise.resolve();
  }

  /** The user's ports of `rec`: its record's and `extra`, which join `rec.preserved_ports`. */
  private preservedOf(rec: InstanceRecord, extra: readonly string[]): ReadonlySet<string> {
    if (extra.length) rec.preserved_ports = [...new Set([...(rec.preserved_ports ?? []), ...extra])];
    return new Set([...(rec.preserved_ports ?? []), ...(rec.network_info ?? []).filter((v) => v.preserve_on_delete).map((v) => v.id)]);
  }

  /**
   * `external_instance_event`: each event wakes the waiter of its key at once; `network-changed`
   * re-reads the instance's ports and `network-vif-deleted` drops one, each under the instance's
   * lock, in the background (so the cast is never held up by a build in progress).
   */
  events(events: readonly ExternalEvent[], ctx: RequestContext): void {
    const c = this.c;
    for (const e of events) {
      if (e.name === 'network-changed') void this.refresh(e.instance_uuid, ctx);
      else if (e.name === 'network-vif-deleted' && e.tag) void this.dropVif(e.instance_uuid, e.tag, ctx);
      else if (!this.o.events.deliver(e.instance_uuid, e.name, e.tag, e.status)) {
        c.log.info({ instance: e.instance_uuid, event: e.name, tag: e.tag, status: e.status }, 'external event nobody waits for: ignored');
      }
    }
  }

  private async plugged(uuid: string, waiter: EventWaiter, ports: readonly string[]): Promise<void> {
    const started = (this.o.clock ?? systemClock).now();
    const outcome = await waiter.wait(this.o.vifPluggingTimeoutS * 1000);
    this.o.onVifWait?.(outcome.kind, ((this.o.clock ?? systemClock).now() - started) / 1000);
    if (outcome.kind === 'completed') return;
    const failed = outcome.kind === 'failed';
    const which = (failed ? outcome.failed : outcome.missing).map((k) => k.replace(/^network-vif-plugged-/, ''));
    const err = new VifPlugTimeoutError(uuid, which.length ? which : ports, this.o.vifPluggingTimeoutS, failed);
    if (this.o.vifPluggingIsFatal) throw err;
    this.c.log.warn({ instance: uuid, ports: which }, `${err.message}; running the guest anyway (vif_plugging_is_fatal = false)`);
  }

  private refresh(uuid: string, ctx: RequestContext): Promise<void> {
    return this.underLock(uuid, 'network-changed', async (rec) => {
      const info = await this.o.network.refresh(uuid, rec.network_info ?? []);
      rec.network_info = info;
      await this.c.save(rec);
      await this.c.controlPlane.network(uuid, { kind: 'refreshed', info }, ctx);
    });
  }

  private dropVif(uuid: string, portId: string, ctx: RequestContext): Promise<void> {
    return this.underLock(uuid, 'network-vif-deleted', async (rec) => {
      const vif = (rec.network_info ?? []).find((v) => v.id === portId);
      if (!vif) return;
      await this.c.driver.detachInterface?.(rec, vif);
      const info: NetworkInfo = (rec.network_info ?? []).filter((v) => v.id !== portId);
      rec.network_info = info;
      await this.c.save(rec);
      await this.c.controlPlane.network(uuid, { kind: 'refreshed', info }, ctx);
    });
  }

  /** Runs `work` on the instance's record under its lock; an instance gone by then is skipped, and failures are logged. */
  private underLock(uuid: string, event: string, work: (rec: InstanceRecord) => Promise<void>): Promise<void> {
    return this.c.locks
      .with(uuid, async () => {
        const rec = this.c.record(uuid);
        if (rec && rec.task_state !== 'deleting') await work(rec);
      })
      .catch((e: unknown) => {
        const neutron = e instanceof NeutronError;
        this.c.log.warn({ instance: uuid, event, reason: e instanceof Error ? e.message : String(e) }, neutron ? 'could not act on the event: Neutron failed' : 'could not act on the event');
      });
  }
}
