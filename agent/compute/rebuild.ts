/**
 * `rebuild_instance` on the host the instance runs on, as nova-compute's default rebuild does it:
 * the guest and its local disks destroyed, then spawned again from the new image with the same
 * flavor and the same allocations (Placement is not touched). A server that was STOPPED is stopped
 * again afterwards through the stop steps, as nova does; a failure puts it in ERROR with the fault.
 *
 * Not here: evacuation (`recreate`: rebuilding on this host an instance of a host that is down),
 * refused as a method the agent does not implement (`unsupported.ts`).
 */
import type { FlowContext } from './flow-context';
import { instanceSpec, putInError } from './flow-steps';
import type { RequestContext } from './ports';
import { transition } from './transitions';
import { UnsupportedMethodError } from './unsupported';

export type RebuildContext = Pick<FlowContext, 'locks' | 'require' | 'save' | 'driver' | 'log' | 'notify' | 'now'>;

/** What a rebuild request asks for. */
export interface RebuildRequest {
  /** The image to rebuild from (nova's `image_ref`); null keeps the instance's own. */
  readonly imageRef: string | null;
  /** Evacuation to this host (nova's `recreate`). */
  readonly recreate: boolean;
}

/**
 * @throws UnsupportedMethodError for an evacuation; InstanceNotFoundError; InvalidStateError when
 * the instance is in a state a rebuild does not start from
 */
export function rebuild(c: RebuildContext, uuid: string, req: RebuildRequest, ctx: RequestContext): Promise<void> {
  if (req.recreate) return Promise.reject(new UnsupportedMethodError('rebuild_instance with recreate (evacuation)', uuid));
  return c.locks.with(uuid, async () => {
    const rec = c.require(uuid);
    // The vm_state is kept until the end, so a rebuild resumed after a restart knows it too.
    const wasStopped = rec.vm_state === 'stopped';
    if (req.imageRef) rec.image_ref = req.imageRef;
    transition(rec, 'rebuild.start');
    await c.save(rec);
    await c.notify(rec, 'rebuild.start', ctx);
    try {
      await c.driver.destroy(rec);
      await c.driver.spawn(instanceSpec(rec));
    } catch (e) {
      await putInError(c, rec, `rebuild failed: ${e instanceof Error ? e.message : String(e)}`, ctx, 'rebuild.error');
      return;
    }
    transition(rec, 'rebuild.end');
    rec.launched_at = c.now();
    await c.save(rec);
    await c.notify(rec, 'rebuild.end', ctx);
    if (!wasStopped) return;
    transition(rec, 'power_off.start');
    await c.save(rec);
    await c.notify(rec, 'power_off.start', ctx);
    try {
      await c.driver.powerOff(rec, { timeoutSec: 0 });
    } catch (e) {
      rec.fault = `stop failed: ${e instanceof Error ? e.message : String(e)}`;
      transition(rec, 'power_off.revert');
      await c.save(rec);
      await c.notify(rec, 'power_off.revert', ctx, rec.fault);
      return;
    }
    transition(rec, 'power_off.end');
    await c.save(rec);
    await c.notify(rec, 'power_off.end', ctx);
  });
}
