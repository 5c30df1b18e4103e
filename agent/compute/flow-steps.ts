/**
 * Two steps that several compute flows begin with, kept in one place so the flows cannot drift
 * apart: the first record of an instance arriving on this host, and a move's claim on the
 * destination. It is not: locking, journaling or notifying; the calling flow does those.
 */
import { POWER_STATE } from '../../virt-drivers/types';
import { flatten } from './allocations';
import type { DecodedInstance } from './decode';
import type { ComputeManager } from './manager';
import type { Flavor, InstanceRecord, MigrationRecord } from '../../model/instance';
import type { RequestContext } from './ports';
import { requestFromFlavor, totalsOf } from './resources';

/** The state a flow gives an instance when it first records it here. */
export type ArrivalState = Pick<InstanceRecord, 'vm_state' | 'task_state'> & { readonly migration?: MigrationRecord };

/** A new record for `inst` on this host, holding no allocations yet, as build, resize and live migration start it. */
export function arrivingRecord(m: ComputeManager, inst: DecodedInstance, flavor: Flavor, state: ArrivalState): InstanceRecord {
  return {
    uuid: inst.uuid,
    name: inst.name,
    host: m.deps.host,
    ...state,
    power_state: POWER_STATE.NOSTATE,
    flavor,
    project_id: inst.project_id,
    user_id: inst.user_id,
    ...(inst.image_ref ? { image_ref: inst.image_ref } : {}),
    allocations: {},
    updated_at: m.now(),
  };
}

/**
 * Puts a move's claim on this (destination) host in place and records it on `rec` and its
 * migration: with a scheduler claim, verifies that the instance's allocations are on our tree and
 * of the flavor's size; without one, claims from our own view and swaps the instance's allocations
 * to the migration consumer in one write (`resuming`: a replay that finds the swap done keeps it).
 * Resolves to true when it swapped, which the caller undoes if the move fails.
 * @throws ClaimMismatchError, InsufficientResourcesError, Placement errors
 */
export async function claimMoveDestination(m: ComputeManager, rec: InstanceRecord, migration: MigrationRecord, flavor: Flavor, ctx: RequestContext, resuming = false): Promise<boolean> {
  let swapped = false;
  if (m.schedulerClaims) {
    const have = flatten(await m.allocations.read(rec.uuid));
    m.allocations.verifyClaim(rec.uuid, have, m.ourProviders(), totalsOf(requestFromFlavor(flavor)));
    migration.dest_allocations = have;
  } else {
    const plan = m.planClaim(flavor);
    m.deps.tracker.claims.claim(rec.uuid, plan);
    migration.source_allocations = await m.allocations.swapForMove(rec.uuid, migration.uuid, plan, ctx.global_request_id ?? ctx.request_id, resuming);
    migration.dest_allocations = plan;
    swapped = true;
  }
  rec.allocations = migration.dest_allocations;
  return swapped;
}
