/**
 * The instance state machine as one table (its vocabulary in `transition-types.ts`). Each row is
 * a step a compute flow takes an instance through, named like nova's notification events: the operation it belongs to, the states it may
 * start from, the state it moves to, the step reported when its work fails, and what each control
 * plane makes of it: the standalone versioned notification and its priority, and nova-compute's
 * writes through nova-conductor (nova `compute/manager.py`; docs/nova-control-plane.md lists them
 * per step).
 *
 * A new compute method adds rows here; the steps that change a guest's power where it is (stop,
 * start, reboot, pause, suspend, the crash dump, the power sync, soft delete, the admin password)
 * have theirs in `transitions-power.ts`, spread into this one table. Flows call `transition` (refuses a step the instance's
 * state does not allow, with InvalidStateError, and sets the new state), `check` (the refusal
 * alone, for a step whose state is set later or whose record is dropped), `arrival` (the first
 * state of an instance new to this host) and `failureOf`; control planes read the row of the step
 * they are told of (`rowOf`, `stateAfter`).
 *
 * Not here: a step's side effects (the flows), how a control plane sends what its columns say
 * (`control-plane.ts`, `agent/nova/control-plane.ts`), and the migration statuses the flows keep
 * to resume a move (their own markers, not the instance's state).
 */
import { describeState, InvalidStateError, POWER_STATE, type InstanceRecord, type VmState } from '../../model/instance';
import { OPERATIONS, transitionTable as table, type StatePattern, type Transition } from './transition-types';
import { POWER_TRANSITIONS } from './transitions-power';

export * from './transition-types';

/** Keeps each row's `onFailure` to a step of the same table. */

const BUILD = 'compute__do_build_and_run_instance';
const DELETE = 'compute_terminate_instance';
const MOVED = ['active', 'stopped'] as const;
/** nova's API live-migrates ACTIVE and PAUSED servers. */
const LIVE = ['active', 'paused'] as const;
/** The Instance fields nova copies from a flavor (`_set_instance_info`), from the new or the old flavor. */
const NEW_SIZES = { instance_type_id: 'new_flavor_field', memory_mb: 'new_flavor_field', vcpus: 'new_flavor_field', root_gb: 'new_flavor_field', ephemeral_gb: 'new_flavor_field' } as const;
const OLD_SIZES = { instance_type_id: 'old_flavor_field', memory_mb: 'old_flavor_field', vcpus: 'old_flavor_field', root_gb: 'old_flavor_field', ephemeral_gb: 'old_flavor_field' } as const;
const REBUILD = 'compute_rebuild_instance';
const ATTACH = 'compute_attach_interface';
const DETACH = 'compute_detach_interface';
const ATTACH_VOLUME = 'compute_attach_volume';
const DETACH_VOLUME = 'compute_detach_volume';
/** nova's API attaches and detaches interfaces of ACTIVE, PAUSED and STOPPED servers with no task. */
const INTERFACES = { vm: ['active', 'paused', 'stopped'], task: [null], move: 'none' } as const satisfies StatePattern;
const SNAPSHOT = 'compute_snapshot_instance';
const BACKUP = 'compute_backup_instance';
/** nova's API snapshots and backs up ACTIVE, STOPPED, PAUSED and SUSPENDED servers. */
const SNAPSHOTTABLE = ['active', 'stopped', 'paused', 'suspended'] as const;
const SHELVE = 'compute_shelve_instance';
const OFFLOAD = 'compute_shelve_offload_instance';
const UNSHELVE = 'compute_unshelve_instance';
/** nova's API shelves ACTIVE, STOPPED, PAUSED and SUSPENDED servers (offloads them, when booted from a volume). */
const SHELVABLE = ['active', 'stopped', 'paused', 'suspended'] as const;
const SHELVING = ['shelving', 'shelving_image_pending_upload', 'shelving_image_uploading'] as const;
/** nova's `_nil_out_instance_obj_host_and_node`: an instance no host holds. */
const NO_HOST = { host: null, node: null, compute_id: null, launched_on: null } as const;
const RESCUE = 'compute_rescue_instance';
const UNRESCUE = 'compute_unrescue_instance';
/** A snapshot's or backup's task states on this host (a replay finds any of them). */
const IMAGING = ['image_snapshot', 'image_backup', 'image_pending_upload', 'image_uploading'] as const;

