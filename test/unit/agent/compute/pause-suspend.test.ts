// pause, unpause, suspend, resume and trigger_crash_dump on the fake driver, through the method
// table: the states each leaves, what a driver failure leaves (the state kept, the task cleared,
// the fault recorded), the states each refuses, the power sync of a paused guest that died, and
// in nova mode the saves nova-compute makes (expected task states, action events).
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, instanceArgs, singleHost, type HarnessHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-pause' };

async function setup(c?: FakeConductor) {
  const { host: a, api, peers } = await singleHost('host-s', c);
  const call = <T = unknown>(method: string, args: Record<string, unknown>): Promise<T> => peers.call<T>(a.name, method, args, CTX);
  return { a, api, call };
}

const events = (a: HarnessHost, uuid: string): string[] =>
  a.notifier.sent.filter((n) => (n.payload['nova_object.data'] as { uuid: string }).uuid === uuid).map((n) => n.event_type);

describe('standalone, fake driver', () => {
  async function running(a: HarnessHost, call: (m: string, args: Record<string, unknown>) => Promise<unknown>): Promise<string> {
    const inst = instanceArgs();
    await call('build_and_run_instance', { instance: inst });
    return String(inst.uuid);
  }

  test('pause, unpause, suspend, resume: the states nova shows, the guest as the driver has it, a notification per step', async () => {
    const { a, call } = await setup();
    const uuid = await running(a, call);
    const ref = { instance: { uuid } };
    await call('pause_instance', ref);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'paused', task_state: null, power_state: 3 });
    expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('PAUSED');
    await call('unpause_instance', ref);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    await call('suspend_instance', ref);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'suspended', task_state: null, power_state: 7 });
    expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('SUSPENDED');
    await call('resume_instance', ref);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    expect(a.driver.hypervisor.find(uuid)?.console?.slice(-4)).toEqual(['paused', 'unpaused', 'suspended', 'resumed'].map((e) => `fake guest ${a.manager.record(uuid)?.name ?? ''}: ${e}`));
    expect(events(a, uuid).slice(2)).toEqual([
      'instance.pause.start', 'instance.pause.end', 'instance.unpause.start', 'instance.unpause.end',
      'instance.suspend.start', 'instance.suspend.end', 'instance.resume.start', 'instance.resume.end',
    ]);
  });

  test('each is refused in a state nova would not cast it in, and the instance is left as it was', async () => {
    const { a, call } = await setup();
    const uuid = await running(a, call);
    const ref = { instance: { uuid } };
    await expect(call('unpause_instance', ref)).rejects.toMatchObject({ name: 'InvalidStateError' });
    await expect(call('resume_instance', ref)).rejects.toMatchObject({ name: 'InvalidStateError' });
    await call('suspend_instance', ref);
    await expect(call('pause_instance', ref)).rejects.toMatchObject({ name: 'InvalidStateError' });
    await expect(call('trigger_crash_dump', ref)).rejects.toMatchObject({ name: 'InvalidStateError' });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'suspended', task_state: null });
  });

  test('a driver failure keeps the state, clears the task and records the fault', async () => {
    const { a, call } = await setup();
    const uuid = await running(a, call);
    a.driver.faults.inject('suspend', { error: new Error('no room for the state'), times: 1 });
    await call('suspend_instance', { instance: { uuid } });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, fault: 'suspend failed: no room for the state' });
    expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('RUNNING');
    expect(events(a, uuid).slice(-1)).toEqual(['instance.suspend.revert']);
  });

  test('a crash dump reaches the guest and changes no state; one the guest cannot take records the fault', async () => {
    const { a, call } = await setup();
    const uuid = await running(a, call);
    await call('trigger_crash_dump', { instance: { uuid } });
    expect(a.driver.hypervisor.find(uuid)?.console?.at(-1)).toMatch(/NMI received$/);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    a.driver.faults.inject('triggerCrashDump', { error: new Error('no NMI'), times: 1 });
    await call('trigger_crash_dump', { instance: { uuid } });
    expect(events(a, uuid).slice(-4)).toEqual(['instance.trigger_crash_dump.start', 'instance.trigger_crash_dump.end', 'instance.trigger_crash_dump.start', 'instance.trigger_crash_dump.error']);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  });

  test('inject_network_info is answered and changes nothing (nothing to inject, as under libvirt)', async () => {
    const { a, call } = await setup();
    const uuid = await running(a, call);
    await call('inject_network_info', { instance: { uuid } });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(a.manager.record(uuid)?.fault).toBeUndefined();
  });

  test('power sync: a PAUSED server whose guest died is stopped; a SUSPENDED one is left as it is', async () => {
    const { a, call } = await setup();
    const paused = await running(a, call);
    const suspended = await running(a, call);
    await call('pause_instance', { instance: { uuid: paused } });
    await call('suspend_instance', { instance: { uuid: suspended } });
    a.driver.hypervisor.find(paused)!.powerState = 'CRASHED';
    const out = await a.manager.power.syncPowerStates(CTX);
    expect(out.stopped).toEqual([paused]);
    expect(a.manager.record(paused)).toMatchObject({ vm_state: 'stopped', power_state: 4 });
    expect(a.manager.record(suspended)).toMatchObject({ vm_state: 'suspended', power_state: 7 });
  });
});

describe('nova mode', () => {
  test("pause, unpause, suspend, resume: nova's saves with the expected task states, and an action event per method", async () => {
    const c = new FakeConductor();
    const { a, api: placement, call } = await setup(c);
    const uuid = randomUUID();
    await placement.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await call('build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, flavor: { ...FLAVOR } }) });
    /** nova's API sets the task state, then casts with the Instance as it now is. */
    const cast = async (method: string, task: string): Promise<void> => {
      const row = c.instances.get(uuid)!;
      row.task_state = task;
      await call(method, { instance: c.prim('Instance', row) });
    };
    c.calls.length = 0;
    await cast('pause_instance', 'pausing');
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'paused', task_state: null, power_state: 3 });
    await cast('unpause_instance', 'unpausing');
    await cast('suspend_instance', 'suspending');
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'suspended', task_state: null, power_state: 7 });
    await cast('resume_instance', 'resuming');
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    const saves = c.calls.filter((x) => x.what === 'Instance.save').map((x) => [x.changes, x.kwargs?.expected_task_state]);
    expect(saves).toEqual(['pausing', 'unpausing', 'suspending', 'resuming'].map((t) => [['power_state', 'vm_state', 'task_state'], t]));
    const evs = c.calls.filter((x) => x.what.startsWith('InstanceActionEvent')).map((x) => `${x.what.split('.')[1]}:${String(x.args?.[1])}`);
    expect(evs).toEqual(['pause', 'unpause', 'suspend', 'resume'].flatMap((m) => [`event_start:compute_${m}_instance`, `event_finish_with_failure:compute_${m}_instance`]));
    expect(c.faults).toEqual([]);
  });
});
