/**
 * Start-up recovery, run before the agent consumes RPC (nova's `init_host`, done from a journal
 * instead of guesses):
 *
 * 0. Allocation removals that deletes recorded and Placement has not yet done are drained again in
 *    the background (`removals.ts`).
 * 1. Every request the journal accepted but never completed runs again, in arrival order. The
 *    flows resume from the state they recorded before each side effect, so a build finishes, a
 *    migration step is completed or rolled back, a delete completes. A call's caller has given up
 *    by now; its result is logged.
 * 2. An instance still BUILDING with no request left to finish it goes to ERROR, its allocation
 *    removed (nova bug 1833581's rule); other transient task states without a request are reset
 *    to the stable state the record shows.
 * 3. Records are reconciled with the driver: an ACTIVE instance the hypervisor no longer has goes
 *    to ERROR with a fault saying so; a guest the agent has no record of is reported.
 * 4. Records are reconciled with Placement: a stable instance whose allocation is missing gets it
 *    written back (consumer generation null, so nothing is overwritten). Placement unavailable
 *    past the deadline leaves the instance to the audit, which reports a missing allocation.
 */
import { PlacementOutageError } from '../../tracker/claims/errors';
import type { JournalRequest, RequestOutcome } from '../journal/types';
import type { FlowContext } from './flow-context';
import { endFailedBuild, putInError } from './flow-steps';
import { bindMethod, type ComputeMethod } from './method-table';
import type { RequestContext } from './ports';
import { allows, transition } from './transitions';

/** The journal as recovery sees it. */
export interface PendingRequests {
  pending(): JournalRequest[];
  complete(uniqueId: string, outcome: RequestOutcome): Promise<void>;
}

export interface RecoveryReport {
  readonly replayed: number;
  readonly failed: number;
  readonly erroredBuilds: readonly string[];
  readonly vanished: readonly string[];
  readonly unknownGuests: readonly string[];
  readonly rewrittenAllocations: readonly string[];
}

/** What recovery works with. */
export type RecoveryContext = Pick<FlowContext, 'claims' | 'removals' | 'controlPlane' | 'forget' | 'driver' | 'log' | 'instances' | 'save' | 'notify'>;

export async function recover(c: RecoveryContext, journal: PendingRequests, methods: readonly ComputeMethod[]): Promise<RecoveryReport> {
  const log = c.log;
  const table = new Map(methods.map((x) => [`${x.namespace ?? ''}/${x.name}`, x]));
  let replayed = 0;
  let failed = 0;
  c.removals.start();
  for (const req of journal.pending()) {
    const method = table.get(`${req.namespace ?? ''}/${req.method}`);
    const ctx = req.context as RequestContext;
    let outcome: RequestOutcome;
    if (!method) {
      outcome = { status: 'failed', error: `no such method ${req.method}` };
    } else {
      try {
        const result = await bindMethod(method, req.args, ctx).run();
        outcome = { status: 'succeeded' };
        if (req.reply) log.info({ method: req.method, request: req.uniqueId, result: result === undefined ? null : 'returned' }, 'recovered a call whose caller has gone; result not sent');
      } catch (e) {
        failed++;
        outcome = { status: 'failed', error: (e as Error).message };
        log.warn({ method: req.method, request: req.uniqueId, reason: (e as Error).message }, 'recovered request failed');
      }
    }
    replayed++;
    await journal.complete(req.uniqueId, outcome);
  }

  const erroredBuilds: string[] = [];
  const none: RequestContext = { request_id: 'req-recovery' };
  for (const rec of c.instances()) {
    if (rec.vm_state === 'building') {
      const freed = await c.claims.forceDeleteOnce(rec.uuid).then(
        () => true,
        () => false,
      );
      await c.driver.destroy(rec).catch(() => undefined);
      rec.allocations = {};
      await putInError(c, rec, 'the build was interrupted and no request is left to finish it', none, 'create.error');
      await endFailedBuild(c, rec, freed);
      erroredBuilds.push(rec.uuid);
    } else if (allows(rec, 'init_host.reset')) {
      await c.save(transition(rec, 'init_host.reset'));
      await c.notify(rec, 'init_host.reset', none);
    }
  }

  const guests = new Map((await c.driver.listInstances()).map((g) => [g.uuid, g]));
  const vanished: string[] = [];
  for (const rec of c.instances()) {
    if (!allows(rec, 'power_off.error') || guests.has(rec.uuid)) continue;
    await putInError(c, rec, 'the guest disappeared while the agent was not running', none, 'power_off.error');
    vanished.push(rec.uuid);
  }
  const known = new Set(c.instances().map((r) => r.uuid));
  const unknownGuests = [...guests.keys()].filter((u) => !known.has(u));
  if (unknownGuests.length) log.warn({ guests: unknownGuests }, 'guests on this host that the agent has no record of; left alone');

  const rewrittenAllocations: string[] = [];
  for (const rec of c.instances()) {
    if (rec.migration || rec.task_state || (rec.vm_state !== 'active' && rec.vm_state !== 'stopped')) continue;
    if (Object.keys(rec.allocations).length === 0) continue;
    try {
      const have = await c.claims.read(rec.uuid);
      if (Object.keys(have).length > 0) continue;
      await c.claims.restore(rec.uuid, rec.allocations, rec.project_id, rec.user_id);
      rewrittenAllocations.push(rec.uuid);
    } catch (e) {
      log.warn({ instance: rec.uuid, reason: (e as Error).message }, 'could not restore a missing allocation');
      if (e instanceof PlacementOutageError) break; // each further instance would wait out the deadline again
    }
  }
  const report = { replayed, failed, erroredBuilds, vanished, unknownGuests, rewrittenAllocations };
  log.info(
    { replayed, failed, errored_builds: erroredBuilds.length, vanished: vanished.length, unknown_instances: unknownGuests.length, restored_allocations: rewrittenAllocations.length },
    'recovery finished',
  );
  return report;
}
