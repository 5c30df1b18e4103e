/**
 * The rows of the instance state machine (`transitions.ts`, whose table spreads them in) for the
 * steps that change a guest's power where it is: stop, start and reboot, pause and suspend, the
 * crash dump, the periodic power-state sync, soft delete and restore, and the admin password set
 * through the guest agent. Each row as `transitions.ts` describes rows; a failure step named here
 * is a row of this file.
 */
import { transitionTable, type StatePattern } from './transition-types';

const SOFT_DELETE = 'compute_soft_delete_instance';
const RESTORE = 'compute_restore_instance';
const SET_PASSWORD = 'compute_set_admin_password';
const STOP = 'compute_stop_instance';
const START = 'compute_start_instance';
const REBOOT = 'compute_reboot_instance';
/** nova's API reboots ACTIVE servers, and STOPPED, PAUSED, SUSPENDED and ERROR ones hard (`ALLOW_HARD_REBOOT`). */
const REBOOTABLE = ['active', 'stopped', 'paused', 'suspended', 'error'] as const;
const REBOOTING = ['reboot_started', 'reboot_started_hard'] as const;
const PAUSE = 'compute_pause_instance';
const UNPAUSE = 'compute_unpause_instance';
const SUSPEND = 'compute_suspend_instance';
const RESUME = 'compute_resume_instance';
const CRASH_DUMP = 'compute_trigger_crash_dump';
/** nova's API triggers a crash dump of these (`ALLOW_TRIGGER_CRASH_DUMP`). */
const CRASH_DUMPABLE = { vm: ['active', 'paused', 'rescued', 'resized', 'error'], task: [null], move: 'none' } as const satisfies StatePattern;
/** nova's reboot task states (`soft_reboot_states`, `hard_reboot_states`): a soft reboot of a guest that is down is done hard, so either may be found. */
const NOVA_REBOOTING = ['rebooting', 'reboot_pending', 'reboot_started', 'rebooting_hard', 'reboot_pending_hard', 'reboot_started_hard'];

