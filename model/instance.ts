/**
 * The compute manager's records: what the agent knows about each instance on this host and each
 * move in progress, in nova's vocabulary (vm_state, task_state, migration status). These are the
 * values the journal stores, so they are plain JSON.
 */
import type { ImageMeta } from './image-meta';
import type { BlockDevice, VolumeAttachment } from './block-device';
import type { NetworkInfo, Vif } from './network';
import type { Resources } from './provider-types';

/** nova's power states (`nova/compute/power_state.py`); the value is what nova stores. */
export const POWER_STATE = {
  NOSTATE: 0,
  RUNNING: 1,
  PAUSED: 3,
  SHUTDOWN: 4,
  CRASHED: 6,
  SUSPENDED: 7,
} as const;
export type PowerState = keyof typeof POWER_STATE;

/** The sizes an instance was scheduled with (nova's Flavor, the fields a driver uses; the name is optional there). */
export interface DriverFlavor {
  readonly name?: string;
  readonly vcpus: number;
  readonly memory_mb: number;
  readonly root_gb: number;
  readonly ephemeral_gb: number;
  /** Swap in MiB (nova's unit for swap). */
  readonly swap: number;
  readonly extra_specs: Readonly<Record<string, string>>;
}

/** nova's Flavor as the compute manager has it: always named. */
export type Flavor = DriverFlavor & { readonly name: string };

export const VM_STATES = ['building', 'active', 'stopped', 'paused', 'suspended', 'shelved', 'shelved_offloaded', 'rescued', 'resized', 'soft-delete', 'error', 'deleted'] as const;
export type VmState = (typeof VM_STATES)[number];

export const TASK_STATES = [
  'scheduling',
  'networking',
  'block_device_mapping',
  'spawning',
  'deleting',
  'resize_prep',
  'resize_migrating',
  'resize_migrated',
  'resize_finish',
  'resize_reverting',
  'resize_confirming',
  'migrating',
  'powering-off',
  'powering-on',
  'reboot_started',
  'reboot_started_hard',
  'rebuild_spawning',
  'pausing',
  'unpausing',
  'suspending',
  'resuming',
  'image_snapshot',
  'image_backup',
  'image_pending_upload',
  'image_uploading',
  'shelving',
  'shelving_image_pending_upload',
  'shelving_image_uploading',
  'shelving_offloading',
  'rescuing',
  'unrescuing',
  'soft-deleting',
  'restoring',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

export type MigrationType = 'migration' | 'resize' | 'live-migration';
export type MigrationStatus =
  | 'pre-migrating'
  | 'migrating'
  | 'post-migrating'
  | 'finished'
  | 'confirming'
  | 'confirmed'
  | 'reverting'
  | 'reverted'
  | 'accepted'
  | 'preparing'
  | 'running'
  | 'completed'
  | 'failed'
  | 'error';

/** A move of one instance, as this host sees it. */
export interface MigrationRecord {
  readonly uuid: string;
  readonly type: MigrationType;
  status: MigrationStatus;
  readonly source_compute: string;
  readonly dest_compute: string;
  /** This host's part. */
  readonly role: 'source' | 'dest';
  /** The allocations the instance held on the source (now held by the migration uuid). */
  source_allocations?: Readonly<Record<string, Resources>>;
  /** What the destination claimed for the instance. */
  dest_allocations?: Readonly<Record<string, Resources>>;
  old_vm_state?: VmState;
  old_flavor?: Flavor;
  new_flavor?: Flavor;
  /** Opaque handoffs between the two drivers (disk info, live-migration data). */
  disk_info?: string;
  migrate_data?: Readonly<Record<string, string | number | boolean | null>>;
  /**
   * Volume id -> the attachment this host's step of the move replaced (nova's
   * `old_vol_attachment_ids`), recorded with the new one before anything else happens to either:
   * a cold move's connector-less replacement (the old one deleted next), or a live migration
   * destination's attachment with its own connector (the old one the source's until the end).
   */
  old_attachment_ids?: Record<string, string | null>;
}

export interface InstanceRecord {
  readonly uuid: string;
  name: string;
  host: string;
  vm_state: VmState;
  task_state: TaskState | null;
  /** nova power_state: 0 nostate, 1 running, 4 shutdown, 6 crashed. */
  power_state: number;
  flavor: Flavor;
  readonly project_id: string;
  readonly user_id: string;
  image_ref?: string;
  /** The image properties the agent acts on (the guest agent, the admin user, quiesce), as nova sent them. */
  image_meta?: ImageMeta;
  /** This instance's allocations on this host (provider -> resources), as written to Placement. */
  allocations: Readonly<Record<string, Resources>>;
  migration?: MigrationRecord;
  /** The instance's VIFs: its ports bound to this host, as last read from Neutron. */
  network_info?: NetworkInfo;
  /** Ports the user gave the instance: released on delete, never deleted (kept before they are bound). */
  preserved_ports?: readonly string[];
  /** The build's volume mappings, as they fill in (volume made, attachment made): what delete gives back. */
  block_devices?: BlockDevice[];
  /** The volumes connected to the instance on this host, in the order the guest gets them. */
  volumes?: VolumeAttachment[];
  /** An `attach_interface` under way (absent otherwise): what a restart must undo if it was interrupted. */
  interface_attach?: InterfaceAttachMarker;
  launched_at?: string;
  /** When this host powered the guest off for a soft delete (SOFT_DELETED): the reclaim counts from it. */
  soft_deleted_at?: string;
  /** Shelved (nova's `shelved_*` system metadata): the snapshot to unshelve from, and when. */
  shelved?: { readonly image_id: string; readonly at: string };
  fault?: string;
  updated_at: string;
}

/**
 * An interface attach in progress, recorded before Neutron is asked: the request it belongs to
 * (its `request_id`, the same when the journal replays it), the user's port it takes over (never
 * deleted on undo), and, once Neutron bound it, the VIF the driver is given.
 */
export interface InterfaceAttachMarker {
  readonly request_id: string;
  readonly port_id: string | null;
  readonly vif?: Vif;
}

/** The operation is not allowed in the instance's current state. */
export class InvalidStateError extends Error {
  constructor(
    readonly instance: string,
    readonly operation: string,
    readonly state: string,
  ) {
    super(`cannot ${operation} instance ${instance} while it is ${state}`);
    this.name = 'InvalidStateError';
  }
}

/** No instance with that uuid on this host. */
export class InstanceNotFoundError extends Error {
  constructor(readonly instance: string) {
    super(`instance ${instance} could not be found on this host`);
    this.name = 'InstanceNotFoundError';
  }
}

export function describeState(i: Pick<InstanceRecord, 'vm_state' | 'task_state'>): string {
  return i.task_state ? `${i.vm_state}/${i.task_state}` : i.vm_state;
}
