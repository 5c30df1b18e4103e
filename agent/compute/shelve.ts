/**
 * `shelve_instance`, `shelve_offload_instance` and `unshelve_instance`, as nova-compute runs them
 * with nova's default `shelved_offload_time = 0`:
 *
 * - shelve: the guest powered off (cleanly unless paused), its root disk snapshotted into the
 *   image nova's API made (`snapshot.ts`), SHELVED with nova's `shelved_*` system metadata, then
 *   offloaded at once;
 * - offload: the ports kept for the instance but bound to no host, the guest and its disks
 *   destroyed, its volumes disconnected but kept reserved for it (`VolumeFlows.keepReservedOnly`),
 *   the allocations removed (owed durably, as a delete's are), SHELVED_OFFLOADED on no host; this
 *   host drops its record;
 * - unshelve (on the host the scheduler picked): the instance arrives as a build does: the
 *   scheduler's claim verified, the ports bound here, its volumes (nova's mappings, read from the
 *   conductor: those attached while it was offloaded are only there) connected here, the guest
 *   spawned from the shelved image or its boot volume (plugged, Neutron's events awaited),
 *   ACTIVE; the shelved image is then deleted, as nova does.
 *
 * A failed shelve deletes the snapshot image and starts again a guest that ran; a failed unshelve
 * leaves the server SHELVED_OFFLOADED on no host with nothing of it here (claim, ports, guest),
 * to be unshelved again. Replays resume from the recorded task.
 *
 * `[DEFAULT] shelved_offload_time` (nova's): 0 offloads at once; otherwise the server stays SHELVED
 * here, powered off with its disk and allocation, until `offloadExpired` (run periodically, nova's
 * `_poll_shelved_instances`) offloads it after that many seconds (-1: never); an unshelve of it is
 * nova's `start_instance` (`startShelved`), and deletes the snapshot image.
 */
import { InstanceNotFoundError as DriverInstanceNotFound } from '../../virt-drivers/errors';
import { bootsFromVolume, LOCAL_ROOT_DEVICE, volumeMappings } from '../../model/block-device';
import { POWER_STATE, type Flavor, type InstanceRecord } from '../../model/instance';
import type { DecodedInstance } from './decode';
import type { FlowContext } from './flow-context';
import { arrivingRecord, driverStep, instanceSpec, putInError } from './flow-steps';
import type { NetworkFlows } from './network-flows';
import { placementRequestId, type RequestContext } from './ports';
import type { SnapshotFlows } from './snapshot';
import { nameDevices, type VolumeFlows } from './volume-flows';
import { arrival, transition, type FlowStep } from './transitions';
import { errorText } from '../../lib/error-text';

export type ShelveContext = Pick<FlowContext, 'host' | 'now' | 'locks' | 'require' | 'record' | 'instances' | 'save' | 'forget' | 'claims' | 'removals' | 'driver' | 'controlPlane' | 'log' | 'notify'>;


/** What an unshelve needs of the instance nova sent besides the build's fields: its ports. */
export interface UnshelveRequest {
  readonly instance: DecodedInstance;
  readonly flavor: Flavor;
  /** The shelved image (nova's `image` argument); absent: the server was booted from a volume. */
  readonly imageId: string | undefined;
  readonly portIds: readonly string[];
  readonly preservedPortIds: readonly string[];
}

export class ShelveFlows {
  constructor(
    private readonly c: ShelveContext,
    private readonly networking: NetworkFlows,
    private readonly snapshots: SnapshotFlows,
    private readonly volumes: VolumeFlows,
    /** `[DEFAULT] shelved_offload_time` (s): 0 at once, -1 never. */
    private readonly offloadAfterS = 0,
  ) {}

