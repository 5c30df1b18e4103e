/**
 * The compute manager: the operations the control plane casts (spawn, terminate, cold and live
 * migration steps), done so that races, conflicts and crashes never lose a request or leak an
 * allocation.
 *
 * Every operation runs under its instance's lock (`locks.ts`), checks the state machine
 * (`states.ts`), and records each transition in the durable store BEFORE the side effect it
 * describes, so recovery (`recovery.ts`) always knows how far it got. Allocations follow nova's
 * settled rules (`allocations.ts`); outcomes go out as versioned notifications.
 *
 * This file holds what every flow shares, and build/terminate/read; the moves are in `resize.ts`
 * and `live.ts`. Not here: decoding (`decode.ts`), RPC registration (`register.ts`).
 */
import type { Logger } from '../../lib/logging/logger';
import { InsufficientResourcesError, InvalidClaimError } from '../../tracker/claims';
import type { PlacementApi } from '../../tracker/placement/api';
import type { ResourceTracker } from '../../tracker/tracker';
import type { VirtDriver } from '../../virt-drivers/driver';
import { InstanceNotFoundError as DriverInstanceNotFound } from '../../virt-drivers/errors';
import type { InstanceSpec } from '../../virt-drivers/types';
import { POWER_STATE } from '../../virt-drivers/types';
import { AllocationConflictError, ClaimMismatchError, flatten, InstanceAllocations } from './allocations';
import type { DecodedInstance } from './decode';
import { InstanceLocks } from './locks';
import { arrivingRecord } from './flow-steps';
import { describeState, InstanceNotFoundError, InvalidStateError, type Flavor, type InstanceRecord } from '../../model/instance';
import { NotifierControlPlane, type ControlPlane, type FlowStep } from './control-plane';
import type { ComputePeers, Notifier, RecordStore, RequestContext } from './ports';
import { placeRequest, requestFromFlavor, sumAllocations, totalsOf } from './resources';

export const INSTANCE = 'instance';

export interface ManagerDeps {
  readonly host: string;
  readonly driver: VirtDriver;
  readonly tracker: ResourceTracker;
  readonly api: PlacementApi;
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
}

/** A build's claim information, from `host_list` selections or the deployment mode. */
export interface BuildOptions {
  readonly claimed: boolean;
}

export class ComputeManager {
  readonly locks = new InstanceLocks();
  readonly allocations: InstanceAllocations;
  readonly log: Logger;
  readonly controlPlane: ControlPlane;

  constructor(readonly deps: ManagerDeps) {
    this.log = deps.logger.child({ component: 'compute' });
    this.controlPlane =
      deps.controlPlane ??
      new NotifierControlPlane(deps.notifier, deps.host, (event, instance, reason) => this.log.warn({ instance, event, reason }, 'notification not sent'), {
        schedulerClaims: deps.schedulerClaims ?? false,
      });
    this.allocations = new InstanceAllocations(deps.api, (rp) => deps.tracker.sharingProviders().some((p) => p.uuid === rp));
  }

  // ---- shared helpers -------------------------------------------------------------------------

  now(): string {
    return new Date((this.deps.now ?? Date.now)()).toISOString();
  }

  record(uuid: string): InstanceRecord | undefined {
    return this.deps.store.get<InstanceRecord>(INSTANCE, uuid);
  }

  require(uuid: string): InstanceRecord {
    const r = this.record(uuid);
    if (!r) throw new InstanceNotFoundError(uuid);
    return r;
  }

  /** Records the instance durably; call before the side effect the new state describes. */
  async save(rec: InstanceRecord): Promise<InstanceRecord> {
    rec.updated_at = this.now();
    await this.deps.store.put(INSTANCE, rec.uuid, rec);
    return rec;
  }

  async forget(uuid: string): Promise<void> {
    await this.deps.store.del(INSTANCE, uuid);
  }

  instances(): InstanceRecord[] {
    return this.deps.store.list<InstanceRecord>(INSTANCE).map(([, r]) => r);
  }

  /** Consumers with an operation under way: the audit must not call them orphaned. */
  inFlight(): Set<string> {
    const out = new Set<string>(this.locks.busy());
    for (const r of this.instances()) {
      if (r.task_state || r.vm_state === 'building') out.add(r.uuid);
      if (r.migration) out.add(r.migration.uuid).add(r.uuid);
    }
    return out;
  }