export const TRANSITIONS = table({
  // ---- build: nova's instance claim, then spawn ----
  'create.start': { method: 'build_and_run_instance', from: 'new', to: { vm: 'building', task: 'scheduling' }, onFailure: 'create.error', notify: 'INFO', nova: { event: { name: BUILD, phase: 'start' } } },
  'create.claimed': {
    method: 'build_and_run_instance', from: { vm: ['building'], task: ['scheduling'] }, to: { task: 'networking' }, onFailure: 'create.error', notify: 'none',
    // nova's claim sets host and node and clears the task state; the build then moves on to its network.
    nova: { instance: [{ set: { host: 'this_host', node: 'this_host', compute_id: 'this_node_id', launched_on: 'this_host', vm_state: 'state', task_state: null }, expected: ['scheduling', null] }, { set: { task_state: 'state' }, expected: [null] }] },
  },
  // The ports are bound to this host (none for a server without networks): on to the volumes.
  'create.networked': {
    method: 'build_and_run_instance', from: { vm: ['building'], task: ['networking'] }, to: { task: 'block_device_mapping' }, onFailure: 'create.error', notify: 'none',
    nova: { instance: [{ set: { task_state: 'state' }, expected: ['networking'] }] },
  },
  // The volumes are connected to this host (none for a server without volumes): on to spawning.
  'create.volumes': {
    method: 'build_and_run_instance', from: { vm: ['building'], task: ['block_device_mapping'] }, to: { task: 'spawning' }, onFailure: 'create.error', notify: 'none',
    nova: { instance: [{ set: { task_state: 'state' }, expected: ['block_device_mapping'] }] },
  },
  'create.end': {
    method: 'build_and_run_instance', from: { vm: ['building'], task: ['spawning'] }, to: { vm: 'active', task: null, power: 'running' }, onFailure: 'create.error', notify: 'INFO',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state', power_state: 'state', launched_at: 'now' }, expected: 'spawning' }], fanout: 'update_instance_info', event: { name: BUILD, phase: 'finish' }, usage: true },
  },
  'create.error': {
    method: 'build_and_run_instance', from: { vm: ['building'], task: 'any' }, to: { vm: 'error', task: null }, notify: 'ERROR',
    // The fault is what `server show` gives as the reason (nova-compute adds one for a failed build).
    // nova-compute hands a failed build back (`_nil_out_instance_obj_host_and_node`): with no host,
    // nova-api deletes the server itself, at once, and this host drops its record.
    nova: {
      instance: [{ set: { host: null, node: null, compute_id: null, launched_on: null, vm_state: 'state', task_state: 'state' } }],
      fault: true,
      hook: 'forget_instance',
      event: { name: BUILD, phase: 'finish', failure: 'build failed' },
      usage: true,
    },
  },
  // ---- delete ----
  'delete.start': { method: 'terminate_instance', from: { vm: 'any', task: 'any' }, to: { task: 'deleting' }, notify: 'INFO', nova: { event: { name: DELETE, phase: 'start' } } },
  'delete.end': {
    method: 'terminate_instance', from: { vm: 'any', task: ['deleting'] }, to: { vm: 'deleted', task: null }, notify: 'INFO',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state', power_state: POWER_STATE.NOSTATE, terminated_at: 'now' } }], hook: 'destroy', fanout: 'delete_instance_info', event: { name: DELETE, phase: 'finish' }, usage: true, consoleTokens: 'clean' },
  },
  // A delete whose ports Neutron could not take back: the instance stays, in ERROR, to be deleted again.
  'delete.error': {
    method: 'terminate_instance', from: { vm: 'any', task: ['deleting'] }, to: { vm: 'error', task: null }, notify: 'ERROR',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state' } }], event: { name: DELETE, phase: 'finish', failure: 'delete failed' } },
  },
  // ---- cold migration and resize: prep_resize on the destination ----
  'resize_prep.start': { method: 'prep_resize', from: 'new', to: { vm: 'old', task: 'resize_prep' }, onFailure: 'resize_prep.error', notify: 'INFO' },
  'resize_prep.end': {
    method: 'prep_resize', from: { vm: MOVED, task: ['resize_prep'], move: 'dest' }, to: {}, onFailure: 'resize_prep.error', notify: 'INFO',
    nova: {
      migration: { set: { dest_compute: 'this_host', dest_node: 'this_host', dest_compute_id: 'this_node_id', dest_host: 'this_ip' }, status: 'pre-migrating' },
      instance: [{ set: { migration_context: 'migration_context' } }],
      hook: 'stash_new_flavor',
      usage: true,
    },
  },
  /** The destination's claim failed: it drops its record. */
  'resize_prep.error': { method: 'prep_resize', from: { vm: MOVED, task: ['resize_prep'], move: 'dest' }, to: { task: null }, notify: 'ERROR', nova: { migration: { status: 'error' }, instance: [{ set: { task_state: 'state' } }] } },
  // ---- resize_instance on the source ----
  'resize.start': {
    method: 'resize_instance', from: { vm: MOVED, task: [null], move: 'none' }, to: { task: 'resize_migrating' }, onFailure: 'resize.error', notify: 'INFO',
    nova: { migration: { status: 'migrating' }, instance: [{ set: { task_state: 'state', old_flavor: 'flavor' }, expected: 'resize_prep' }] },
  },
  'resize.end': {
    method: 'resize_instance', from: { vm: MOVED, task: ['resize_migrating'], move: 'source' }, to: { task: 'resize_migrated', power: 'shutdown' }, onFailure: 'resize.error', notify: 'INFO',
    // The source hands the instance to the destination here, as nova-compute does.
    nova: { migration: { status: 'post-migrating' }, instance: [{ set: { host: 'move_dest', node: 'move_dest', compute_id: 'move_dest_node_id', task_state: 'state' }, expected: 'resize_migrating' }] },
  },
  'resize.error': { method: 'resize_instance', from: { vm: MOVED, task: ['resize_migrating'], move: 'source' }, to: { vm: 'old', task: null }, notify: 'ERROR', nova: { migration: { status: 'error' }, instance: [{ set: { vm_state: 'state', task_state: 'state' } }] } },
  // ---- finish_resize on the destination ----
  'resize_finish.start': {
    method: 'finish_resize', from: { vm: [...MOVED, 'error'], task: ['resize_prep', 'resize_finish', null], move: 'dest' }, to: { task: 'resize_finish' }, onFailure: 'resize_finish.error', notify: 'INFO',
    // nova's _finish_resize: the old flavor kept, the new one copied onto the Instance (`_set_instance_info`).
    nova: { instance: [{ set: { task_state: 'state', old_flavor: 'old_flavor', ...NEW_SIZES, flavor: 'new_flavor' }, expected: 'resize_migrated' }] },
  },
  'resize_finish.end': {
    method: 'finish_resize', from: { vm: [...MOVED, 'error'], task: ['resize_finish'], move: 'dest' }, to: { vm: 'resized', task: null, power: 'old' }, onFailure: 'resize_finish.error', notify: 'INFO',
    nova: { migration: { status: 'finished' }, instance: [{ set: { vm_state: 'state', task_state: 'state', power_state: 'state', launched_at: 'now' }, expected: 'resize_finish' }] },
  },
  'resize_finish.error': { method: 'finish_resize', from: { vm: 'any', task: ['resize_finish'], move: 'dest' }, to: { vm: 'error', task: null }, notify: 'ERROR', nova: { migration: { status: 'error' }, instance: [{ set: { vm_state: 'state', task_state: 'state' } }], fault: true } },
  // ---- confirm: the source drops its copy, then tells the destination ----
  'resize_confirm.end': {
    method: 'confirm_resize', from: { vm: MOVED, task: ['resize_migrated'], move: 'source' }, to: { vm: 'old', task: null }, notify: 'INFO',
    nova: { migration: { status: 'confirmed' }, instance: [{ set: { vm_state: 'state', task_state: 'state', old_flavor: null, new_flavor: null, migration_context: null }, expected: [null, 'deleting', 'soft-deleting'] }], usage: true },
  },
  'resize_confirm.dest': { method: 'confirm_resize_at_destination', from: { vm: ['resized', 'error'], task: [null], move: 'dest' }, to: { vm: 'old', task: null }, notify: 'none' },
  // ---- revert: the destination drops its copy, then the source takes the instance back ----
  'resize_revert.start': { method: 'revert_resize', from: { vm: ['resized', 'error'], task: [null, 'resize_reverting'], move: 'dest' }, to: { task: 'resize_reverting' }, notify: 'INFO' },
  'resize_revert.dest': { method: 'revert_resize', from: { vm: ['resized', 'error'], task: ['resize_reverting'], move: 'dest' }, to: {}, notify: 'none', nova: { migration: { status: 'reverted' }, usage: true } },
  'resize_revert.end': {
    method: 'finish_revert_resize', from: { vm: MOVED, task: ['resize_migrated'], move: 'source' }, to: { vm: 'old', task: null, power: 'old' }, notify: 'INFO',
    nova: {
      instance: [{ set: { host: 'this_host', node: 'this_host', compute_id: 'this_node_id', vm_state: 'state', task_state: 'state', power_state: 'state', launched_at: 'now', ...OLD_SIZES, flavor: 'old_flavor', old_flavor: null, new_flavor: null, migration_context: null }, expected: 'resize_reverting' }],
      usage: true,
    },
  },
  // ---- live migration ----
  // nova's destination claims the move as for a resize (`_claim_existing_migration`), the status left as the conductor set it.
  'live_migration_check.dest': {
    method: 'check_can_live_migrate_destination', from: 'new', to: { task: 'migrating' }, notify: 'none',
    nova: { migration: { set: { dest_compute: 'this_host', dest_node: 'this_host', dest_compute_id: 'this_node_id', dest_host: 'this_ip' } } },
  },
  'live_migration_check.source': { method: 'check_can_live_migrate_source', from: { vm: LIVE, task: [null], move: 'none' }, to: {}, notify: 'none' },
  'live_migration_pre.start': { method: 'live_migration', from: { vm: LIVE, task: [null], move: 'none' }, to: { task: 'migrating' }, onFailure: 'live_migration_abort.end', notify: 'INFO', nova: { migration: { status: 'running' } } },
  'live_migration_pre.dest': { method: 'pre_live_migration', from: { vm: LIVE, task: ['migrating'], move: 'dest' }, to: {}, notify: 'none' },
  'live_migration_post_dest.end': {
    method: 'post_live_migration_at_destination', from: { vm: LIVE, task: ['migrating'], move: 'dest' }, to: { task: null, power: 'vm' }, notify: 'none',
    nova: { instance: [{ set: { host: 'this_host', node: 'this_host', compute_id: 'this_node_id', power_state: 'state', task_state: 'state', progress: 0 }, expected: 'migrating' }], fanout: 'update_instance_info', usage: true },
  },
  /** The source drops its record once the destination runs the instance. */
  'live_migration_post.end': {
    method: 'live_migration', from: { vm: LIVE, task: ['migrating'], move: 'source' }, to: { task: null }, notify: 'INFO',
    nova: { migration: { status: 'completed' }, hook: 'forget_instance', fanout: 'delete_instance_info', usage: true, consoleTokens: 'clean' },
  },
  'live_migration_abort.end': {
    method: 'live_migration', from: { vm: LIVE, task: ['migrating'], move: 'source' }, to: { task: null }, notify: 'INFO',
    nova: { migration: { status: 'error', orLatest: true }, instance: [{ set: { task_state: 'state', progress: 0 }, expected: ['migrating'] }], usage: true },
  },
  // ---- the power steps, soft delete, the admin password (`transitions-power.ts`) ----
  ...POWER_TRANSITIONS,
  // ---- snapshot and backup to Glance (`snapshot.ts`; nova's API set image_snapshot_pending or image_backup and created the image) ----
  'snapshot.start': {
    method: 'snapshot_instance', from: { vm: SNAPSHOTTABLE, task: [null, ...IMAGING], move: 'none' }, to: { task: 'image_snapshot' }, onFailure: 'snapshot.revert', notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' }, expected: ['image_snapshot_pending', ...IMAGING] }, { set: { power_state: 'state' } }], event: { name: SNAPSHOT, phase: 'start' } },
  },
  'backup.start': {
    method: 'backup_instance', from: { vm: SNAPSHOTTABLE, task: [null, ...IMAGING], move: 'none' }, to: { task: 'image_backup' }, onFailure: 'backup.revert', notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state' } }], event: { name: BACKUP, phase: 'start' } },
  },
  /** The disk is being copied (nova's driver sets it before the copy). */
  'snapshot.pending': {
    method: 'snapshot_instance', from: { vm: SNAPSHOTTABLE, task: IMAGING, move: 'none' }, to: { task: 'image_pending_upload' }, notify: 'none',
    nova: { instance: [{ set: { task_state: 'state' }, expected: IMAGING }] },
  },
  'snapshot.uploading': {
    method: 'snapshot_instance', from: { vm: SNAPSHOTTABLE, task: ['image_pending_upload', 'image_uploading'], move: 'none' }, to: { task: 'image_uploading' }, notify: 'none',
    nova: { instance: [{ set: { task_state: 'state' }, expected: ['image_pending_upload', 'image_uploading'] }] },
  },
  'snapshot.end': {
    method: 'snapshot_instance', from: { vm: SNAPSHOTTABLE, task: ['image_uploading'], move: 'none' }, to: { task: null }, notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' }, expected: 'image_uploading' }], event: { name: SNAPSHOT, phase: 'finish' } },
  },
  'backup.end': {
    method: 'backup_instance', from: { vm: SNAPSHOTTABLE, task: ['image_uploading'], move: 'none' }, to: { task: null }, notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' }, expected: 'image_uploading' }], event: { name: BACKUP, phase: 'finish' } },
  },
  /** The copy or the upload failed: the task cleared, the fault recorded, the image deleted (nova's `delete_image_on_error`). */
  'snapshot.revert': { method: 'snapshot_instance', from: { vm: 'any', task: IMAGING, move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: SNAPSHOT, phase: 'finish', failure: 'snapshot failed' } } },
  'backup.revert': { method: 'backup_instance', from: { vm: 'any', task: IMAGING, move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: BACKUP, phase: 'finish', failure: 'backup failed' } } },
  // ---- shelve, offload, unshelve (`shelve.ts`; nova's API set shelving or shelving_offloading and made the image) ----
  'shelve.start': { method: 'shelve_instance', from: { vm: SHELVABLE, task: [null, ...SHELVING], move: 'none' }, to: { task: 'shelving' }, onFailure: 'shelve.revert', notify: 'INFO', nova: { event: { name: SHELVE, phase: 'start' } } },
  /** Powered off, the disk being copied. */
  'shelve.pending': {
    method: 'shelve_instance', from: { vm: SHELVABLE, task: SHELVING, move: 'none' }, to: { task: 'shelving_image_pending_upload' }, notify: 'none',
    nova: { instance: [{ set: { task_state: 'state' }, expected: SHELVING }] },
  },
  'shelve.uploading': {
    method: 'shelve_instance', from: { vm: SHELVABLE, task: ['shelving_image_pending_upload', 'shelving_image_uploading'], move: 'none' }, to: { task: 'shelving_image_uploading' }, notify: 'none',
    nova: { instance: [{ set: { task_state: 'state' }, expected: ['shelving_image_pending_upload', 'shelving_image_uploading'] }] },
  },
  /** The snapshot is in Glance: SHELVED, on to the offload at once (nova's default `shelved_offload_time = 0`). */
  'shelve.end': {
    method: 'shelve_instance', from: { vm: SHELVABLE, task: ['shelving_image_uploading'], move: 'none' }, to: { vm: 'shelved', task: 'shelving_offloading', power: 'shutdown' }, notify: 'INFO',
    nova: { instance: [{ set: { system_metadata: 'shelved_sysmeta', vm_state: 'state', task_state: 'state', power_state: 'state' }, expected: ['shelving', 'shelving_image_uploading'] }] },
  },
  /** The snapshot is in Glance and `shelved_offload_time` is not 0: SHELVED, kept on this host powered off. */
  'shelve.kept': {
    method: 'shelve_instance', from: { vm: SHELVABLE, task: ['shelving_image_uploading'], move: 'none' }, to: { vm: 'shelved', task: null, power: 'shutdown' }, notify: 'INFO',
    nova: { instance: [{ set: { system_metadata: 'shelved_sysmeta', vm_state: 'state', task_state: 'state', power_state: 'state' }, expected: ['shelving', 'shelving_image_uploading'] }], event: { name: SHELVE, phase: 'finish' } },
  },
  /** Offloaded as the end of a shelve: the action event is the shelve's. */
  'shelve.offloaded': {
    method: 'shelve_instance', from: { vm: ['shelved'], task: ['shelving_offloading'], move: 'none' }, to: { vm: 'shelved_offloaded', task: null, power: 'shutdown' }, notify: 'INFO',
    nova: {
      instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: ['shelving', 'shelving_offloading'] }, { set: NO_HOST, expected: [null] }],
      hook: 'forget_instance',
      fanout: 'delete_instance_info',
      event: { name: SHELVE, phase: 'finish' },
      usage: true,
    },
  },
  /** The shelve failed: the task cleared, the fault recorded; the snapshot image is deleted and a guest that ran is started again. */
  'shelve.revert': { method: 'shelve_instance', from: { vm: 'any', task: [...SHELVING, 'shelving_offloading'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: SHELVE, phase: 'finish', failure: 'shelve failed' } } },
  /** An offload asked for on its own (nova's API offloads a server booted from a volume without a snapshot). */
  'shelve_offload.start': { method: 'shelve_offload_instance', from: { vm: [...SHELVABLE, 'shelved'], task: [null, 'shelving_offloading'], move: 'none' }, to: { task: 'shelving_offloading' }, onFailure: 'shelve_offload.revert', notify: 'INFO', nova: { event: { name: OFFLOAD, phase: 'start' } } },
  /** A SHELVED server kept here longer than `shelved_offload_time`: the periodic offload (nova's `_poll_shelved_instances`). */
  'shelve_offload.expired': {
    method: 'shelve_offload_instance', from: { vm: ['shelved'], task: [null, 'shelving_offloading'], move: 'none' }, to: { task: 'shelving_offloading' }, onFailure: 'shelve_offload.revert', notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' }, expected: [null, 'shelving_offloading'] }], event: { name: OFFLOAD, phase: 'start' } },
  },
  'shelve_offload.end': {
    method: 'shelve_offload_instance', from: { vm: [...SHELVABLE, 'shelved'], task: ['shelving_offloading'], move: 'none' }, to: { vm: 'shelved_offloaded', task: null, power: 'shutdown' }, notify: 'INFO',
    nova: {
      instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: ['shelving', 'shelving_offloading'] }, { set: NO_HOST, expected: [null] }],
      hook: 'forget_instance',
      fanout: 'delete_instance_info',
      event: { name: OFFLOAD, phase: 'finish' },
      usage: true,
    },
  },
  'shelve_offload.revert': { method: 'shelve_offload_instance', from: { vm: 'any', task: ['shelving_offloading'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: OFFLOAD, phase: 'finish', failure: 'offload failed' } } },
  // The scheduler picked this host for a SHELVED_OFFLOADED server: it arrives as a build does.
  'unshelve.start': {
    method: 'unshelve_instance', from: 'new', to: { vm: 'shelved_offloaded', task: 'spawning' }, onFailure: 'unshelve.error', notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' } }], event: { name: UNSHELVE, phase: 'start' } },
  },
  /** The scheduler's claim verified: the host is this one (nova's `instance_claim`). */
  'unshelve.claimed': {
    method: 'unshelve_instance', from: { vm: ['shelved_offloaded'], task: ['spawning'], move: 'none' }, to: {}, onFailure: 'unshelve.error', notify: 'none',
    nova: { instance: [{ set: { host: 'this_host', node: 'this_host', compute_id: 'this_node_id', launched_on: 'this_host' } }] },
  },
  'unshelve.end': {
    method: 'unshelve_instance', from: { vm: ['shelved_offloaded'], task: ['spawning'], move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: {
      instance: [{ set: { system_metadata: 'unshelved_sysmeta', power_state: 'state', vm_state: 'state', task_state: 'state', launched_at: 'now' }, expected: 'spawning' }],
      fanout: 'update_instance_info',
      event: { name: UNSHELVE, phase: 'finish' },
      usage: true,
    },
  },
  /** The unshelve failed here: still SHELVED_OFFLOADED, on no host, nothing of it left here (nova's `_nil_out_instance_obj_host_and_node`). */
  'unshelve.error': {
    method: 'unshelve_instance', from: { vm: ['shelved_offloaded'], task: 'any', move: 'none' }, to: { task: null }, notify: 'ERROR',
    nova: { instance: [{ set: { ...NO_HOST, task_state: 'state' } }], fault: true, hook: 'forget_instance', event: { name: UNSHELVE, phase: 'finish', failure: 'unshelve failed' }, usage: true },
  },
  // ---- rescue and unrescue (`rescue.ts`; nova's API set rescuing or unrescuing) ----
  'rescue.start': { method: 'rescue_instance', from: { vm: ['active', 'stopped', 'error'], task: [null, 'rescuing'], move: 'none' }, to: { task: 'rescuing' }, onFailure: 'rescue.error', notify: 'INFO', nova: { event: { name: RESCUE, phase: 'start' } } },
  'rescue.end': {
    method: 'rescue_instance', from: { vm: ['active', 'stopped', 'error'], task: ['rescuing'], move: 'none' }, to: { vm: 'rescued', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state', power_state: 'state', launched_at: 'now' }, expected: 'rescuing' }], event: { name: RESCUE, phase: 'finish' } },
  },
  /** The driver failed: ERROR with the fault (nova's `_set_instance_obj_error_state`, then `reverts_task_state`). */
  'rescue.error': {
    method: 'rescue_instance', from: { vm: 'any', task: ['rescuing'], move: 'none' }, to: { vm: 'error', task: null }, notify: 'ERROR',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state' } }], fault: true, event: { name: RESCUE, phase: 'finish', failure: 'rescue failed' } },
  },
  'unrescue.start': { method: 'unrescue_instance', from: { vm: ['rescued'], task: [null, 'unrescuing'], move: 'none' }, to: { task: 'unrescuing' }, onFailure: 'unrescue.error', notify: 'INFO', nova: { event: { name: UNRESCUE, phase: 'start' } } },
  'unrescue.end': {
    method: 'unrescue_instance', from: { vm: ['rescued'], task: ['unrescuing'], move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state', power_state: 'state' }, expected: 'unrescuing' }], event: { name: UNRESCUE, phase: 'finish' } },
  },
  'unrescue.error': {
    method: 'unrescue_instance', from: { vm: 'any', task: ['unrescuing'], move: 'none' }, to: { vm: 'error', task: null }, notify: 'ERROR',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state' } }], fault: true, event: { name: UNRESCUE, phase: 'finish', failure: 'unrescue failed' } },
  },
  // ---- rebuild on this host (nova's API set rebuilding and the new image_ref before the cast) ----
  'rebuild.start': {
    method: 'rebuild_instance', from: { vm: ['active', 'stopped', 'error'], task: [null, 'rebuild_spawning'], move: 'none' }, to: { task: 'rebuild_spawning' }, onFailure: 'rebuild.error', notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' }, expected: ['rebuilding', 'rebuild_block_device_mapping', 'rebuild_spawning'] }], event: { name: REBUILD, phase: 'start' } },
  },
  /** Spawned from the new image: ACTIVE (a server that was STOPPED is then stopped through the stop steps, as nova does). */
  'rebuild.end': {
    method: 'rebuild_instance', from: { vm: ['active', 'stopped', 'error'], task: ['rebuild_spawning'], move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state', launched_at: 'now' }, expected: ['rebuild_spawning'] }], fanout: 'update_instance_info', event: { name: REBUILD, phase: 'finish' } },
  },
  'rebuild.error': {
    method: 'rebuild_instance', from: { vm: 'any', task: ['rebuild_spawning'], move: 'none' }, to: { vm: 'error', task: null, power: 'nostate' }, notify: 'ERROR',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' } }], fault: true, event: { name: REBUILD, phase: 'finish', failure: 'rebuild failed' } },
  },
  // ---- attach and detach an interface (`interfaces.ts`): no state changes; a failure records the fault ----
  'interface_attach.start': { method: 'attach_interface', from: INTERFACES, to: {}, onFailure: 'interface_attach.error', notify: 'INFO', nova: { event: { name: ATTACH, phase: 'start' } } },
  'interface_attach.end': { method: 'attach_interface', from: INTERFACES, to: {}, notify: 'INFO', nova: { event: { name: ATTACH, phase: 'finish' } } },
  'interface_attach.error': { method: 'attach_interface', from: INTERFACES, to: {}, notify: 'ERROR', nova: { fault: true, event: { name: ATTACH, phase: 'finish', failure: 'attach failed' } } },
  'interface_detach.start': { method: 'detach_interface', from: INTERFACES, to: {}, onFailure: 'interface_detach.error', notify: 'INFO', nova: { event: { name: DETACH, phase: 'start' } } },
  'interface_detach.end': { method: 'detach_interface', from: INTERFACES, to: {}, notify: 'INFO', nova: { event: { name: DETACH, phase: 'finish' } } },
  'interface_detach.error': { method: 'detach_interface', from: INTERFACES, to: {}, notify: 'ERROR', nova: { fault: true, event: { name: DETACH, phase: 'finish', failure: 'detach failed' } } },
  // ---- attach and detach a volume (`volume-attach.ts`): no state changes; a failure records the fault ----
  'volume_attach.start': { method: 'attach_volume', from: INTERFACES, to: {}, onFailure: 'volume_attach.error', notify: 'INFO', nova: { event: { name: ATTACH_VOLUME, phase: 'start' } } },
  'volume_attach.end': { method: 'attach_volume', from: INTERFACES, to: {}, notify: 'INFO', nova: { event: { name: ATTACH_VOLUME, phase: 'finish' } } },
  'volume_attach.error': { method: 'attach_volume', from: INTERFACES, to: {}, notify: 'ERROR', nova: { fault: true, event: { name: ATTACH_VOLUME, phase: 'finish', failure: 'attach failed' } } },
  'volume_detach.start': { method: 'detach_volume', from: INTERFACES, to: {}, onFailure: 'volume_detach.error', notify: 'INFO', nova: { event: { name: DETACH_VOLUME, phase: 'start' } } },
  'volume_detach.end': { method: 'detach_volume', from: INTERFACES, to: {}, notify: 'INFO', nova: { event: { name: DETACH_VOLUME, phase: 'finish' } } },
  'volume_detach.error': { method: 'detach_volume', from: INTERFACES, to: {}, notify: 'ERROR', nova: { fault: true, event: { name: DETACH_VOLUME, phase: 'finish', failure: 'detach failed' } } },
  // ---- a compute method the agent does not implement (`unsupported.ts`) ----
  /** A cast: the instance goes to ERROR, its task cleared, with a fault naming the method. */
  'unsupported.error': {
    method: 'unsupported_method', from: { vm: 'any', task: 'any' }, to: { vm: 'error', task: null }, notify: 'ERROR',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state' } }], fault: true },
  },
  // ---- start-up recovery (nova's init_host) ----
  /** A task a request no longer in the journal left behind, on an instance not moving. */
  'init_host.reset': { method: 'init_host', from: { vm: 'any', task: ['resize_prep', 'deleting', 'powering-off', 'powering-on', 'reboot_started', 'reboot_started_hard', 'rebuild_spawning', 'pausing', 'unpausing', 'suspending', 'resuming', ...IMAGING, ...SHELVING, 'rescuing', 'unrescuing', 'soft-deleting', 'restoring'], move: 'none' }, to: { task: null }, notify: 'none', nova: { instance: [{ set: { task_state: 'state' } }] } },
  /** The guest of an ACTIVE instance is gone from the hypervisor. */
  'power_off.error': { method: 'init_host', from: { vm: ['active'], task: 'any', move: 'none' }, to: { vm: 'error', task: null, power: 'nostate' }, notify: 'ERROR', nova: { instance: [{ set: { vm_state: 'state', task_state: 'state' } }] } },
});

/** A step of an instance flow: a row of `TRANSITIONS`. */
export type FlowStep = keyof typeof TRANSITIONS;
export const FLOW_STEPS = Object.keys(TRANSITIONS) as FlowStep[];

export type InstanceState = Pick<InstanceRecord, 'vm_state' | 'task_state' | 'power_state'>;
/** What a step's resulting state is computed from. */
export type StateSource = InstanceState & Pick<InstanceRecord, 'migration'>;

export function rowOf(step: FlowStep): Transition {
  return TRANSITIONS[step];
}

const POWER = { running: POWER_STATE.RUNNING, paused: POWER_STATE.PAUSED, suspended: POWER_STATE.SUSPENDED, shutdown: POWER_STATE.SHUTDOWN, nostate: POWER_STATE.NOSTATE } as const;

/**
 * The state `step` leaves an instance in, from `rec` (its state before, or after: a step's
 * target does not depend on its own fields). Without `rec`, the fields the step keeps are absent.
 */
export function stateAfter(step: FlowStep, rec?: StateSource): Partial<InstanceState> {
  const to = rowOf(step).to;
  const old = rec?.migration?.old_vm_state ?? rec?.vm_state;
  const vm = to.vm === 'old' ? old : (to.vm ?? rec?.vm_state);
  const task = to.task !== undefined ? to.task : rec?.task_state;
  const power =
    to.power === undefined
      ? rec?.power_state
      : to.power === 'old'
        ? old === 'stopped'
          ? POWER_STATE.SHUTDOWN
          : POWER_STATE.RUNNING
        : to.power === 'vm'
          ? vm === 'paused'
            ? POWER_STATE.PAUSED
            : POWER_STATE.RUNNING
          : POWER[to.power];
  return { ...(vm !== undefined ? { vm_state: vm } : {}), ...(task !== undefined ? { task_state: task } : {}), ...(power !== undefined ? { power_state: power } : {}) };
}

function matches(rec: StateSource, p: StatePattern): boolean {
  const move = p.move === undefined || (p.move === 'none' ? rec.migration === undefined : rec.migration?.role === p.move);
  return (p.vm === 'any' || p.vm.includes(rec.vm_state)) && (p.task === 'any' || p.task.includes(rec.task_state)) && move;
}

/** Whether `rec` may take `step` (for the move `migration`, when named). */
export function allows(rec: StateSource, step: FlowStep, migration?: string): boolean {
  const from = rowOf(step).from;
  return from !== 'new' && matches(rec, from) && (migration === undefined || rec.migration?.uuid === migration);
}

/** @throws InvalidStateError naming the instance, the step's operation and the state, unless `rec` may take `step` */
export function check(rec: InstanceRecord, step: FlowStep, migration?: string): void {
  if (!allows(rec, step, migration)) throw new InvalidStateError(rec.uuid, OPERATIONS[rowOf(step).method], describeState(rec));
}

/**
 * Moves `rec` through `step`: checks it may (for the move `migration`, when named) and sets the
 * state the step moves to. Returns `rec`. @throws InvalidStateError
 */
export function transition(rec: InstanceRecord, step: FlowStep, migration?: string): InstanceRecord {
  check(rec, step, migration);
  return Object.assign(rec, stateAfter(step, rec));
}

/**
 * Whether `rec` already is where `step` leads (its vm_state and task_state; in the move
 * `migration`, when named): a redelivered step that finds it so has nothing left to do.
 */
export function reached(rec: StateSource, step: FlowStep, migration?: string): boolean {
  const after = stateAfter(step, rec);
  return (migration === undefined || rec.migration?.uuid === migration) && rec.vm_state === after.vm_state && rec.task_state === after.task_state;
}

/**
 * The first state of an instance arriving through `step` (a step from 'new'); `oldVm`: the
 * vm_state it had where it comes from. @throws InvalidStateError when this host already has a
 * record of it (`existing`), or the step does not start an arrival
 */
export function arrival(step: FlowStep, existing?: InstanceRecord, oldVm: VmState = 'active'): Pick<InstanceRecord, 'vm_state' | 'task_state'> {
  const row = rowOf(step);
  if (existing) throw new InvalidStateError(existing.uuid, OPERATIONS[row.method], describeState(existing));
  if (row.from !== 'new') throw new Error(`${step} is not the first step of an instance on this host`);
  const { vm_state, task_state } = stateAfter(step, { vm_state: oldVm, task_state: null, power_state: POWER_STATE.NOSTATE });
  return { vm_state: vm_state ?? oldVm, task_state: task_state ?? null };
}

/** The step reported when `step`'s work fails. @throws Error when its row names none */
export function failureOf(step: FlowStep): FlowStep {
  const failure = rowOf(step).onFailure as FlowStep | undefined;
  if (!failure) throw new Error(`${step} names no failure step`);
  return failure;
}