  /** `shelve_instance`: powered off, snapshotted into `imageId`, SHELVED, then offloaded. */
  shelve(uuid: string, imageId: string, cleanShutdown: boolean, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      if (await this.alreadyOffloaded(rec)) return;
      if (rec.task_state !== 'shelving_offloading') {
        const ran = rec.vm_state === 'active';
        await this.step(rec, 'shelve.start', ctx);
        try {
          await c.driver.powerOff(rec, cleanShutdown && rec.vm_state !== 'paused' ? {} : { timeoutSec: 0 });
          await this.snapshots.capture(rec, imageId, ctx, ['shelve.pending', 'shelve.uploading']);
        } catch (e) {
          await this.fail(rec, 'shelve.revert', `shelve failed: ${errorText(e)}`, ctx);
          await this.snapshots.dropImage(uuid, imageId, 'a failed shelve');
          if (ran) await c.driver.powerOn(rec).catch((err: unknown) => c.log.warn({ instance: uuid, reason: errorText(err) }, 'the guest of a failed shelve could not be started again'));
          return;
        }
        rec.shelved = { image_id: imageId, at: c.now() };
        if (this.offloadAfterS !== 0) {
          await this.step(rec, 'shelve.kept', ctx);
          return;
        }
        await this.step(rec, 'shelve.end', ctx);
      }
      await this.offload(rec, ctx, 'shelve.offloaded', 'shelve.revert');
    });
  }

  /** `shelve_offload_instance`: a SHELVED server (or one booted from a volume) offloaded. */
  shelveOffload(uuid: string, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      if (await this.alreadyOffloaded(rec)) return;
      await this.step(rec, 'shelve_offload.start', ctx);
      await this.offload(rec, ctx, 'shelve_offload.end', 'shelve_offload.revert');
    });
  }

  /**
   * Offloads the SHELVED servers kept here longer than `shelved_offload_time` (nova's
   * `_poll_shelved_instances`); resolves to how many. Never throws: a failed offload is recorded as
   * its fault and the server stays SHELVED.
   */
  async offloadExpired(ctx: RequestContext): Promise<number> {
    if (this.offloadAfterS <= 0) return 0;
    const c = this.c;
    const now = Date.parse(c.now());
    const due = c.instances().filter((r) => r.vm_state === 'shelved' && r.task_state === null && r.shelved && now - Date.parse(r.shelved.at) >= this.offloadAfterS * 1000);
    for (const { uuid } of due) {
      await c.locks
        .with(uuid, async () => {
          const rec = c.record(uuid);
          if (rec?.vm_state !== 'shelved' || rec.task_state !== null) return;
          c.log.info({ instance: uuid, shelved_at: rec.shelved?.at, shelved_offload_time: this.offloadAfterS }, 'shelved longer than shelved_offload_time: offloading');
          await this.step(rec, 'shelve_offload.expired', ctx);
          await this.offload(rec, ctx, 'shelve_offload.end', 'shelve_offload.revert');
        })
        .catch((e: unknown) => c.log.warn({ instance: uuid, reason: errorText(e) }, 'the periodic offload of a shelved server failed'));
    }
    return due.length;
  }

  /** `start_instance` of a SHELVED server still here (nova's unshelve of it): ACTIVE again, then its snapshot image deleted. */
  async startShelved(uuid: string, ctx: RequestContext): Promise<void> {
    let image: string | undefined;
    await driverStep(this.c, uuid, 'unshelve', ['power_on.shelved_start', 'power_on.shelved_end', 'power_on.revert'], ctx, async (rec) => {
      await this.c.driver.powerOn(rec);
      image = rec.shelved?.image_id;
      delete rec.shelved;
    });
    if (image) await this.snapshots.dropImage(uuid, image, 'an unshelved instance');
  }

  /**
   * `unshelve_instance` on the host the scheduler picked: the server arrives and runs from its
   * shelved image. Idempotent: an unshelve already done here is left as it is.
   */
  unshelve(req: UnshelveRequest, ctx: RequestContext): Promise<void> {
    const c = this.c;
    const uuid = req.instance.uuid;
    return c.locks.with(uuid, async () => {
      let rec = c.record(uuid);
      if (rec && rec.vm_state !== 'shelved_offloaded') {
        c.log.info({ instance: uuid, vm_state: rec.vm_state }, 'unshelve of an instance this host already runs: nothing to do');
        return;
      }
      const resuming = rec !== undefined;
      if (!rec) {
        rec = await c.save(arrivingRecord(c, req.instance, req.flavor, arrival('unshelve.start', undefined, 'shelved_offloaded')));
        await c.notify(rec, 'unshelve.start', ctx);
      }
      const original = rec.image_ref;
      try {
        if (rec.block_devices === undefined) {
          const mappings = volumeMappings(await c.controlPlane.blockDevicesOf(uuid, ctx));
          rec.block_devices = nameDevices(mappings, req.imageId ? [LOCAL_ROOT_DEVICE] : []);
          await c.save(rec);
        }
        const fromVolume = bootsFromVolume(rec.block_devices);
        if (!req.imageId && !fromVolume) throw new Error('nova sent no shelved image, and the server has no boot volume');
        // A server booted from a volume claims no root disk here (nova's scheduler asked for none).
        const claiming = fromVolume ? { ...rec, flavor: { ...rec.flavor, root_gb: 0 } } : rec;
        rec.allocations = await c.claims.claimForBuild(claiming, { schedulerClaimed: c.controlPlane.schedulerClaims, resuming, requestId: placementRequestId(ctx) });
        await this.step(rec, 'unshelve.claimed', ctx);
        await this.networking.moveHere(rec, req.portIds, ctx, req.preservedPortIds);
        await this.volumes.prepare(rec, rec.block_devices, ctx);
        const present = await c.driver.getInfo(rec).then(
          () => true,
          (e: unknown) => (e instanceof DriverInstanceNotFound ? false : Promise.reject(e)),
        );
        // A guest an interrupted unshelve left never ran: it is started again from scratch.
        if (present) await c.driver.destroy(rec);
        if (req.imageId) rec.image_ref = req.imageId;
        // The disk is made from the shelved snapshot, then put on the instance's own image (which
        // stays in Glance when the snapshot goes), as nova's libvirt driver does.
        const spec = req.imageId && original !== undefined ? { ...instanceSpec(rec), rebase_image_ref: original } : instanceSpec(rec);
        await this.networking.spawn(rec, spec, { resumed: resuming });
      } catch (e) {
        await this.failUnshelve(rec, e, original, ctx);
        return;
      }
      if (original === undefined) delete rec.image_ref;
      else rec.image_ref = original;
      delete rec.shelved;
      rec.launched_at = c.now();
      await this.step(rec, 'unshelve.end', ctx);
      if (req.imageId) await this.snapshots.dropImage(uuid, req.imageId, 'an unshelved instance');
    });
  }

  /** The offload proper, from SHELVED (or a volume-backed server) with task shelving_offloading. */
  private async offload(rec: InstanceRecord, ctx: RequestContext, end: FlowStep, revert: FlowStep): Promise<void> {
    const c = this.c;
    try {
      await c.driver.powerOff(rec, { timeoutSec: 0 }).catch((e: unknown) => {
        if (!(e instanceof DriverInstanceNotFound)) throw e;
      });
      await this.networking.unbindForOffload(rec);
      await c.driver.destroy(rec);
      await this.volumes.keepReservedOnly(rec, ctx);
      // Owed durably before the record goes, as a delete's removal is (`removals.ts`).
      await c.removals.add(rec.uuid, [rec.uuid]);
    } catch (e) {
      await this.fail(rec, revert, `offload failed: ${errorText(e)}`, ctx);
      return;
    }
    await c.removals.tryNow([rec.uuid], placementRequestId(ctx));
    c.claims.release(rec.uuid);
    rec.allocations = {};
    rec.power_state = POWER_STATE.SHUTDOWN;
    await this.step(rec, end, ctx);
    await c.forget(rec.uuid);
  }

  /** A replay that finds the offload done (its record not yet dropped) drops it. */
  private async alreadyOffloaded(rec: InstanceRecord): Promise<boolean> {
    if (rec.vm_state !== 'shelved_offloaded') return false;
    await this.c.forget(rec.uuid);
    return true;
  }

  private async failUnshelve(rec: InstanceRecord, e: unknown, original: string | undefined, ctx: RequestContext): Promise<void> {
    const c = this.c;
    const fault = `unshelve failed: ${errorText(e)}`;
    await c.claims.forceDelete(rec.uuid).catch((err: unknown) => c.log.warn({ instance: rec.uuid, reason: errorText(err) }, 'the claim of a failed unshelve could not be removed; the audit will report it'));
    await c.driver.destroy(rec).catch(() => undefined);
    await this.volumes.keepReservedOnly(rec, ctx).catch((err: unknown) => c.log.warn({ instance: rec.uuid, reason: errorText(err) }, 'the volumes of a failed unshelve could not be disconnected from this host'));
    await this.networking.unbindForOffload(rec).catch((err: unknown) => c.log.warn({ instance: rec.uuid, reason: errorText(err) }, 'the ports of a failed unshelve could not be unbound'));
    c.claims.release(rec.uuid);
    rec.allocations = {};
    if (original === undefined) delete rec.image_ref;
    else rec.image_ref = original;
    await putInError(c, rec, fault, ctx, 'unshelve.error');
    await c.forget(rec.uuid);
  }

  private async fail(rec: InstanceRecord, step: FlowStep, fault: string, ctx: RequestContext): Promise<void> {
    transition(rec, step);
    rec.fault = fault;
    await this.c.save(rec);
    this.c.log.warn({ instance: rec.uuid, fault }, 'shelve step failed; task cleared');
    await this.c.notify(rec, step, ctx, fault);
  }

  private async step(rec: InstanceRecord, step: FlowStep, ctx: RequestContext): Promise<void> {
    transition(rec, step);
    await this.c.save(rec);
    await this.c.notify(rec, step, ctx);
  }
}
