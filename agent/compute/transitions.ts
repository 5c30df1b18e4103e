/**
 * The instance state machine as one table. Each row is a step a compute flow takes an instance
 * through, named like nova's notification events: the operation it belongs to, the states it may
 * start from, the state it moves to, the step reported when its work fails, and what each control
 * plane makes of it: the standalone versioned notification and its priority, and nova-compute's
 * writes through nova-conductor (nova `compute/manager.py`; docs/nova-control-plane.md lists them
 * per step).
 *
 * A new compute method adds rows here. Flows call `transition` (refuses a step the instance's
 * state does not allow, with InvalidStateError, and sets the new state), `check` (the refusal
 * alone, for a step whose state is set later or whose record is dropped), `arrival` (the first
 * state of an instance new to this host) and `failureOf`; control planes read the row of the step
 * they are told of (`rowOf`, `stateAfter`).
 *
 * Not here: a step's side effects (the flows), how a control plane sends what its columns say
 * (`control-plane.ts`, `agent/nova/control-plane.ts`), and the migration statuses the flows keep
 * to resume a move (their own markers, not the instance's state).
 */
import { describeState, InvalidStateError, POWER_STATE, type InstanceRecord, type MigrationStatus, type TaskState, type VmState } from '../../model/instance';

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
  init_host: 'recover',
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
  /** 'old': shut down if the instance was stopped before its move, running otherwise. */
  readonly power?: 'running' | 'shutdown' | 'nostate' | 'old';
}

/**
 * Where a value nova-compute writes comes from: 'state', the same-named field (vm_state,
 * task_state, power_state) of the state the step moves to; 'now'; 'this_host' and 'this_ip' (this
 * compute host); 'move_dest', the move's destination host; 'flavor', the Instance's flavor as nova
 * holds it; 'old_flavor', its old_flavor, or its flavor without one; or the literal null or number.
 */
export type NovaValue = 'state' | 'now' | 'this_host' | 'this_ip' | 'move_dest' | 'flavor' | 'old_flavor' | null | number;

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

