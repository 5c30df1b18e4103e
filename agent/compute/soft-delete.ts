/**
 * Soft delete and restore, as nova-compute runs them when nova's API holds deletes back for
 * `reclaim_instance_interval` seconds:
 *
 * - `soft_delete_instance`: the guest powered off at once (nova's fallback for a driver without a
 *   soft delete of its own, libvirt's among them), the instance SOFT_DELETED with its disks,
 *   ports, volumes and allocations kept, and when this host did it recorded;
 * - `restore_instance`: the guest powered on again, ACTIVE;
 * - `reclaimExpired` (periodic, nova's `_reclaim_queued_deletes`): each instance SOFT_DELETED for
 *   longer than this host's `reclaim_instance_interval` deleted for good, through the delete flow.
 *
 * nova counts the interval from the `deleted_at` its API wrote; this host counts it from the
 * moment it powered the guest off (seconds later), which it keeps across restarts.
 *
 * Not here: the choice between a soft and a hard delete (nova-api's, by its own
 * `reclaim_instance_interval`), the delete itself (`lifecycle.ts`).
 */
import type { FlowContext } from './flow-context';
import { driverStep } from './flow-steps';
import type { RequestContext } from './ports';
import { errorText } from '../../lib/error-text';

export type SoftDeleteContext = Pick<FlowContext, 'now' | 'locks' | 'require' | 'save' | 'instances' | 'driver' | 'log' | 'notify'>;

/** Deletes an instance still SOFT_DELETED with no task, under its lock; resolves whether it did (`LifecycleFlows.reclaim`). */
export type Reclaim = (uuid: string, ctx: RequestContext) => Promise<boolean>;

export class SoftDeleteFlows {
  constructor(
    private readonly c: SoftDeleteContext,
    private readonly reclaim: Reclaim,
    /** `[DEFAULT] reclaim_instance_interval` (s); 0 or less: nothing is reclaimed here. */
    private readonly reclaimAfterS = 0,
  ) {}

  /** `soft_delete_instance`: the guest off at once; SOFT_DELETED. A replay keeps the first time it went off. */
  softDelete(uuid: string, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'soft delete', ['soft_delete.start', 'soft_delete.end', 'soft_delete.revert'], ctx, async (rec) => {
      await this.c.driver.powerOff(rec, { timeoutSec: 0 });
      rec.soft_deleted_at ??= this.c.now();
    });
  }

  /** `restore_instance`: the guest on again; ACTIVE. */
  restore(uuid: string, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'restore', ['restore.start', 'restore.end', 'restore.revert'], ctx, async (rec) => {
      await this.c.driver.powerOn(rec);
      delete rec.soft_deleted_at;
    });
  }

  /**
   * One pass of the reclaim: deletes each instance SOFT_DELETED (no task) for at least
   * `reclaim_instance_interval` seconds. A failed delete is logged and tried again by the next
   * pass, as nova's does. Resolves how many it deleted; never throws.
   */
  async reclaimExpired(ctx: RequestContext): Promise<number> {
    if (this.reclaimAfterS <= 0) return 0;
    const c = this.c;
    const now = Date.parse(c.now());
    const due = c.instances().filter((r) => r.vm_state === 'soft-delete' && r.task_state === null && now - Date.parse(r.soft_deleted_at ?? r.updated_at) >= this.reclaimAfterS * 1000);
    let deleted = 0;
    for (const { uuid, soft_deleted_at } of due) {
      c.log.info({ instance: uuid, soft_deleted_at, reclaim_instance_interval: this.reclaimAfterS }, 'soft-deleted longer than reclaim_instance_interval: deleting');
      await this.reclaim(uuid, ctx).then(
        (done) => void (done && deleted++),
        (e: unknown) => c.log.warn({ instance: uuid, reason: errorText(e) }, 'the periodic reclaim of a soft-deleted server failed; the next pass tries again'),
      );
    }
    return deleted;
  }
}
