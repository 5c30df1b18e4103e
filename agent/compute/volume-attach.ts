/**
 * `reserve_block_device_name`, `attach_volume`, `detach_volume` and the `volume-extended` event,
 * as nova-compute runs them (nova `compute/manager.py` `reserve_block_device_name`,
 * `attach_volume`, `_detach_volume`, `extend_volume`; `virt/block_device.py`):
 *
 * - reserve (a call from nova-api): under the instance's lock, a volume the instance has already,
 *   a tag or a multiattach volume the driver cannot serve is refused; otherwise the next free
 *   `vdX` (the device asked for is ignored, as nova's libvirt driver ignores it) in a new block
 *   device mapping (nova's row, made through the conductor), which is returned.
 * - attach (a cast, nova-api made the attachment): this host's connector on the attachment, the
 *   driver hot-plugs the disk (a stopped guest gets it at its next start), the connection info is
 *   saved, `os-complete`. A failure (os-complete's too) takes the disk out of the guest, deletes the
 *   attachment and the mapping and records the fault (`volume-undo.ts`).
 * - detach (a cast, the volume `detaching`): the driver hot-unplugs the disk, then the attachment
 *   is deleted and the mapping destroyed. A guest that keeps the disk keeps it: the volume is
 *   rolled back to in-use, the fault recorded. An attachment Cinder does not delete once the disk is
 *   out is owed (`attachment-deletes.ts`): deleted in the background once Cinder answers.
 * - volume-extended: a running guest is told the volume's new size (QMP block_resize).
 *
 * None changes the instance's state (nova sets none). The record is saved after each step, so a
 * replayed request finds what was done (the driver's attach and detach are idempotent).
 */
import { randomUUID } from 'node:crypto';
import { deviceNamesInUse, nextDeviceName, type BlockDevice } from '../../model/block-device';
import type { InstanceRecord } from '../../model/instance';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';
import { check, type FlowStep } from './transitions';
import { connectAttachment } from './volume-connect';
import type { VolumeFlowOptions } from './volume-flows';
import { undoAttach } from './volume-undo';
import { InvalidVolumeError, MultiattachNotSupportedError, VolumeAttachFailedError, VolumeDetachFailedError, VolumeTaggedAttachNotSupportedError } from './volume-errors';
import { errorText } from '../../lib/error-text';

export type VolumeAttachContext = Pick<FlowContext, 'locks' | 'require' | 'record' | 'save' | 'driver' | 'controlPlane' | 'log' | 'notify' | 'now'>;

/** What `reserve_block_device_name` is asked. */
export interface ReserveRequest {
  readonly volume_id: string;
  readonly disk_bus: string | null;
  readonly device_type: string | null;
  readonly tag: string | null;
  readonly multiattach: boolean;
}

const GIB = 1024 ** 3;
export class VolumeAttachFlows {
  constructor(
    private readonly c: VolumeAttachContext,
    private readonly o: Pick<VolumeFlowOptions, 'cinder' | 'connector' | 'owed'>,
  ) {}

