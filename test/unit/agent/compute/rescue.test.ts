// rescue_instance and unrescue_instance on the fake driver: RESCUED from the instance's own image
// or the one asked for, ACTIVE again after unrescue, a driver failure putting the instance in
// ERROR with the fault (as nova does), refusals by state; in nova mode, nova's saves with the
// expected task states and an action event per method.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, instanceArgs, singleHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-rescue' };

async function setup(c?: FakeConductor) {
  const { host: a, api, peers } = await singleHost('host-r', c);
  const call = <T = unknown>(method: string, args: Record<string, unknown>): Promise<T> => peers.call<T>(a.name, method, args, CTX);
  return { a, api, call };
}

test('rescue from the instance’s image, unrescue; rescue from another image; unrescue of an ACTIVE one refused', async () => {
  const { a, call } = await setup();
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await call('build_and_run_instance', { instance: { ...inst, image_ref: 'own-image' } });
  await expect(call('unrescue_instance', { instance: { uuid } })).rejects.toMatchObject({ name: 'InvalidStateError' });
  await call('rescue_instance', { instance: { uuid }, rescue_password: 'x', rescue_image_ref: null, clean_shutdown: true });
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'rescued', task_state: null, power_state: 1 });
  expect(a.driver.hypervisor.find(uuid)?.rescueImage).toBe('own-image');
  await call('unrescue_instance', { instance: { uuid } });
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(a.driver.hypervisor.find(uuid)?.rescueImage).toBeUndefined();
  await call('rescue_instance', { instance: { uuid }, rescue_image_ref: 'rescue-image' });
  expect(a.driver.hypervisor.find(uuid)?.rescueImage).toBe('rescue-image');
  const events = a.notifier.sent.map((n) => n.event_type).filter((e) => /rescue/.test(e));
  expect(events).toEqual(['instance.rescue.start', 'instance.rescue.end', 'instance.unrescue.start', 'instance.unrescue.end', 'instance.rescue.start', 'instance.rescue.end']);
});

test('a rescue the driver fails: ERROR with the fault', async () => {
  const { a, call } = await setup();
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await call('build_and_run_instance', { instance: { ...inst, image_ref: 'own-image' } });
  a.driver.faults.inject('rescue', { error: new Error('rescue image unreadable'), times: 1 });
  await call('rescue_instance', { instance: { uuid } });
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'error', task_state: null, fault: 'rescue failed: rescue image unreadable' });
});

test("nova mode: nova's saves expect rescuing and unrescuing; an action event each", async () => {
  const c = new FakeConductor();
  const { a, api, call } = await setup(c);
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  await call('build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', image_ref: 'img', host: null, flavor: { ...FLAVOR } }) });
  const cast = async (method: string, task: string): Promise<void> => {
    const row = c.instances.get(uuid)!;
    row.task_state = task;
    await call(method, { instance: c.prim('Instance', row) });
  };
  c.calls.length = 0;
  await cast('rescue_instance', 'rescuing');
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'rescued', task_state: null });
  await cast('unrescue_instance', 'unrescuing');
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  const saves = c.calls.filter((x) => x.what === 'Instance.save').map((x) => [x.changes, x.kwargs?.expected_task_state]);
  expect(saves).toEqual([
    [['vm_state', 'task_state', 'power_state', 'launched_at'], 'rescuing'],
    [['vm_state', 'task_state', 'power_state'], 'unrescuing'],
  ]);
  const evs = c.calls.filter((x) => x.what.startsWith('InstanceActionEvent')).map((x) => `${x.what.split('.')[1]}:${String(x.args?.[1])}`);
  expect(evs).toEqual(['event_start:compute_rescue_instance', 'event_finish_with_failure:compute_rescue_instance', 'event_start:compute_unrescue_instance', 'event_finish_with_failure:compute_unrescue_instance']);
});
