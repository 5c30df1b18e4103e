/**
 * Steps several compute flows share, kept in one place so the flows cannot drift apart: the first
 * record of an instance arriving on this host, a move's claim on the destination recorded on the
 * instance and its migration, the best-effort revert of a failed move's swap, the driver's view of
 * an instance, putting an instance in ERROR, a step whose work is one driver call, and a failed
 * build's end.
 * It is not: locking or journaling (the calling flow does those), or the state machine
 * (`transitions.ts`).
 */
import { POWER_STATE } from '../../virt-drivers/types';
import type { InstanceSpec } from '../../virt-drivers/types';
import type { Flavor, InstanceRecord, MigrationRecord } from '../../model/instance';
import type { DecodedInstance } from './decode';
import type { FlowContext } from './flow-context';
import { placementRequestId, type RequestContext } from './ports';
import { transition, type FlowStep } from './transitions';

/** The state a flow gives an instance when it first records it here. */
export type ArrivalState = Pick<InstanceRecord, 'vm_state' | 'task_state'> & { readonly migration?: MigrationRecord };

/** A new record for `inst` on this host, holding no allocations yet, as build, resize and live migration start it. */
export function arrivingRecord(c: Pick<FlowContext, 'host' | 'now'>, inst: DecodedInstance, flavor: Flavor, state: ArrivalState): InstanceRecord {
  return {
    uuid: inst.uuid,
    name: inst.name,
    host: c.host,
    ...state,
    power_state: POWER_STATE.NOSTATE,
    flavor,
    project_id: inst.project_id,
    user_id: inst.user_id,
    ...(inst.image_ref ? { image_ref: inst.image_ref } : {}),
    ...(inst.image_meta ? { image_meta: inst.image_meta } : {}),
    allocations: {},
    updated_at: c.now(),
  };
}

/**
 * Puts a move's claim on this (destination) host in place (`ClaimService.claimMoveDestination`:
 * verify the scheduler's claim, or claim and swap in one write) and records it on `rec` and its
 * migration. Resolves to true when it swapped, which the caller undoes if the move fails.
 * `bootsFromVolume`: the instance nova sent has an empty image_ref (nova's mark of a server booted
 * from a volume, `compute_utils.is_volume_backed_instance`).
 * @throws what `ClaimService.claimMoveDestination` throws
 */
export async function claimMoveDestination(
  c: Pick<FlowContext, 'claims' | 'controlPlane'>,
  rec: InstanceRecord,
  migration: MigrationRecord,
  flavor: Flavor,
  ctx: RequestContext,
  resuming = false,
  bootsFromVolume = false,
): Promise<boolean> {
  // A server booted from a volume has no root disk on any host: nova's scheduler claims no root
  // DISK_GB for it (RequestSpec.is_bfv), and neither did its build.
  const claimed = bootsFromVolume ? { ...flavor, root_gb: 0 } : flavor;
  const claim = await c.claims.claimMoveDestination(rec.uuid, migration.uuid, claimed, {
    schedulerClaimed: c.controlPlane.schedulerClaims,
    resuming,
    requestId: placementRequestId(ctx),
  });
  if (claim.source) migration.source_allocations = claim.source;
  migration.dest_allocations = claim.dest;
  rec.allocations = claim.dest;
  return claim.source !== undefined;
}

/**
 * Moves a failed move's allocations back to the instance, best effort: a failure is logged and left
 * to the audit, since the flow is already failing for another reason.
 */
export async function revertSwapOrLog(c: Pick<FlowContext, 'claims' | 'log'>, instance: string, migration: string): Promise<void> {
  await c.claims.revertMove(instance, migration).catch((err: unknown) => c.log.warn({ instance, reason: (err as Error).message }, 'revert of the allocation swap failed; the audit will report it'));
}

/** The instance as the virt driver takes it. */
export function instanceSpec(rec: InstanceRecord, flavor: Flavor = rec.flavor): InstanceSpec {
  const volumes = (rec.volumes ?? []).map((v) => ({ volume_id: v.volume_id, device_name: v.device_name, boot_index: v.boot_index, connection_info: v.connection_info }));
  return {
    uuid: rec.uuid,
    name: rec.name,
    flavor,
    ...(rec.image_ref ? { image_ref: rec.image_ref } : {}),
    ...(rec.image_meta ? { image_meta: rec.image_meta } : {}),
    allocations: rec.allocations,
    ...(volumes.length ? { volumes } : {}),
  };
}

/**
 * Puts the instance in ERROR through the failure step `step` (a row of the transition table),
 * keeping what is known and recording the fault, and reports `step`. @throws InvalidStateError
 * when the instance is not in a state that step starts from
 */
export async function putInError(c: Pick<FlowContext, 'save' | 'log' | 'notify'>, rec: InstanceRecord, fault: string, ctx: RequestContext, step: FlowStep): Promise<void> {
  transition(rec, step);
  rec.fault = fault;
  await c.save(rec);
  c.log.warn({ instance: rec.uuid, fault }, `instance ${step.split('.')[0] ?? step} failed`);
  await c.notify(rec, step, ctx, fault);
}

/**
 * A failed build, in ERROR and reported, leaves this host where the control plane takes it back
 * (`ControlPlane.releasesFailedBuilds`): the record is dropped. An allocation removal that did not
 * go through (`allocationsFreed` false) is owed first, since no delete will come here to retry it.
 */
export async function endFailedBuild(c: Pick<FlowContext, 'controlPlane' | 'removals' | 'forget'>, rec: InstanceRecord, allocationsFreed: boolean): Promise<void> {
  if (!c.controlPlane.releasesFailedBuilds) return;
  if (!allocationsFreed) await c.removals.add(rec.uuid, [rec.uuid]);
  await c.forget(rec.uuid);
}

/**
 * A step whose work is one driver call, under the instance's lock: `start` recorded and reported,
 * `work`, then `end`; when `work` throws, `failure` (a row that clears the task, keeping or erring
 * the state as the row says) with the fault `<what> failed: <reason>`. Never throws what `work`
 * threw. @throws InvalidStateError when the instance may not take `start`, InstanceNotFoundError
 */
export function driverStep(
  c: Pick<FlowContext, 'locks' | 'require' | 'save' | 'log' | 'notify'>,
  uuid: string,
  what: string,
  [start, end, failure]: readonly [FlowStep, FlowStep, FlowStep],
  ctx: RequestContext,
  work: (rec: InstanceRecord) => Promise<void>,
): Promise<void> {
  return c.locks.with(uuid, async () => {
    const rec = c.require(uuid);
    transition(rec, start);
    await c.save(rec);
    await c.notify(rec, start, ctx);
    try {
      await work(rec);
    } catch (e) {
      await putInError(c, rec, `${what} failed: ${e instanceof Error ? e.message : String(e)}`, ctx, failure);
      return;
    }
    transition(rec, end);
    await c.save(rec);
    await c.notify(rec, end, ctx);
  });
}
