/**
 * The vocabulary of the instance state machine (`transitions.ts`): the operations that move
 * instances, the state patterns a step starts from, the state it moves to, and what nova-compute
 * writes at a step. The table itself and the functions over it are in `transitions.ts`, which
 * re-exports everything here.
 */
import type { MigrationStatus, TaskState, VmState } from '../../model/instance';

/** The operations that move instances (nova's method names), as a refusal names them. */
export const OPERATIONS = {
  build_and_run_instance: 'build',
  terminate_instance: 'delete',
  prep_resize: 'prepare a resize of',
  resize_instance: 'resize',
  finish_resize: 'finish the resize of',
  confirm_resize: 'confirm the resize of',
  confirm_resize_at_destination: 'confirm at the destination the resize of',
  revert_resize: 'revert the resize of',
  finish_revert_resize: 'finish reverting the resize of',
  check_can_live_migrate_destination: 'live migrate to this host',
  check_can_live_migrate_source: 'live migrate',
  live_migration: 'live migrate',
  pre_live_migration: 'prepare a live migration of',
  post_live_migration_at_destination: 'finish the live migration of',
  stop_instance: 'stop',
  start_instance: 'start',
  reboot_instance: 'reboot',
  pause_instance: 'pause',
  unpause_instance: 'unpause',
  suspend_instance: 'suspend',
  resume_instance: 'resume',
  trigger_crash_dump: 'trigger a crash dump of',
  snapshot_instance: 'snapshot',
  backup_instance: 'back up',
  shelve_instance: 'shelve',
  shelve_offload_instance: 'offload',
  unshelve_instance: 'unshelve',
  rescue_instance: 'rescue',
  unrescue_instance: 'unrescue',
  soft_delete_instance: 'soft delete',
  restore_instance: 'restore',
  set_admin_password: 'set the admin password of',
  rebuild_instance: 'rebuild',
  attach_interface: 'attach an interface to',
  detach_interface: 'detach an interface from',
  attach_volume: 'attach a volume to',
  detach_volume: 'detach a volume from',
  _sync_power_states: 'sync the power state of',
  init_host: 'recover',
  unsupported_method: 'run a method the agent does not implement on',
} as const;
export type Operation = keyof typeof OPERATIONS;

/** The states a step may start from; 'any' matches every value. */
export interface StatePattern {
  readonly vm: readonly VmState[] | 'any';
  readonly task: ReadonlyArray<TaskState | null> | 'any';
  /** This host's part in the move the record holds ('none': no move); absent: any. */
  readonly move?: 'none' | 'source' | 'dest';
}

/** The state a step moves to; a field left out keeps its value. */
export interface TargetState {
  /** 'old': the vm_state the instance had before its move. */
  readonly vm?: VmState | 'old';
  readonly task?: TaskState | null;
  /** 'old': shut down if the instance was stopped before its move, running otherwise; 'vm': paused if the instance is PAUSED, running otherwise. */
  readonly power?: 'running' | 'paused' | 'suspended' | 'shutdown' | 'nostate' | 'old' | 'vm';
}

/**
 * Where a value nova-compute writes comes from: 'state', the same-named field (vm_state,
 * task_state, power_state) of the state the step moves to; 'now'; 'this_host' and 'this_ip' (this
 * compute host); 'this_node_id', the id of this host's ComputeNode in nova; 'move_dest', the move's
 * destination host, and 'move_dest_node_id' its ComputeNode id; 'flavor', the Instance's flavor as
 * nova holds it; 'old_flavor', its old_flavor, or its flavor without one; 'new_flavor', the flavor
 * the move goes to (its new_flavor, or prep_resize's flavor); 'new_flavor_field' and
 * 'old_flavor_field', the same-named size of that flavor (`instance_type_id`: its id), as nova's
 * `_set_instance_info` copies a flavor onto the Instance; 'migration_context', a MigrationContext
 * naming the move's Migration (nova-api sends an instance's external events to the hosts of its
 * migration context's Migration as well as to its host: a revert's source waits for its ports'
 * events while the Instance's host is still the destination); 'shelved_sysmeta', the Instance's
 * system_metadata with nova's `shelved_at`, `shelved_image_id` and `shelved_host` (from the
 * record's `shelved`), 'unshelved_sysmeta', the same without them; or the literal null or number. nova (2023.2 on) writes a node's id wherever it writes the node: `compute_id` beside an
 * Instance's `node`, `dest_compute_id` beside a Migration's `dest_node`; an object version without
 * the field (Zed's) does not get it.
 */
