// The instance transition table: every row accepts each state it lists and refuses others with
// InvalidStateError naming the instance, the operation and the state; the states it moves to;
// and the flows' paths through it, written out by hand.
import { MemoryNotifier } from '../../../../agent/compute/ports';
import { NotifierControlPlane } from '../../../../agent/compute/control-plane';
import { allows, arrival, failureOf, FLOW_STEPS, OPERATIONS, reached, rowOf, stateAfter, transition, TRANSITIONS, type FlowStep, type StatePattern } from '../../../../agent/compute/transitions';
import { describeState, InvalidStateError, POWER_STATE, TASK_STATES, VM_STATES, type InstanceRecord, type MigrationRecord, type TaskState, type VmState } from '../../../../model/instance';

const FLAVOR = { name: 'm1', vcpus: 1, memory_mb: 512, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };
const MIG = 'mig-1';
type Move = 'none' | 'source' | 'dest';

function rec(vm: VmState, task: TaskState | null, move: Move = 'none', power: number = POWER_STATE.RUNNING): InstanceRecord {
  const migration: MigrationRecord | undefined =
    move === 'none' ? undefined : { uuid: MIG, type: 'migration', status: 'finished', source_compute: 'a', dest_compute: 'b', role: move, old_vm_state: 'stopped' };
  return { uuid: 'inst-1', name: 'vm', host: 'a', vm_state: vm, task_state: task, power_state: power, flavor: FLAVOR, project_id: 'p', user_id: 'u', allocations: {}, updated_at: '', ...(migration ? { migration } : {}) };
}

/** Every state `p` lists (each vm × task × move). */
function starts(p: StatePattern): InstanceRecord[] {
  const vms = p.vm === 'any' ? VM_STATES : p.vm;
  const tasks = p.task === 'any' ? [null, ...TASK_STATES] : p.task;
  const moves: Move[] = p.move ? [p.move] : ['none', 'source', 'dest'];
  return vms.flatMap((vm) => tasks.flatMap((task) => moves.map((move) => rec(vm, task, move))));
}

/** States `p` does not list, one per field it restricts. */
function refusedStarts(p: StatePattern): InstanceRecord[] {
  const vm = p.vm === 'any' ? 'active' : p.vm[0]!;
  const task = p.task === 'any' ? null : (p.task[0] ?? null);
  const move: Move = p.move ?? 'none';
  const out: InstanceRecord[] = [];
  const vms = p.vm;
  const tasks = p.task;
  if (vms !== 'any') out.push(rec(VM_STATES.find((v) => !vms.includes(v))!, task, move));
  if (tasks !== 'any') out.push(rec(vm, [null, ...TASK_STATES].find((t) => !tasks.includes(t))!, move));
  if (p.move) out.push(rec(vm, task, p.move === 'dest' ? 'source' : 'dest'));
  return out;
}

function expectRefused(f: () => unknown, r: InstanceRecord, step: FlowStep): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(InvalidStateError);
  expect(err).toMatchObject({ instance: r.uuid, operation: OPERATIONS[rowOf(step).method], state: describeState(r) });
  expect((err as Error).message).toBe(`cannot ${OPERATIONS[rowOf(step).method]} instance ${r.uuid} while it is ${describeState(r)}`);
}

describe.each(FLOW_STEPS.filter((s) => rowOf(s).from !== 'new'))('%s', (step) => {
  const row = rowOf(step);
  const from = row.from as StatePattern;

  test('accepts every state it starts from, and moves each to the state the row names', () => {
    for (const r of starts(from)) {
      const before = { ...r };
      expect(allows(r, step, MIG === r.migration?.uuid ? MIG : undefined)).toBe(true);
      transition(r, step);
      const old = before.migration?.old_vm_state ?? before.vm_state;
      expect(r.vm_state).toBe(row.to.vm === 'old' ? old : (row.to.vm ?? before.vm_state));
      expect(r.task_state).toBe(row.to.task !== undefined ? row.to.task : before.task_state);
      const power = { running: POWER_STATE.RUNNING, paused: POWER_STATE.PAUSED, suspended: POWER_STATE.SUSPENDED, shutdown: POWER_STATE.SHUTDOWN, nostate: POWER_STATE.NOSTATE, old: old === 'stopped' ? POWER_STATE.SHUTDOWN : POWER_STATE.RUNNING, vm: r.vm_state === 'paused' ? POWER_STATE.PAUSED : POWER_STATE.RUNNING };
      expect(r.power_state).toBe(row.to.power ? power[row.to.power] : before.power_state);
    }
  });

  test('refuses a state it does not start from, and another move than the one named', () => {
    for (const r of refusedStarts(from)) {
      const before = { ...r };
      expectRefused(() => transition(r, step), r, step);
      expect(r).toEqual(before);
    }
    const [valid] = starts(from);
    expectRefused(() => transition(valid!, step, 'another-migration'), valid!, step);
  });
});

