/**
 * An instance's life on one host: `build_and_run_instance` (claim, spawn, ACTIVE) and
 * `terminate_instance` (guest gone, allocations deleted, record dropped). Each step is recorded
 * before the side effect it describes, so a redelivered or recovered request resumes from the
 * recorded state. The moves are in `resize.ts` and `live.ts`.
 */
import { InstanceNotFoundError as DriverInstanceNotFound } from '../../virt-drivers/errors';
import { NeutronError } from '../network/errors';
import { AllocationConflictError, ClaimMismatchError, InsufficientResourcesError, InvalidClaimError, PlacementOutageError } from '../../tracker/claims/errors';
import { describeState, type Flavor, type InstanceRecord } from '../../model/instance';
import type { DecodedInstance } from './decode';
import type { FlowContext } from './flow-context';
import { crashPoint } from '../crash-points';
import { arrivingRecord, endFailedBuild, instanceSpec, putInError } from './flow-steps';
import { placementRequestId, type RequestContext } from './ports';
import { arrival, failureOf, transition } from './transitions';
import type { ProviderMapping, RequestedNetworks } from '../../model/network';
import type { NetworkFlows } from './network-flows';
import { bootsFromVolume, type BlockDevice } from '../../model/block-device';
import { VolumeSetupError } from '../volume/errors';
import type { VolumeFlows } from './volume-flows';

/** A build's claim information, from `host_list` selections or the deployment mode. */
export interface BuildOptions {
  readonly claimed: boolean;
  /** `requested_networks`; absent: none. */
  readonly networks?: RequestedNetworks;
  /** `security_groups` for the ports the build creates. */
  readonly securityGroups?: readonly string[];
  /** `request_spec`'s request group -> provider mapping (ports with a resource request). */
  readonly providerMapping?: ProviderMapping;
  /** `block_device_mapping`: the volumes the guest gets (absent or empty: none). */
  readonly blockDevices?: readonly BlockDevice[];
}

export type LifecycleContext = Pick<
  FlowContext,
  'host' | 'now' | 'locks' | 'claims' | 'removals' | 'driver' | 'controlPlane' | 'log' | 'record' | 'save' | 'forget' | 'notify'
> & { readonly networking: NetworkFlows; readonly volumes: VolumeFlows };

export class LifecycleFlows {
  constructor(private readonly c: LifecycleContext) {}

  /**
   * `build_and_run_instance`. Idempotent: a build that is redelivered or recovered resumes from
   * the recorded state (an instance already ACTIVE is left alone).
   */
  build(inst: DecodedInstance, flavor: Flavor, opts: BuildOptions, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(inst.uuid, async () => {
      let rec = c.record(inst.uuid);
      const resuming = rec !== undefined;
      if (rec && rec.vm_state !== 'building') {
        c.log.info({ instance: inst.uuid, state: describeState(rec) }, 'build of an instance this host already has: nothing to do');
        return;
      }
      rec ??= await c.save(arrivingRecord(c, inst, flavor, arrival('create.start')));
      crashPoint('build.recorded');
      // create.start's report and the claim overlap: neither needs the other, and in nova mode the
      // report is conductor round trips the claim would otherwise wait out. It is given a copy of
      // the record (the claim changes it), and every later step waits for it, so the control plane
      // still sees the steps in order; a crash before the claim is recorded reports it again.
      const started = rec.task_state === 'scheduling' ? c.notify({ ...rec }, 'create.start', ctx) : Promise.resolve();
      try {
        if (rec.task_state === 'scheduling') {
          // A server booted from a volume has its root disk in Cinder: nova's scheduler claims no
          // DISK_GB for it (`is_bfv`), and neither does this host.
          const claiming = bootsFromVolume(opts.blockDevices ?? []) ? { ...rec, flavor: { ...rec.flavor, root_gb: 0 } } : rec;
          rec.allocations = await c.claims
            .claimForBuild(claiming, {
              schedulerClaimed: opts.claimed || c.controlPlane.schedulerClaims,
              resuming,
              requestId: placementRequestId(ctx),
            })
            .finally(() => started);
          transition(rec, 'create.claimed');
          await c.save(rec);
          crashPoint('build.claimed');
          await c.notify(rec, 'create.claimed', ctx);
        }
        if (rec.task_state === 'networking') {
          const request = { networks: opts.networks ?? { kind: 'none' as const }, securityGroups: opts.securityGroups ?? [], ...(opts.providerMapping ? { providerMapping: opts.providerMapping } : {}) };
          await c.networking.allocate(rec, inst, request, ctx, resuming);
          transition(rec, 'create.networked');
          await c.save(rec);
          crashPoint('build.networked');
          await c.notify(rec, 'create.networked', ctx);
        }
        if (rec.task_state === 'block_device_mapping') {
          await c.volumes.prepare(rec, opts.blockDevices ?? [], ctx);
          transition(rec, 'create.volumes');
          await c.save(rec);
          crashPoint('build.volumes');
          await c.notify(rec, 'create.volumes', ctx);
        }
        if (rec.task_state === 'spawning') {
          const present = await c.driver.getInfo(rec).then(
            () => true,
            (e: unknown) => (e instanceof DriverInstanceNotFound ? false : Promise.reject(e)),
          );
          // A guest left paused by an interrupted spawn never ran: start it again from scratch,
          // re-plugged, without waiting for events (see NetworkFlows.spawn).
          const replug = present && resuming && (rec.network_info?.length ?? 0) > 0;
          if (replug) await c.driver.destroy(rec);
          if (!present || replug) await c.networking.spawn(rec, instanceSpec(rec), { resumed: resuming });
          crashPoint('build.spawned');
        }
      } catch (e) {
        await started;
        await this.failBuild(rec, e, ctx);
        return;
      }
      transition(rec, 'create.end');
      rec.launched_at = c.now();
      await c.save(rec);
      await c.notify(rec, 'create.end', ctx);
    });
  }