  /** `reserve_block_device_name`: nova's new BlockDeviceMapping (its primitive in nova mode). @throws InstanceNotFoundError, InvalidVolumeError, VolumeTaggedAttachNotSupportedError, MultiattachNotSupportedError */
  reserve(uuid: string, req: ReserveRequest, ctx: RequestContext): Promise<unknown> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      const devices = rec.block_devices ?? [];
      if (devices.some((b) => b.volume_id === req.volume_id)) throw new InvalidVolumeError(`volume ${req.volume_id} is already attached to instance ${uuid}`);
      const caps = c.driver.capabilities;
      if (req.tag && !caps.supports_tagged_attach_volume) throw new VolumeTaggedAttachNotSupportedError(c.driver.name);
      if (req.multiattach && !caps.supports_multiattach) throw new MultiattachNotSupportedError(req.volume_id);
      // Past the local root disk's name too: an instance booted from its image has no mapping for it.
      const device = nextDeviceName(deviceNamesInUse(devices));
      const fields = {
        uuid: randomUUID(),
        source_type: 'volume',
        destination_type: 'volume',
        volume_id: req.volume_id,
        device_name: device,
        boot_index: null,
        delete_on_termination: false,
        disk_bus: req.disk_bus,
        device_type: req.device_type,
        tag: req.tag,
        guest_format: null,
      };
      const { id, reply } = await c.controlPlane.createBlockDevice(uuid, fields, ctx);
      rec.block_devices = [...devices, { id, source_type: 'volume', destination_type: 'volume', boot_index: null, device_name: device, delete_on_termination: false, volume_id: req.volume_id, volume_size: null, image_id: null, snapshot_id: null, attachment_id: null, volume_type: null }];
      await c.save(rec);
      c.log.info({ instance: uuid, volume: req.volume_id, device, bdm: id }, 'device name reserved for a volume');
      return reply;
    });
  }

  /** `attach_volume` with nova-api's mapping (its attachment made). @throws InvalidStateError, InstanceNotFoundError (nothing done), VolumeAttachFailedError (undone, fault recorded) */
  attach(uuid: string, bdm: BlockDevice, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      check(rec, 'volume_attach.start');
      await c.notify(rec, 'volume_attach.start', ctx);
      const volumeId = bdm.volume_id ?? '';
      // A replay after a crash past the record's save finds the volume attached: only nova's row and
      // os-complete may be missing, and both are redone (each is idempotent).
      let attached = (rec.volumes ?? []).find((v) => v.volume_id === volumeId);
      const known = (rec.block_devices ?? []).find((b) => b.volume_id === volumeId);
      const device = attached?.device_name ?? known?.device_name ?? bdm.device_name ?? nextDeviceName(new Set((rec.volumes ?? []).map((v) => v.device_name)));
      const entry: BlockDevice = { ...(known ?? bdm), id: bdm.id ?? known?.id ?? attached?.bdm_id ?? null, attachment_id: bdm.attachment_id ?? known?.attachment_id ?? attached?.attachment_id ?? null, device_name: device };
      const cinder = this.o.cinder.forRequest(ctx);
      try {
        if (!attached) {
          if (!entry.volume_id) throw new Error('the block device mapping names no volume');
          if (!entry.attachment_id) throw new Error('the block device mapping names no attachment (nova-api makes one before it casts)');
          // An attached volume never boots (nova-api's mappings of attach_volume have no boot index).
          const made = await connectAttachment(cinder, this.o.connector, { ...entry, volume_id: entry.volume_id, attachment_id: entry.attachment_id, device_name: device, boot_index: null });
          await c.driver.attachVolume(rec, { volume_id: made.volume_id, device_name: device, boot_index: null, connection_info: made.connection_info });
          attached = made;
          rec.volumes = [...(rec.volumes ?? []), made];
          rec.block_devices = [...(rec.block_devices ?? []).filter((b) => b.volume_id !== volumeId), entry];
          await c.save(rec);
        }
        if (entry.id !== null) await c.controlPlane.blockDevice(uuid, entry.id, { attachment_id: attached.attachment_id, connection_info: JSON.stringify(attached.connection_info) }, ctx);
        // Not completed, the attachment is half-made (the volume stays `attaching` in Cinder): as nova
        // does, the attach fails and is undone, and the disk leaves the guest too (nova forgets that).
        await cinder.completeAttachment(attached.attachment_id);
      } catch (e) {
        const left = await undoAttach(c, this.o.owed, rec, entry, ctx);
        throw await this.fail(rec, 'volume_attach.error', new VolumeAttachFailedError(volumeId, `${errorText(e)}${left}`, { cause: e }), ctx);
      }
      c.log.info({ instance: uuid, volume: volumeId, attachment: attached.attachment_id, device }, 'volume attached');
      await c.notify(rec, 'volume_attach.end', ctx);
    });
  }

  /** `detach_volume`. @throws InvalidStateError, InstanceNotFoundError (nothing done), VolumeDetachFailedError (fault recorded) */
  detach(uuid: string, volumeId: string, attachmentId: string | null, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      check(rec, 'volume_detach.start');
      await c.notify(rec, 'volume_detach.start', ctx);
      const v = (rec.volumes ?? []).find((x) => x.volume_id === volumeId);
      const entry = (rec.block_devices ?? []).find((b) => b.volume_id === volumeId);
      if (!v && !entry) throw await this.fail(rec, 'volume_detach.error', new VolumeDetachFailedError(volumeId, `not attached to instance ${uuid}`), ctx);
      const cinder = this.o.cinder.forRequest(ctx);
      if (v) {
        try {
          await c.driver.detachVolume(rec, volumeId);
        } catch (e) {
          // The guest keeps the disk: Cinder's volume goes back from detaching to in-use, as nova's roll_detaching.
          await cinder.rollDetaching(volumeId).catch((err: unknown) => c.log.warn({ instance: uuid, volume: volumeId, reason: errorText(err) }, 'Cinder did not roll the detach back'));
          throw await this.fail(rec, 'volume_detach.error', new VolumeDetachFailedError(volumeId, `${errorText(e)}; the volume stays attached`, { cause: e }), ctx);
        }
        rec.volumes = (rec.volumes ?? []).filter((x) => x.volume_id !== volumeId);
        await c.save(rec);
      }
      const attachment = attachmentId ?? v?.attachment_id ?? entry?.attachment_id ?? null;
      // The disk is out of the guest: an attachment delete Cinder does not take now is owed and
      // retried in the background (the volume stays `detaching` until then); the detach goes on.
      if (attachment && !(await this.o.owed.remove(attachment, volumeId, uuid, c.now()))) {
        c.log.warn({ instance: uuid, volume: volumeId, attachment }, 'volume out of the guest; Cinder did not delete its attachment, which the host deletes once Cinder answers');
      }
      // nova's row goes before the record's mapping: a replay after a crash between the two still
      // finds the mapping, and destroying a row twice is harmless.
      const bdmId = entry?.id ?? v?.bdm_id ?? null;
      if (bdmId !== null) await c.controlPlane.destroyBlockDevice(uuid, bdmId, ctx);
      rec.block_devices = (rec.block_devices ?? []).filter((b) => b.volume_id !== volumeId);
      await c.save(rec);
      c.log.info({ instance: uuid, volume: volumeId, attachment }, 'volume detached');
      await c.notify(rec, 'volume_detach.end', ctx);
    });
  }

  /** The `volume-extended` event: a running guest is told the volume's new size. Never throws (logged, as nova logs it). */
  async extended(uuid: string, volumeId: string, ctx: RequestContext): Promise<void> {
    const c = this.c;
    await c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (!rec || !(rec.volumes ?? []).some((v) => v.volume_id === volumeId)) {
        c.log.info({ instance: uuid, volume: volumeId }, 'volume-extended for a volume this host does not have on the instance; ignored');
        return;
      }
      if (!c.driver.capabilities.supports_extend_volume) {
        c.log.warn({ instance: uuid, volume: volumeId, driver: c.driver.name }, 'volume-extended: the driver cannot resize a disk in a running guest; it sees the new size at its next start');
        return;
      }
      try {
        const size = (await this.o.cinder.forRequest(ctx).getVolume(volumeId)).size;
        await c.driver.extendVolume(rec, volumeId, size * GIB);
        c.log.info({ instance: uuid, volume: volumeId, gib: size }, 'volume extended in the guest');
      } catch (e) {
        c.log.warn({ instance: uuid, volume: volumeId, reason: errorText(e) }, 'volume-extended: the guest could not be told the new size');
      }
    });
  }

  private async fail<E extends Error>(rec: InstanceRecord, step: FlowStep, err: E, ctx: RequestContext): Promise<E> {
    const fault = `${step === 'volume_attach.error' ? 'volume attach' : 'volume detach'} failed: ${err.message}`;
    rec.fault = fault;
    await this.c.save(rec);
    this.c.log.warn({ instance: rec.uuid, fault }, `${step.split('.')[0] ?? step} failed`);
    await this.c.notify(rec, step, ctx, fault);
    return err;
  }
}