export const POWER_TRANSITIONS = transitionTable({
  // ---- stop, start, reboot (nova's API set powering-off, powering-on or rebooting(_hard) before the cast) ----
  'power_off.start': { method: 'stop_instance', from: { vm: ['active', 'stopped', 'error'], task: [null, 'powering-off'], move: 'none' }, to: { task: 'powering-off' }, onFailure: 'power_off.revert', notify: 'INFO', nova: { event: { name: STOP, phase: 'start' } } },
  'power_off.end': {
    method: 'stop_instance', from: { vm: ['active', 'stopped', 'error'], task: ['powering-off'], move: 'none' }, to: { vm: 'stopped', task: null, power: 'shutdown' }, notify: 'INFO',
    // nova also expects no task when the guest was already off (`stop_instance`).
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: ['powering-off', null] }], event: { name: STOP, phase: 'finish' } },
  },
  /** The driver failed: the task is cleared, the state kept, the fault recorded (nova's `reverts_task_state` and `wrap_instance_fault`). */
  'power_off.revert': { method: 'stop_instance', from: { vm: 'any', task: ['powering-off'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: STOP, phase: 'finish', failure: 'stop failed' } } },
  'power_on.start': { method: 'start_instance', from: { vm: ['stopped'], task: [null, 'powering-on'], move: 'none' }, to: { task: 'powering-on' }, onFailure: 'power_on.revert', notify: 'INFO', nova: { event: { name: START, phase: 'start' } } },
  'power_on.end': {
    method: 'start_instance', from: { vm: ['stopped'], task: ['powering-on'], move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: 'powering-on' }], event: { name: START, phase: 'finish' } },
  },
  /** Unshelve of a SHELVED server still here: nova's conductor casts start_instance (task powering-on). */
  'power_on.shelved_start': { method: 'start_instance', from: { vm: ['shelved'], task: [null, 'powering-on'], move: 'none' }, to: { task: 'powering-on' }, onFailure: 'power_on.revert', notify: 'INFO', nova: { event: { name: START, phase: 'start' } } },
  /** Started again: ACTIVE, the shelved keys out of system_metadata (the snapshot image is then deleted). */
  'power_on.shelved_end': {
    method: 'start_instance', from: { vm: ['shelved'], task: ['powering-on'], move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { system_metadata: 'unshelved_sysmeta', power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: 'powering-on' }], event: { name: START, phase: 'finish' } },
  },
  'power_on.revert': { method: 'start_instance', from: { vm: 'any', task: ['powering-on'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: START, phase: 'finish', failure: 'start failed' } } },
  'reboot.start': {
    method: 'reboot_instance', from: { vm: REBOOTABLE, task: [null, 'reboot_started'], move: 'none' }, to: { task: 'reboot_started' }, onFailure: 'reboot.error', notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' }, expected: NOVA_REBOOTING }], event: { name: REBOOT, phase: 'start' } },
  },
  'reboot_hard.start': {
    method: 'reboot_instance', from: { vm: REBOOTABLE, task: [null, 'reboot_started_hard'], move: 'none' }, to: { task: 'reboot_started_hard' }, onFailure: 'reboot.error', notify: 'INFO',
    nova: { instance: [{ set: { task_state: 'state' }, expected: NOVA_REBOOTING }], event: { name: REBOOT, phase: 'start' } },
  },
  /** Rebooted, or failed with the guest still running (then with the fault, as nova records it). */
  'reboot.end': {
    method: 'reboot_instance', from: { vm: REBOOTABLE, task: REBOOTING, move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' } }], fault: true, event: { name: REBOOT, phase: 'finish' } },
  },
  /** The reboot failed and the guest is not running: ERROR (nova's `_set_instance_obj_error_state`). */
  'reboot.error': {
    method: 'reboot_instance', from: { vm: REBOOTABLE, task: REBOOTING, move: 'none' }, to: { vm: 'error', task: null }, notify: 'ERROR',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' } }], fault: true, event: { name: REBOOT, phase: 'finish', failure: 'reboot failed' } },
  },
  // ---- pause, unpause, suspend, resume (nova's API set the task state before the cast; `power.ts`) ----
  'pause.start': { method: 'pause_instance', from: { vm: ['active'], task: [null, 'pausing'], move: 'none' }, to: { task: 'pausing' }, onFailure: 'pause.revert', notify: 'INFO', nova: { event: { name: PAUSE, phase: 'start' } } },
  'pause.end': {
    method: 'pause_instance', from: { vm: ['active'], task: ['pausing'], move: 'none' }, to: { vm: 'paused', task: null, power: 'paused' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: 'pausing' }], event: { name: PAUSE, phase: 'finish' } },
  },
  /** The driver failed: the task cleared, the state kept, the fault recorded (nova's `reverts_task_state`, `wrap_instance_fault`). */
  'pause.revert': { method: 'pause_instance', from: { vm: 'any', task: ['pausing'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: PAUSE, phase: 'finish', failure: 'pause failed' } } },
  'unpause.start': { method: 'unpause_instance', from: { vm: ['paused'], task: [null, 'unpausing'], move: 'none' }, to: { task: 'unpausing' }, onFailure: 'unpause.revert', notify: 'INFO', nova: { event: { name: UNPAUSE, phase: 'start' } } },
  'unpause.end': {
    method: 'unpause_instance', from: { vm: ['paused'], task: ['unpausing'], move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: 'unpausing' }], event: { name: UNPAUSE, phase: 'finish' } },
  },
  'unpause.revert': { method: 'unpause_instance', from: { vm: 'any', task: ['unpausing'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: UNPAUSE, phase: 'finish', failure: 'unpause failed' } } },
  'suspend.start': { method: 'suspend_instance', from: { vm: ['active'], task: [null, 'suspending'], move: 'none' }, to: { task: 'suspending' }, onFailure: 'suspend.revert', notify: 'INFO', nova: { event: { name: SUSPEND, phase: 'start' } } },
  'suspend.end': {
    method: 'suspend_instance', from: { vm: ['active'], task: ['suspending'], move: 'none' }, to: { vm: 'suspended', task: null, power: 'suspended' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: 'suspending' }], event: { name: SUSPEND, phase: 'finish' } },
  },
  /** nova's `_error_out_instance_on_exception(instance_state=vm_state)`: the state kept, the task cleared, the fault recorded. */
  'suspend.revert': { method: 'suspend_instance', from: { vm: 'any', task: ['suspending'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { vm_state: 'state', task_state: 'state' } }], fault: true, event: { name: SUSPEND, phase: 'finish', failure: 'suspend failed' } } },
  'resume.start': { method: 'resume_instance', from: { vm: ['suspended'], task: [null, 'resuming'], move: 'none' }, to: { task: 'resuming' }, onFailure: 'resume.revert', notify: 'INFO', nova: { event: { name: RESUME, phase: 'start' } } },
  'resume.end': {
    method: 'resume_instance', from: { vm: ['suspended'], task: ['resuming'], move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: 'resuming' }], event: { name: RESUME, phase: 'finish' } },
  },
  'resume.revert': { method: 'resume_instance', from: { vm: 'any', task: ['resuming'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { vm_state: 'state', task_state: 'state' } }], fault: true, event: { name: RESUME, phase: 'finish', failure: 'resume failed' } } },
  // ---- a crash dump (an NMI): no state changes; a failure records the fault ----
  'trigger_crash_dump.start': { method: 'trigger_crash_dump', from: CRASH_DUMPABLE, to: {}, onFailure: 'trigger_crash_dump.error', notify: 'INFO', nova: { event: { name: CRASH_DUMP, phase: 'start' } } },
  'trigger_crash_dump.end': { method: 'trigger_crash_dump', from: CRASH_DUMPABLE, to: {}, notify: 'INFO', nova: { event: { name: CRASH_DUMP, phase: 'finish' } } },
  'trigger_crash_dump.error': { method: 'trigger_crash_dump', from: CRASH_DUMPABLE, to: {}, notify: 'ERROR', nova: { fault: true, event: { name: CRASH_DUMP, phase: 'finish', failure: 'crash dump failed' } } },
  // ---- the periodic power-state sync (nova's `_sync_power_states`) ----
  /** The driver's power state differs from the recorded one: recorded. */
  'power_sync.state': { method: '_sync_power_states', from: { vm: ['active', 'stopped', 'paused', 'suspended', 'rescued'], task: [null], move: 'none' }, to: {}, notify: 'none', nova: { instance: [{ set: { power_state: 'state' }, expected: [null] }] } },
  /** The guest of an ACTIVE or PAUSED instance shut down or crashed: STOPPED (nova stops it through its API). */
  'power_sync.stopped': {
    method: '_sync_power_states', from: { vm: ['active', 'paused'], task: [null], move: 'none' }, to: { vm: 'stopped', task: null, power: 'shutdown' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: [null] }] },
  },
  // ---- soft delete and restore (`soft-delete.ts`; nova's API set soft-deleting or restoring) ----
  'soft_delete.start': { method: 'soft_delete_instance', from: { vm: 'any', task: [null, 'soft-deleting'], move: 'none' }, to: { task: 'soft-deleting' }, onFailure: 'soft_delete.revert', notify: 'INFO', nova: { event: { name: SOFT_DELETE, phase: 'start' } } },
  /** The guest powered off at once; disks, ports, volumes and allocations kept until a restore or the reclaim. */
  'soft_delete.end': {
    method: 'soft_delete_instance', from: { vm: 'any', task: ['soft-deleting'], move: 'none' }, to: { vm: 'soft-delete', task: null, power: 'shutdown' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: ['soft-deleting'] }], event: { name: SOFT_DELETE, phase: 'finish' } },
  },
  'soft_delete.revert': { method: 'soft_delete_instance', from: { vm: 'any', task: ['soft-deleting'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: SOFT_DELETE, phase: 'finish', failure: 'soft delete failed' } } },
  'restore.start': { method: 'restore_instance', from: { vm: ['soft-delete'], task: [null, 'restoring'], move: 'none' }, to: { task: 'restoring' }, onFailure: 'restore.revert', notify: 'INFO', nova: { event: { name: RESTORE, phase: 'start' } } },
  'restore.end': {
    method: 'restore_instance', from: { vm: ['soft-delete'], task: ['restoring'], move: 'none' }, to: { vm: 'active', task: null, power: 'running' }, notify: 'INFO',
    nova: { instance: [{ set: { power_state: 'state', vm_state: 'state', task_state: 'state' }, expected: 'restoring' }], event: { name: RESTORE, phase: 'finish' } },
  },
  'restore.revert': { method: 'restore_instance', from: { vm: 'any', task: ['restoring'], move: 'none' }, to: { task: null }, notify: 'ERROR', nova: { instance: [{ set: { task_state: 'state' } }], fault: true, event: { name: RESTORE, phase: 'finish', failure: 'restore failed' } } },
  // ---- a new admin password through the guest agent (`admin-password.ts`; a call: nova's API set updating_password) ----
  'set_admin_password.start': { method: 'set_admin_password', from: { vm: 'any', task: [null], move: 'none' }, to: {}, onFailure: 'set_admin_password.error', notify: 'none', nova: { event: { name: SET_PASSWORD, phase: 'start' } } },
  'set_admin_password.end': { method: 'set_admin_password', from: { vm: 'any', task: [null], move: 'none' }, to: {}, notify: 'none', nova: { instance: [{ set: { task_state: null }, expected: ['updating_password'] }], event: { name: SET_PASSWORD, phase: 'finish' } } },
  /** Refused or failed: nova's task cleared, the fault recorded (nova's `wrap_instance_fault`); the caller gets the error. */
  'set_admin_password.error': {
    method: 'set_admin_password', from: { vm: 'any', task: [null], move: 'none' }, to: {}, notify: 'none',
    nova: { instance: [{ set: { task_state: null }, expected: ['updating_password'] }], fault: true, event: { name: SET_PASSWORD, phase: 'finish', failure: 'set admin password failed' } },
  },
});