  private async failBuild(rec: InstanceRecord, e: unknown, ctx: RequestContext): Promise<void> {
    const c = this.c;
    const reason = e instanceof Error ? e.message : String(e);
    // A claim we made (or a scheduler claim we refused) must not stay behind: delete it, forced.
    // Nothing was written when the host refused locally, and a conflict means the consumer is not ours.
    const refusedLocally = e instanceof InsufficientResourcesError || e instanceof InvalidClaimError;
    let freed = true;
    if (!refusedLocally && !(e instanceof AllocationConflictError)) {
      // After an outage that outlasted the deadline, one more try; waiting another deadline helps no one.
      const cleanup = e instanceof PlacementOutageError ? c.claims.forceDeleteOnce(rec.uuid) : c.claims.forceDelete(rec.uuid);
      freed = await cleanup.then(
        () => true,
        (err: unknown) => {
          c.log.warn({ instance: rec.uuid, reason: (err as Error).message }, 'allocation cleanup of a failed build failed');
          return false;
        },
      );
      await c.driver.destroy(rec).catch(() => undefined);
    }
    // The ports go back whatever failed later; a build that failed before its network step bound
    // none, and Neutron is not asked.
    if (rec.task_state !== 'scheduling') {
      await c.networking.release(rec, rec.uuid, ctx).catch((err: unknown) => c.log.warn({ instance: rec.uuid, reason: (err as Error).message }, 'could not give the ports back to Neutron'));
    }
    // The attachments go back, and the volumes marked delete_on_termination (nova's _cleanup_volumes).
    await c.volumes.release(rec, ctx);
    c.claims.release(rec.uuid);
    rec.allocations = {};
    const kind = refusedLocally
      ? 'no room'
      : e instanceof ClaimMismatchError
        ? 'claim mismatch'
        : e instanceof AllocationConflictError
          ? 'allocation conflict'
          : e instanceof PlacementOutageError
            ? 'placement unavailable'
            : e instanceof NeutronError
              ? 'network failed'
              : e instanceof VolumeSetupError
                ? 'volume failed'
                : 'spawn failed';
    await putInError(c, rec, `${kind}: ${reason}`, ctx, failureOf('create.end'));
    await endFailedBuild(c, rec, freed);
  }

  /**
   * `terminate_instance`: guest gone, allocations deleted (forced), record dropped. Idempotent.
   * Completes locally whatever Placement does: the removal of the instance's (and its migration's)
   * allocations is recorded durably before the record goes, tried once before the control plane
   * is told (nova-compute deletes them before `Instance.destroy`), and otherwise retried in the
   * background until done (`removals.ts`).
   */
  terminate(uuid: string, ctx: RequestContext): Promise<void> {
    return this.c.locks.with(uuid, () => this.terminateHeld(uuid, ctx));
  }

  /**
   * Deletes for good an instance still SOFT_DELETED with no task (nova's `_reclaim_queued_deletes`
   * calls the delete itself), as `terminate` does; checked under the instance's lock, so a restore
   * or a delete that came first wins. Resolves whether it deleted.
   */
  reclaim(uuid: string, ctx: RequestContext): Promise<boolean> {
    return this.c.locks.with(uuid, async () => {
      const rec = this.c.record(uuid);
      if (rec?.vm_state !== 'soft-delete' || rec.task_state !== null) return false;
      await this.terminateHeld(uuid, ctx);
      return true;
    });
  }

  /** `terminate` with the instance's lock held. */
  private async terminateHeld(uuid: string, ctx: RequestContext): Promise<void> {
    const c = this.c;
    const rec = c.record(uuid);
    if (rec) {
      transition(rec, 'delete.start');
      await c.save(rec);
      crashPoint('terminate.recorded');
      await c.notify(rec, 'delete.start', ctx);
    }
    await c.driver.destroy({ uuid, name: rec?.name ?? uuid }).catch((e: unknown) => {
      if (!(e instanceof DriverInstanceNotFound)) throw e;
    });
    crashPoint('terminate.destroyed');
    // nova's order: the guest goes, then its ports; a Neutron that cannot be told fails the delete
    // (the instance stays, in ERROR, and the delete can be asked again), as nova does.
    await c.networking.release(rec, uuid, ctx).catch(async (e: unknown) => {
      if (rec) await putInError(c, rec, `network failed: ${(e as Error).message}`, ctx, 'delete.error');
      throw e;
    });
    // Then its volumes: attachments deleted, delete_on_termination volumes deleted (never throws).
    await c.volumes.release(rec, ctx);
    const consumers = rec?.migration ? [uuid, rec.migration.uuid] : [uuid];
    await c.removals.add(uuid, consumers);
    c.claims.release(uuid);
    await c.forget(uuid);
    crashPoint('terminate.forgotten');
    // nova's order: the allocations go before the Instance is destroyed, so a server nova no
    // longer shows holds nothing in Placement (unless the one try failed: then the drain retries).
    await c.removals.tryNow(consumers, placementRequestId(ctx));
    crashPoint('terminate.freed');
    await c.controlPlane.deleted(uuid, rec, ctx);
  }
}