  /** Reports a flow step to the control plane (notification, or nova's saves). Never throws. */
  notify(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault?: string): Promise<void> {
    return this.controlPlane.step(rec, step, ctx, fault);
  }

  /** Whether the scheduler claimed before builds and moves (nova mode). */
  get schedulerClaims(): boolean {
    return this.controlPlane.schedulerClaims;
  }

  spec(rec: InstanceRecord, flavor: Flavor = rec.flavor): InstanceSpec {
    return { uuid: rec.uuid, name: rec.name, flavor, ...(rec.image_ref ? { image_ref: rec.image_ref } : {}), allocations: rec.allocations };
  }

  /** Where `flavor` fits on this host, checked against in-flight claims. @throws InsufficientResourcesError */
  planClaim(flavor: Flavor): Record<string, Record<string, number>> {
    const { tracker } = this.deps;
    return placeRequest(requestFromFlavor(flavor), { providers: tracker.ourProviders(), sharing: tracker.sharingProviders(), claims: tracker.claims });
  }

  ourProviders(): Set<string> {
    return new Set(this.deps.tracker.ourProviders().map((p) => p.uuid));
  }

  /** Puts the instance in ERROR with a fault, keeping what is known. */
  async error(rec: InstanceRecord, fault: string, ctx: RequestContext, event: 'create' | 'resize_finish' | 'power_off'): Promise<void> {
    rec.vm_state = 'error';
    rec.task_state = null;
    rec.fault = fault;
    await this.save(rec);
    this.log.warn({ instance: rec.uuid, fault }, `instance ${event} failed`);
    await this.notify(rec, `${event}.error`, ctx, fault);
  }

  // ---- build -----------------------------------------------------------------------------------

  /**
   * `build_and_run_instance`. Idempotent: a build that is redelivered or recovered resumes from
   * the recorded state (an instance already ACTIVE is left alone).
   */
  build(inst: DecodedInstance, flavor: Flavor, opts: BuildOptions, ctx: RequestContext): Promise<void> {
    return this.locks.with(inst.uuid, async () => {
      let rec = this.record(inst.uuid);
      const resuming = rec !== undefined;
      if (rec && rec.vm_state !== 'building') {
        this.log.info({ instance: inst.uuid, state: describeState(rec) }, 'build of an instance this host already has: nothing to do');
        return;
      }
      rec ??= await this.save(arrivingRecord(this, inst, flavor, { vm_state: 'building', task_state: 'scheduling' }));
      if (rec.task_state === 'scheduling') await this.notify(rec, 'create.start', ctx);
      try {
        if (rec.task_state === 'scheduling') {
          rec.allocations = await this.claimForBuild(rec, opts, ctx, resuming);
          rec.task_state = 'spawning';
          await this.save(rec);
          await this.notify(rec, 'create.claimed', ctx);
        }
        if (rec.task_state === 'spawning') {
          const present = await this.deps.driver.getInfo(rec).then(
            () => true,
            (e: unknown) => (e instanceof DriverInstanceNotFound ? false : Promise.reject(e)),
          );
          if (!present) await this.deps.driver.spawn(this.spec(rec));
        }
      } catch (e) {
        await this.failBuild(rec, e, ctx);
        return;
      }
      rec.vm_state = 'active';
      rec.task_state = null;
      rec.power_state = POWER_STATE.RUNNING;
      rec.launched_at = this.now();
      await this.save(rec);
      await this.notify(rec, 'create.end', ctx);
    });
  }