/** What nova-compute writes at a step, in this order: Migration, Instance saves, hook, scheduler fanout, action event. */
export interface NovaWrites {
  /** `Migration.save`: `set`, then the status; `orLatest`: without the move on the record, the instance's latest Migration. */
  readonly migration?: { readonly set?: Readonly<Record<string, NovaValue>>; readonly status: MigrationStatus; readonly orLatest?: true };
  readonly instance?: readonly NovaInstanceSave[];
  readonly hook?: NovaHook;
  /** The scheduler's host view: the saved Instance, or the instance gone from this host. */
  readonly fanout?: 'update_instance_info' | 'delete_instance_info';
  /** `InstanceActionEvent` start or finish; `failure`: finished with the fault, or this text without one. */
  readonly event?: { readonly name: 'compute__do_build_and_run_instance' | 'compute_terminate_instance'; readonly phase: 'start' | 'finish'; readonly failure?: string };
  /** What this host's instances use changed (the daemon reports usage to nova). */
  readonly usage?: true;
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

/** Keeps each row's `onFailure` to a step of the same table. */
const table = <T extends { readonly [K in keyof T]: Transition<Extract<keyof T, string>> }>(rows: T): T => rows;

const BUILD = 'compute__do_build_and_run_instance';
const DELETE = 'compute_terminate_instance';
const MOVED = ['active', 'stopped'] as const;

export const TRANSITIONS = table({
  // ---- build: nova's instance claim, then spawn ----
  'create.start': { method: 'build_and_run_instance', from: 'new', to: { vm: 'building', task: 'scheduling' }, onFailure: 'create.error', notify: 'INFO', nova: { event: { name: BUILD, phase: 'start' } } },
  'create.claimed': {
    method: 'build_and_run_instance', from: { vm: ['building'], task: ['scheduling'] }, to: { task: 'spawning' }, onFailure: 'create.error', notify: 'none',
    // nova's claim sets host and node and clears the task state; the build then moves on to spawning.
    nova: { instance: [{ set: { host: 'this_host', node: 'this_host', launched_on: 'this_host', vm_state: 'state', task_state: null }, expected: ['scheduling', null] }, { set: { task_state: 'state' }, expected: [null] }] },
  },
  'create.end': {
    method: 'build_and_run_instance', from: { vm: ['building'], task: ['spawning'] }, to: { vm: 'active', task: null, power: 'running' }, onFailure: 'create.error', notify: 'INFO',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state', power_state: 'state', launched_at: 'now' }, expected: 'spawning' }], fanout: 'update_instance_info', event: { name: BUILD, phase: 'finish' }, usage: true },
  },
  'create.error': {
    method: 'build_and_run_instance', from: { vm: ['building'], task: 'any' }, to: { vm: 'error', task: null }, notify: 'ERROR',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state' } }], event: { name: BUILD, phase: 'finish', failure: 'build failed' }, usage: true },
  },
  // ---- delete ----
  'delete.start': { method: 'terminate_instance', from: { vm: 'any', task: 'any' }, to: { task: 'deleting' }, notify: 'INFO', nova: { event: { name: DELETE, phase: 'start' } } },
  'delete.end': {
    method: 'terminate_instance', from: { vm: 'any', task: ['deleting'] }, to: { vm: 'deleted', task: null }, notify: 'INFO',
    nova: { instance: [{ set: { vm_state: 'state', task_state: 'state', power_state: POWER_STATE.NOSTATE, terminated_at: 'now' } }], hook: 'destroy', fanout: 'delete_instance_info', event: { name: DELETE, phase: 'finish' }, usage: true },
  },
  // ---- cold migration and resize: prep_resize on the destination ----
  'resize_prep.start': { method: 'prep_resize', from: 'new', to: { vm: 'old', task: 'resize_prep' }, onFailure: 'resize_prep.error', notify: 'INFO' },
  'resize_prep.end': {
    method: 'prep_resize', from: { vm: MOVED, task: ['resize_prep'], move: 'dest' }, to: {}, onFailure: 'resize_prep.error', notify: 'INFO',
    nova: { migration: { set: { dest_compute: 'this_host', dest_node: 'this_host', dest_host: 'this_ip' }, status: 'pre-migrating' }, hook: 'stash_new_flavor', usage: true },
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
    nova: { migration: { status: 'post-migrating' }, instance: [{ set: { host: 'move_dest', node: 'move_dest', task_state: 'state' }, expected: 'resize_migrating' }] },
  },
  'resize.error': { method: 'resize_instance', from: { vm: MOVED, task: ['resize_migrating'], move: 'source' }, to: { vm: 'old', task: null }, notify: 'ERROR', nova: { migration: { status: 'error' }, instance: [{ set: { vm_state: 'state', task_state: 'state' } }] } },
  // ---- finish_resize on the destination ----
  'resize_finish.start': {
    method: 'finish_resize', from: { vm: [...MOVED, 'error'], task: ['resize_prep', 'resize_finish', null], move: 'dest' }, to: { task: 'resize_finish' }, onFailure: 'resize_finish.error', notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' }, expected: 'resize_migrated' }] },
  },
  'resize_finish.end': {
    method: 'finish_resize', from: { vm: [...MOVED, 'error'], task: ['resize_finish'], move: 'dest' }, to: { vm: 'resized', task: null, power: 'old' }, onFailure: 'resize_finish.error', notify: 'INFO',
    nova: { migration: { status: 'finished' }, instance: [{ set: { vm_state: 'state', task_state: 'state', power_state: 'state', launched_at: 'now' }, expected: 'resize_finish' }] },
  },
  'resize_finish.error': { method: 'finish_resize', from: { vm: 'any', task: ['resize_finish'], move: 'dest' }, to: { vm: 'error', task: null }, notify: 'ERROR', nova: { migration: { status: 'error' }, instance: [{ set: { vm_state: 'state', task_state: 'state' } }] } },
  // ---- confirm: the source drops its copy, then tells the destination ----
  'resize_confirm.end': {
    method: 'confirm_resize', from: { vm: MOVED, task: ['resize_migrated'], move: 'source' }, to: { vm: 'old', task: null }, notify: 'INFO',
    nova: { migration: { status: 'confirmed' }, instance: [{ set: { vm_state: 'state', task_state: 'state', old_flavor: null, new_flavor: null }, expected: [null, 'deleting', 'soft-deleting'] }], usage: true },
  },
  'resize_confirm.dest': { method: 'confirm_resize_at_destination', from: { vm: ['resized', 'error'], task: [null], move: 'dest' }, to: { vm: 'old', task: null }, notify: 'none' },
  // ---- revert: the destination drops its copy, then the source takes the instance back ----
  'resize_revert.start': { method: 'revert_resize', from: { vm: ['resized', 'error'], task: [null, 'resize_reverting'], move: 'dest' }, to: { task: 'resize_reverting' }, notify: 'INFO' },
  'resize_revert.dest': { method: 'revert_resize', from: { vm: ['resized', 'error'], task: ['resize_reverting'], move: 'dest' }, to: {}, notify: 'none', nova: { migration: { status: 'reverted' }, usage: true } },
  'resize_revert.end': {
    method: 'finish_revert_resize', from: { vm: MOVED, task: ['resize_migrated'], move: 'source' }, to: { vm: 'old', task: null, power: 'old' }, notify: 'INFO',
    nova: {
      instance: [{ set: { host: 'this_host', node: 'this_host', vm_state: 'state', task_state: 'state', power_state: 'state', launched_at: 'now', flavor: 'old_flavor', old_flavor: null, new_flavor: null }, expected: 'resize_reverting' }],
      usage: true,
    },
  },
  // ---- live migration ----
  'live_migration_check.dest': { method: 'check_can_live_migrate_destination', from: 'new', to: { vm: 'active', task: 'migrating' }, notify: 'none' },
  'live_migration_check.source': { method: 'check_can_live_migrate_source', from: { vm: ['active'], task: [null], move: 'none' }, to: {}, notify: 'none' },
  'live_migration_pre.start': { method: 'live_migration', from: { vm: ['active'], task: [null], move: 'none' }, to: { task: 'migrating' }, onFailure: 'live_migration_abort.end', notify: 'INFO', nova: { migration: { status: 'running' } } },
  'live_migration_pre.dest': { method: 'pre_live_migration', from: { vm: ['active'], task: ['migrating'], move: 'dest' }, to: {}, notify: 'none' },
  'live_migration_post_dest.end': {
    method: 'post_live_migration_at_destination', from: { vm: ['active'], task: ['migrating'], move: 'dest' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'none',
    nova: { instance: [{ set: { host: 'this_host', node: 'this_host', power_state: 'state', task_state: 'state', progress: 0 }, expected: 'migrating' }], fanout: 'update_instance_info', usage: true },
  },
  /** The source drops its record once the destination runs the instance. */
  'live_migration_post.end': {
    method: 'live_migration', from: { vm: ['active'], task: ['migrating'], move: 'source' }, to: { task: null }, notify: 'INFO',
    nova: { migration: { status: 'completed' }, hook: 'forget_instance', fanout: 'delete_instance_info', usage: true },
  },
  'live_migration_abort.end': {
    method: 'live_migration', from: { vm: ['active'], task: ['migrating'], move: 'source' }, to: { task: null }, notify: 'INFO',
    nova: { migration: { status: 'error', orLatest: true }, instance: [{ set: { task_state: 'state', progress: 0 }, expected: ['migrating'] }], usage: true },
  },
  // ---- start-up recovery (nova's init_host) ----
  /** A task a request no longer in the journal left behind, on an instance not moving. */
  'init_host.reset': { method: 'init_host', from: { vm: 'any', task: ['resize_prep', 'deleting'], move: 'none' }, to: { task: null }, notify: 'none' },
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

const POWER = { running: POWER_STATE.RUNNING, shutdown: POWER_STATE.SHUTDOWN, nostate: POWER_STATE.NOSTATE } as const;

/**
 * The state `step` leaves an instance in, from `rec` (its state before, or after: a step's
 * target does not depend on its own fields). Without `rec`, the fields the step keeps are absent.
 */
export function stateAfter(step: FlowStep, rec?: StateSource): Partial<InstanceState> {
  const to = rowOf(step).to;
  const old = rec?.migration?.old_vm_state ?? rec?.vm_state;
  const vm = to.vm === 'old' ? old : (to.vm ?? rec?.vm_state);
  const task = to.task !== undefined ? to.task : rec?.task_state;
  const power = to.power === undefined ? rec?.power_state : to.power === 'old' ? (old === 'stopped' ? POWER_STATE.SHUTDOWN : POWER_STATE.RUNNING) : POWER[to.power];
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