describe.each(FLOW_STEPS.filter((s) => rowOf(s).from === 'new'))('%s (an arrival)', (step) => {
  test('gives a new instance its first state; refuses when this host has a record of it', () => {
    const to = rowOf(step).to;
    // A row that names no vm_state keeps the one the instance had where it comes from.
    expect(arrival(step, undefined, 'stopped')).toEqual({ vm_state: to.vm === 'old' || to.vm === undefined ? 'stopped' : to.vm, task_state: to.task });
    const existing = rec('active', null);
    expectRefused(() => arrival(step, existing), existing, step);
    expectRefused(() => transition(existing, step), existing, step);
  });
});

test('a step that is not an arrival cannot give a first state', () => {
  expect(() => arrival('create.end')).toThrow(/create.end is not the first step/);
});

test("every row's failure step can follow it: it accepts the state the row starts from or moves to", () => {
  for (const step of FLOW_STEPS) {
    const failure = rowOf(step).onFailure as FlowStep | undefined;
    if (!failure) continue;
    const from = rowOf(step).from;
    // A step that starts a move is followed by the move's record (the flow writes it), with this host's part in it.
    const role = (rowOf(failure).from as StatePattern).move;
    const moving = (r: InstanceRecord): InstanceRecord => (role && role !== 'none' && !r.migration ? { ...r, migration: rec('active', null, role).migration } : r);
    const samples = from === 'new' ? [moving({ ...rec('active', null), ...arrival(step) })] : starts(from);
    for (const r of samples) expect([step, failure, allows(r, failure) || allows(moving(transition({ ...r }, step)), failure)]).toEqual([step, failure, true]);
  }
});

test('a failure step is named where the table has one, and asking for a step without one is a bug', () => {
  expect(failureOf('create.end')).toBe('create.error');
  expect(failureOf('resize.end')).toBe('resize.error');
  expect(failureOf('live_migration_pre.start')).toBe('live_migration_abort.end');
  expect(() => failureOf('delete.start')).toThrow('delete.start names no failure step');
});

test('a step already reached (a redelivery) is told from one still to take', () => {
  const done = rec('resized', null, 'dest');
  expect(reached(done, 'resize_finish.end', MIG)).toBe(true);
  expect(reached(done, 'resize_finish.end', 'another-migration')).toBe(false);
  expect(reached(rec('active', 'resize_finish', 'dest'), 'resize_finish.end', MIG)).toBe(false);
});

test('nova writes take the state only for the state fields', () => {
  for (const step of FLOW_STEPS) {
    for (const save of TRANSITIONS[step].nova?.instance ?? []) {
      for (const [field, v] of Object.entries(save.set)) if (v === 'state') expect([step, field]).toEqual([step, expect.stringMatching(/^(vm_state|task_state|power_state)$/)]);
    }
  }
});