  private async claimForBuild(rec: InstanceRecord, opts: BuildOptions, ctx: RequestContext, resuming: boolean): Promise<Record<string, Record<string, number>>> {
    const want = totalsOf(requestFromFlavor(rec.flavor));
    if (resuming && !opts.claimed && !this.schedulerClaims) {
      // A replay after a crash: the claim may have been written before the crash. If the consumer
      // holds what this flavor asks, on this host, it is ours: adopt it rather than fail on it.
      const existing = flatten(await this.allocations.read(rec.uuid));
      if (Object.keys(existing).length > 0) {
        this.allocations.verifyClaim(rec.uuid, existing, this.ourProviders(), want);
        return existing;
      }
    }
    if (opts.claimed || this.schedulerClaims) {
      const existing = flatten(await this.allocations.read(rec.uuid));
      this.allocations.verifyClaim(rec.uuid, existing, this.ourProviders(), want);
      return existing;
    }
    const plan = this.planClaim(rec.flavor);
    this.deps.tracker.claims.claim(rec.uuid, plan);
    try {
      await this.allocations.claimNew(rec.uuid, plan, rec.project_id, rec.user_id, ctx.global_request_id ?? ctx.request_id);
    } catch (e) {
      this.deps.tracker.claims.release(rec.uuid);
      throw e;
    }
    return plan;
  }

  private async failBuild(rec: InstanceRecord, e: unknown, ctx: RequestContext): Promise<void> {
    const reason = e instanceof Error ? e.message : String(e);
    // A claim we made (or a scheduler claim we refused) must not stay behind: delete it, forced.
    // Nothing was written when the host refused locally, and a conflict means the consumer is not ours.
    const refusedLocally = e instanceof InsufficientResourcesError || e instanceof InvalidClaimError;
    if (!refusedLocally && !(e instanceof AllocationConflictError)) {
      await this.allocations.forceDelete(rec.uuid).catch((err: unknown) => this.log.warn({ instance: rec.uuid, reason: (err as Error).message }, 'allocation cleanup failed; the audit will report it'));
      await this.deps.driver.destroy(rec).catch(() => undefined);
    }
    this.deps.tracker.claims.release(rec.uuid);
    rec.allocations = {};
    const kind =
      e instanceof InsufficientResourcesError || e instanceof InvalidClaimError
        ? 'no room'
        : e instanceof ClaimMismatchError
          ? 'claim mismatch'
          : e instanceof AllocationConflictError
            ? 'allocation conflict'
            : 'spawn failed';
    await this.error(rec, `${kind}: ${reason}`, ctx, 'create');
  }

  // ---- terminate -------------------------------------------------------------------------------

  /** `terminate_instance`: guest gone, allocations deleted (forced), record dropped. Idempotent. */
  terminate(uuid: string, ctx: RequestContext): Promise<void> {
    return this.locks.with(uuid, async () => {
      const rec = this.record(uuid);
      if (rec) {
        rec.task_state = 'deleting';
        await this.save(rec);
        await this.notify(rec, 'delete.start', ctx);
      }
      await this.deps.driver.destroy({ uuid, name: rec?.name ?? uuid }).catch((e: unknown) => {
        if (!(e instanceof DriverInstanceNotFound)) throw e;
      });
      await this.allocations.forceDelete(uuid, ctx.global_request_id ?? ctx.request_id);
      if (rec?.migration) await this.allocations.forceDelete(rec.migration.uuid);
      this.deps.tracker.claims.release(uuid);
      await this.forget(uuid);
      await this.controlPlane.deleted(uuid, rec, ctx);
    });
  }

  // ---- read ------------------------------------------------------------------------------------

  list(): Array<Pick<InstanceRecord, 'uuid' | 'name' | 'vm_state' | 'task_state' | 'power_state' | 'host'>> {
    return this.instances()
      .map((r) => ({ uuid: r.uuid, name: r.name, vm_state: r.vm_state, task_state: r.task_state, power_state: r.power_state, host: r.host }))
      .sort((a, b) => a.uuid.localeCompare(b.uuid));
  }

  /** One instance with its allocations as Placement holds them now. */
  async show(uuid: string): Promise<InstanceRecord & { placement_allocations: Record<string, Record<string, number>> }> {
    const rec = this.require(uuid);
    const placement = flatten(await this.allocations.read(uuid));
    return { ...rec, placement_allocations: placement };
  }

  /** Checks an operation is allowed; @throws InvalidStateError */
  static expect(rec: InstanceRecord, op: string, ok: boolean): void {
    if (!ok) throw new InvalidStateError(rec.uuid, op, describeState(rec));
  }

  /** Totals per class of `allocs`, for checks and logs. */
  static totals = sumAllocations;
}