export type NovaValue = 'state' | 'now' | 'shelved_sysmeta' | 'unshelved_sysmeta' | 'this_host' | 'this_ip' | 'this_node_id' | 'move_dest' | 'move_dest_node_id' | 'flavor' | 'old_flavor' | 'new_flavor' | 'new_flavor_field' | 'old_flavor_field' | 'migration_context' | null | number;

/** One `Instance.save`: the fields in the order nova sets them, and the `expected_task_state` it checks (absent: none). */
export interface NovaInstanceSave {
  readonly set: Readonly<Record<string, NovaValue>>;
  readonly expected?: string | null | ReadonlyArray<string | null>;
}

/**
 * nova's bookkeeping that is not a field write: stash the flavor the move goes to on the Instance
 * (revert and confirm read it), `Instance.destroy`, and dropping the Instance this host no longer runs.
 */
export type NovaHook = 'stash_new_flavor' | 'destroy' | 'forget_instance';

/** nova-compute's `InstanceActionEvent` names (`wrap_instance_event(prefix='compute')` on each method). */
export type ActionEvent =
  | 'compute__do_build_and_run_instance'
  | 'compute_terminate_instance'
  | 'compute_stop_instance'
  | 'compute_start_instance'
  | 'compute_reboot_instance'
  | 'compute_pause_instance'
  | 'compute_unpause_instance'
  | 'compute_suspend_instance'
  | 'compute_resume_instance'
  | 'compute_trigger_crash_dump'
  | 'compute_snapshot_instance'
  | 'compute_backup_instance'
  | 'compute_shelve_instance'
  | 'compute_shelve_offload_instance'
  | 'compute_unshelve_instance'
  | 'compute_rescue_instance'
  | 'compute_unrescue_instance'
  | 'compute_soft_delete_instance'
  | 'compute_restore_instance'
  | 'compute_set_admin_password'
  | 'compute_rebuild_instance'
  | 'compute_attach_interface'
  | 'compute_detach_interface'
  | 'compute_attach_volume'
  | 'compute_detach_volume';

/** What nova-compute writes at a step, in this order: Migration, Instance saves, hook, scheduler fanout, action event. */
export interface NovaWrites {
  /**
   * `Migration.save`: `set`, then the status (absent: unchanged, as a live migration's destination
   * claim leaves it); `orLatest`: without the move on the record, the instance's latest Migration.
   */
  readonly migration?: { readonly set?: Readonly<Record<string, NovaValue>>; readonly status?: MigrationStatus; readonly orLatest?: true };
  readonly instance?: readonly NovaInstanceSave[];
  readonly hook?: NovaHook;
  /** The scheduler's host view: the saved Instance, or the instance gone from this host. */
  readonly fanout?: 'update_instance_info' | 'delete_instance_info';
  /** `InstanceActionEvent` start or finish; `failure`: finished with the fault, or this text without one. */
  readonly event?: { readonly name: ActionEvent; readonly phase: 'start' | 'finish'; readonly failure?: string };
  /** What this host's instances use changed (the daemon reports usage to nova). */
  readonly usage?: true;
  /**
   * The instance's console tokens deleted from nova's database (`ConsoleAuthToken
   * .clean_console_auths_for_instance`, where nova-compute calls it): a token must not outlive the
   * guest it opened, nor follow it to another host.
   */
  readonly consoleTokens?: 'clean';
  /** `InstanceFault.create` with the step's fault (nova's `add_instance_fault_from_exc`): what `GET /servers/<id>` shows of an ERROR. */
  readonly fault?: true;
}

export interface Transition<Step extends string = string> {
  readonly method: Operation;
  /** 'new': the instance has no record on this host yet. */
  readonly from: StatePattern | 'new';
  readonly to: TargetState;
  /** The step reported when this step's work fails. */
  readonly onFailure?: Step;
  /** Standalone: the notification's priority, or 'none' where none is sent. */
  readonly notify: 'INFO' | 'ERROR' | 'none';
  /** nova mode; absent: nova-compute writes nothing (the API already did, or nova has no such step). */
  readonly nova?: NovaWrites;
}

/** A group of rows, each `onFailure` naming a row of the same group (the table and its parts are made with it). */
export const transitionTable = <T extends { readonly [K in keyof T]: Transition<Extract<keyof T, string>> }>(rows: T): T => rows;
