/**
 * Block device mappings and the volumes an instance has, as the compute manager keeps them.
 *
 * A `BlockDevice` is one of nova's BlockDeviceMapping rows as a build receives it (the fields the
 * agent acts on): where the device comes from (`source_type`), where it lives
 * (`destination_type`: `volume` is a Cinder volume, `local` a disk of the host), its boot order,
 * and what Cinder knows of it (volume, attachment). A `VolumeAttachment` is what the agent
 * records in the instance's journal once a volume is connected: enough to give the driver the
 * disk again after a restart and to take everything back on delete.
 *
 * It is: plain data (JSON, journaled). It is not: the Cinder calls (`agent/volume/`) or the flow
 * (`agent/compute/volume-flows.ts`). No secret is ever part of it: RBD connection info names a
 * secret uuid, never the key.
 */
/**
 * Cinder's connection info as nova stores it in a block device mapping (`_translate_attachment_ref`):
 * the back end's type and its data. For `rbd`, `data` holds `name` (`pool/volume-<id>`), `hosts`
 * and `ports` (the monitors, as strings), `auth_enabled`, `auth_username`, `secret_type`,
 * `secret_uuid`, `discard`, `access_mode`, `volume_id`; the cephx key itself is never in it.
 */
export interface VolumeConnectionInfo {
  readonly driver_volume_type: string;
  readonly data: Readonly<Record<string, unknown>>;
}

export const BDM_SOURCE_TYPES = ['image', 'volume', 'blank', 'snapshot'] as const;
export type BdmSourceType = (typeof BDM_SOURCE_TYPES)[number];

/** One block device mapping of a build (nova BlockDeviceMapping 1.21, the fields read). */
export interface BlockDevice {
  /** nova's row id: what `BlockDeviceMapping.save` is keyed on; null when the sender had none (standalone). */
  readonly id: number | null;
  readonly source_type: BdmSourceType;
  readonly destination_type: 'volume' | 'local';
  /** 0 boots first; null: not a boot device. */
  readonly boot_index: number | null;
  /** `/dev/vda`, ...; null: nova names it. */
  readonly device_name: string | null;
  readonly delete_on_termination: boolean;
  readonly volume_id: string | null;
  /** GiB of a volume the host creates (image, blank, snapshot sources). */
  readonly volume_size: number | null;
  readonly image_id: string | null;
  readonly snapshot_id: string | null;
  /** The attachment nova-api reserved (source volume); null: the host makes one. */
  readonly attachment_id: string | null;
  readonly volume_type: string | null;
}

/** A volume connected to the instance on this host, as recorded before the guest gets it. */
export interface VolumeAttachment {
  readonly volume_id: string;
  readonly attachment_id: string;
  /** The device name recorded in nova (`/dev/vdb`). */
  readonly device_name: string;
  readonly boot_index: number | null;
  readonly delete_on_termination: boolean;
  /** nova's BDM row id, when the control plane has one. */
  readonly bdm_id: number | null;
  readonly connection_info: VolumeConnectionInfo;
}

/** The volume mappings of a build, boot devices first (by boot index), then the others in order. */
export function volumeMappings(bdms: readonly BlockDevice[]): BlockDevice[] {
  const key = (b: BlockDevice): number => (b.boot_index === null || b.boot_index < 0 ? Number.MAX_SAFE_INTEGER : b.boot_index);
  return bdms.filter((b) => b.destination_type === 'volume').sort((a, b) => key(a) - key(b));
}

/** Whether the build boots from a volume (a volume mapping with boot index 0). */
export function bootsFromVolume(bdms: readonly BlockDevice[]): boolean {
  return bdms.some((b) => b.destination_type === 'volume' && b.boot_index === 0);
}

/** The device name of a root disk made from the instance's image (a server not booted from a volume). */
export const LOCAL_ROOT_DEVICE = '/dev/vda';

/** The device names the instance's disks hold: its mappings', and the local root disk's unless it boots from a volume. */
export function deviceNamesInUse(bdms: readonly BlockDevice[]): Set<string> {
  const names = new Set(bdms.map((b) => b.device_name).filter((n): n is string => !!n));
  if (!bootsFromVolume(bdms)) names.add(LOCAL_ROOT_DEVICE);
  return names;
}

/** The next free virtio name (`/dev/vda`, `/dev/vdb`, ...) not in `taken`. */
export function nextDeviceName(taken: ReadonlySet<string>): string {
  for (let k = 0; k < 26; k++) {
    const name = `/dev/vd${String.fromCharCode(0x61 + k)}`;
    if (!taken.has(name)) return name;
  }
  throw new Error('no free device name: an instance has at most 26 virtio disks');
}