describe('the flows, step by step', () => {
  /** Applies `steps` in order from `r` and returns each resulting vm/task/power. */
  const walk = (r: InstanceRecord, steps: FlowStep[]): string[] => steps.map((s) => `${s} -> ${describeState(transition(r, s))} power ${r.power_state}`);

  test('build: scheduling, networking, block_device_mapping, spawning, active and running', () => {
    const r = { ...rec('active', null), ...arrival('create.start'), power_state: POWER_STATE.NOSTATE };
    expect(describeState(r)).toBe('building/scheduling');
    expect(() => transition({ ...r }, 'create.networked')).toThrow('cannot build instance inst-1 while it is building/scheduling');
    expect(() => transition({ ...r, task_state: 'networking' }, 'create.volumes')).toThrow('cannot build instance inst-1 while it is building/networking');
    expect(walk(r, ['create.claimed', 'create.networked', 'create.volumes', 'create.end'])).toEqual([
      'create.claimed -> building/networking power 0',
      'create.networked -> building/block_device_mapping power 0',
      'create.volumes -> building/spawning power 0',
      'create.end -> active power 1',
    ]);
    expect(() => transition(r, 'create.end')).toThrow('cannot build instance inst-1 while it is active');
  });

  test('a failed build, and a build found interrupted at start-up, go to ERROR', () => {
    expect(describeState(transition(rec('building', 'spawning'), 'create.error'))).toBe('error');
    expect(describeState(transition(rec('building', 'scheduling'), 'create.error'))).toBe('error');
  });

  test('cold migration of a stopped instance, source side: resize, confirmed', () => {
    const r = rec('stopped', null, 'none', POWER_STATE.SHUTDOWN);
    expect(walk(r, ['resize.start'])).toEqual(['resize.start -> stopped/resize_migrating power 4']);
    r.migration = rec('stopped', null, 'source').migration;
    expect(walk(r, ['resize.end'])).toEqual(['resize.end -> stopped/resize_migrated power 4']);
    expect(stateAfter('resize_confirm.end', r)).toEqual({ vm_state: 'stopped', task_state: null, power_state: POWER_STATE.SHUTDOWN });
    expect(stateAfter('resize_revert.end', r)).toEqual({ vm_state: 'stopped', task_state: null, power_state: POWER_STATE.SHUTDOWN });
  });

  test('cold migration, destination side: prepared, finished (RESIZED, powered as before), confirmed', () => {
    expect(arrival('resize_prep.start', undefined, 'active')).toEqual({ vm_state: 'active', task_state: 'resize_prep' });
    const r = rec('active', 'resize_prep', 'dest', POWER_STATE.NOSTATE);
    (r.migration as MigrationRecord).old_vm_state = 'active';
    expect(walk(r, ['resize_prep.end', 'resize_finish.start', 'resize_finish.end', 'resize_confirm.dest'])).toEqual([
      'resize_prep.end -> active/resize_prep power 0',
      'resize_finish.start -> active/resize_finish power 0',
      'resize_finish.end -> resized power 1',
      'resize_confirm.dest -> active power 1',
    ]);
  });

  test('a revert starts only on a RESIZED (or failed) destination', () => {
    expect(() => transition(rec('active', 'resize_prep', 'dest'), 'resize_revert.start', MIG)).toThrow('cannot revert the resize of instance inst-1 while it is active/resize_prep');
    expect(describeState(transition(rec('resized', null, 'dest'), 'resize_revert.start', MIG))).toBe('resized/resize_reverting');
  });

  test('live migration: the source goes migrating and back; the destination runs it', () => {
    const src = rec('active', null);
    expect(allows(src, 'live_migration_check.source')).toBe(true);
    expect(walk(src, ['live_migration_pre.start'])).toEqual(['live_migration_pre.start -> active/migrating power 1']);
    src.migration = rec('active', null, 'source').migration;
    expect(stateAfter('live_migration_abort.end', src)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(arrival('live_migration_check.dest')).toEqual({ vm_state: 'active', task_state: 'migrating' });
    const dest = rec('active', 'migrating', 'dest', POWER_STATE.NOSTATE);
    expect(walk(dest, ['live_migration_pre.dest', 'live_migration_post_dest.end'])).toEqual(['live_migration_pre.dest -> active/migrating power 0', 'live_migration_post_dest.end -> active power 1']);
  });

  test('an instance with a task under way cannot be moved; one on the move cannot be confirmed', () => {
    expect(() => transition(rec('active', 'deleting'), 'resize.start')).toThrow('cannot resize instance inst-1 while it is active/deleting');
    expect(() => transition(rec('active', null), 'live_migration_pre.start', MIG)).toThrow('cannot live migrate instance inst-1 while it is active');
    expect(() => transition(rec('active', null), 'resize_confirm.end', MIG)).toThrow('cannot confirm the resize of instance inst-1 while it is active');
  });

  test('delete: any state goes deleting, then deleted', () => {
    for (const vm of VM_STATES) expect(transition(rec(vm, null), 'delete.start').task_state).toBe('deleting');
    expect(stateAfter('delete.end')).toEqual({ vm_state: 'deleted', task_state: null });
  });

  test('start-up recovery: a left-over task is cleared; a vanished guest is ERROR with no power state', () => {
    expect(describeState(transition(rec('active', 'resize_prep'), 'init_host.reset'))).toBe('active');
    expect(allows(rec('active', 'resize_migrating', 'source'), 'init_host.reset')).toBe(false);
    expect(transition(rec('active', null), 'power_off.error')).toMatchObject({ vm_state: 'error', task_state: null, power_state: POWER_STATE.NOSTATE });
  });
});

test('standalone: a step is notified at its row priority, and not at all where the row says none', async () => {
  const n = new MemoryNotifier();
  const cp = new NotifierControlPlane(n, 'a', () => undefined);
  for (const step of FLOW_STEPS) await cp.step(rec('active', null), step, { request_id: 'r' });
  const sent = FLOW_STEPS.filter((s) => TRANSITIONS[s].notify !== 'none');
  expect(n.sent.map((x) => [x.event_type, x.priority])).toEqual(sent.map((s) => [`instance.${s}`, TRANSITIONS[s].notify]));
  expect(n.sent.filter((x) => x.priority === 'ERROR').map((x) => x.event_type)).toEqual(['instance.create.error', 'instance.delete.error', 'instance.resize_prep.error', 'instance.resize.error', 'instance.resize_finish.error', 'instance.power_off.revert', 'instance.power_on.revert', 'instance.reboot.error', 'instance.pause.revert', 'instance.unpause.revert', 'instance.suspend.revert', 'instance.resume.revert', 'instance.trigger_crash_dump.error', 'instance.soft_delete.revert', 'instance.restore.revert', 'instance.snapshot.revert', 'instance.backup.revert', 'instance.shelve.revert', 'instance.shelve_offload.revert', 'instance.unshelve.error', 'instance.rescue.error', 'instance.unrescue.error', 'instance.rebuild.error', 'instance.interface_attach.error', 'instance.interface_detach.error', 'instance.volume_attach.error', 'instance.volume_detach.error', 'instance.unsupported.error', 'instance.power_off.error']);
  expect(FLOW_STEPS.filter((s) => TRANSITIONS[s].notify === 'none')).toEqual(
    expect.arrayContaining(['create.claimed', 'resize_revert.dest', 'live_migration_post_dest.end']),
  );
});
