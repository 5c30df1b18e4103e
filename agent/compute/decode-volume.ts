/**
 * The volume arguments of the compute methods: `build_and_run_instance`'s `block_device_mapping`
 * (nova's BlockDeviceMappingList of BlockDeviceMapping 1.21), as nova-conductor sends it (object
 * primitives) or as plain JSON (standalone peers, tests). Same conventions as `decode.ts`: a
 * malformed mapping is refused before the request is journaled, naming the field and the form
 * expected; fields the agent does not read are tolerated.
 *
 * nova's rules a build relies on are checked here too, so a build never half-makes a volume it
 * could not have made whole: a volume mapping from an image names the image, one the host creates
 * (image, blank, snapshot) has a size, one from a volume names the volume.
 */
import { z } from 'zod';
import { arg } from '../rpc/endpoint/args';
import { BDM_SOURCE_TYPES, type BlockDevice } from '../../model/block-device';
import { fromSchema } from './decode';

const uuid = z.string().regex(/^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$/, 'a UUID');

const bdmSchema = z
  .object({
    id: z.number().int('an integer').nullish(),
    source_type: z.enum(BDM_SOURCE_TYPES, { message: `one of ${BDM_SOURCE_TYPES.join(', ')}` }),
    destination_type: z.enum(['volume', 'local'], { message: 'volume or local' }).nullish(),
    boot_index: z.number().int('an integer').nullish(),
    device_name: z.string().nullish(),
    delete_on_termination: z.boolean().nullish(),
    volume_id: uuid.nullish(),
    volume_size: z.number().int('an integer').min(1, 'an integer >= 1 (GiB)').nullish(),
    image_id: z.string().nullish(),
    snapshot_id: uuid.nullish(),
    attachment_id: uuid.nullish(),
    volume_type: z.string().nullish(),
  })
  .superRefine((b, ctx) => {
    if ((b.destination_type ?? 'local') !== 'volume') return;
    const need = (field: 'volume_id' | 'image_id' | 'snapshot_id' | 'volume_size', why: string): void => {
      if (b[field] === null || b[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message: `missing (${why})` });
    };
    if (b.source_type === 'volume') need('volume_id', 'a volume mapping from a volume names it');
    if (b.source_type === 'image' && !b.volume_id) need('image_id', 'a volume made from an image names the image');
    if (b.source_type === 'snapshot' && !b.volume_id) need('snapshot_id', 'a volume made from a snapshot names the snapshot');
    if (b.source_type !== 'volume' && !b.volume_id) need('volume_size', 'the GiB of the volume the host creates');
  });

type RawBdm = z.infer<typeof bdmSchema>;

function normalize(b: RawBdm): BlockDevice {
  return {
    id: b.id ?? null,
    source_type: b.source_type,
    destination_type: b.destination_type ?? 'local',
    boot_index: b.boot_index === undefined || b.boot_index === null || b.boot_index < 0 ? null : b.boot_index,
    device_name: b.device_name || null,
    delete_on_termination: b.delete_on_termination ?? false,
    volume_id: b.volume_id ?? null,
    volume_size: b.volume_size ?? null,
    image_id: b.image_id || null,
    snapshot_id: b.snapshot_id ?? null,
    attachment_id: b.attachment_id ?? null,
    volume_type: b.volume_type || null,
  };
}

const optionalString = arg.optional(arg.nullable(arg.string()), null);

export const volumeArgs = {
  /** `attach_volume`'s `bdm`: one BlockDeviceMapping (nova-api's, with its attachment). */
  bdm: fromSchema('a BlockDeviceMapping', bdmSchema, normalize),
  /** `reserve_block_device_name`'s and `detach_volume`'s `volume_id`. */
  volumeId: arg.uuid(),
  /** `swap_volume`'s `new_attachment_id`: nova-api makes it before it casts (the old-style flow without one is gone). */
  newAttachmentId: arg.uuid(),
  /** `remove_volume_connection`'s `delete_attachment` (6.3): absent from older callers, which meant false. */
  deleteAttachment: arg.optional(arg.bool(), false),
  /** `detach_volume`'s `attachment_id`: null or absent from old callers. */
  attachmentId: arg.optional(arg.nullable(arg.uuid()), null),
  /** `device`, `disk_bus`, `device_type`, `tag`: a string, null or absent. */
  optionalString,
  /** `multiattach`: whether the volume is a multiattach one. */
  multiattach: arg.optional(arg.bool(), false),
  /** `block_device_mapping`: a BlockDeviceMappingList (or a plain list); null or absent: none. */
  blockDeviceMapping: arg.optional(
    arg.nullable(fromSchema('a BlockDeviceMappingList', z.array(bdmSchema), (list) => list.map(normalize))),
    null,
  ),
};
