/**
 * The small, stable data types of the virt-driver contract: instances, flavors, hosts, migrations,
 * power states, and what a driver is constructed with.
 *
 * Field names of data that arrives from nova over RPC keep nova's spelling (`memory_mb`,
 * `extra_specs`, `image_ref`) so the compute manager can pass them through unrenamed; structural
 * fields of our own are camelCase. Every type here is plain data (JSON-able), so requests can be
 * journaled and replayed.
 *
 * It is: the vocabulary the compute manager and every driver share. It is not: nova's object
 * model; only what a driver needs to act is here, and it grows only by optional fields.
 */
import type { Logger } from '../lib/logging/logger';
import type { Clock } from '../lib/clock';
import type { AgentConfig } from '../config/schema';
import type { NetworkInfo } from '../model/network';
import type { VolumeConnectionInfo } from '../model/block-device';
export type { VolumeConnectionInfo } from '../model/block-device';
import type { ConsumerAllocations } from '../model/provider-types';
import type { Exec } from './host/exec';
import type { HostFs } from './host/host-fs';
import type { GlanceAuth } from './glance/api';

import type { DriverFlavor as Flavor, PowerState } from '../model/instance';
import type { ImageMeta } from '../model/image-meta';
export { POWER_STATE, type PowerState, type DriverFlavor as Flavor } from '../model/instance';

/** An instance as a lifecycle request names it. */
export interface InstanceRef {
  readonly uuid: string;
  /** The hypervisor-visible name (nova's `instance-%08x` or the display name). */
  readonly name: string;
}

/** Everything needed to build an instance. */
export interface InstanceSpec extends InstanceRef {
  readonly flavor: Flavor;
  /** Glance image id; absent for boot-from-volume. */
  readonly image_ref?: string;
  /**
   * An unshelve: the instance's own image, which the disk made from `image_ref` (the shelved
   * snapshot, deleted once the server runs) is rebased onto, as nova's libvirt driver does, so that
   * a later move finds the disk's backing image in Glance. A driver without backing files ignores it.
   */
  readonly rebase_image_ref?: string;
  /** The image properties that shape the guest (`hw_qemu_guest_agent`, `os_admin_user`); absent: none set. */
  readonly image_meta?: ImageMeta;
  /** The instance's allocations in Placement: provider uuid -> resources. */
  readonly allocations: ConsumerAllocations;
  /** The instance's VIFs (nova's network_info), in NIC order; absent or empty: no NIC. */
  readonly network_info?: NetworkInfo;
  /** The Cinder volumes attached to the guest, connected already (nova's block_device_info); absent or empty: none. */
  readonly volumes?: readonly AttachedVolume[];
}

/** A volume the guest has as a disk (one entry of nova's `block_device_info.block_device_mapping`). */
export interface AttachedVolume {
  /** The Cinder volume id: the guest disk's serial (`/dev/disk/by-id/virtio-<first 20 chars>`). */
  readonly volume_id: string;
  /** The device name nova recorded (`/dev/vdb`); a virtio guest names its disks itself. */
  readonly device_name: string;
  /** Boot order among the guest's bootable devices (0 boots first); null: not a boot device. */
  readonly boot_index: number | null;
  readonly connection_info: VolumeConnectionInfo;
}

/** A compute host taking part in a move. */
export interface HostRef {
  /** `[DEFAULT] host` of that agent (its RPC queue is compute.<host>). */
  readonly host: string;
  /** Its node name (root provider name). */
  readonly nodename: string;
  /** Address the hypervisors use to reach it (live migration), when not the host name. */
  readonly address?: string;
}

/** A cold or live migration (nova's Migration, the fields a driver uses). */
export interface MigrationRef {
  /** The migration's uuid; it is also the Placement consumer holding the source allocations. */
  readonly uuid: string;
  readonly source: HostRef;
  readonly dest: HostRef;
}

/** What a driver reports about one of its instances. */
export interface InstanceInfo {
  readonly uuid: string;
  readonly name: string;
  readonly powerState: PowerState;
}

/** Opaque, JSON-able data the live-migration steps hand to each other (nova's migrate_data). */
export type LiveMigrateData = Readonly<Record<string, string | number | boolean | null>>;

/** Result of `migrateDiskAndPowerOff`: what the destination's `finishMigration` needs. */
export interface MigrateDiskResult {
  /** Disk description, opaque to the manager (nova's disk_info JSON). */
  readonly diskInfo: string;
}

/** What a driver is built with. Everything is injected; drivers read no globals. */
export interface DriverContext {
  readonly config: AgentConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Runs host tools (nvidia-smi, ...) with a deadline. */
  readonly exec: Exec;
  /** The host's /sys and /proc (a fixture tree in tests). */
  readonly fs: HostFs;
  /** Glance's endpoint and token from the agent's keystone auth; absent: `[glance] endpoint_override` without a token, if set. */
  readonly glanceAuth?: GlanceAuth;
}
