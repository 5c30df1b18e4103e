// rebuild_instance on the fake driver through the method table: the guest spawned again from the
// new image with the same flavor and allocations (nothing written to Placement); a STOPPED server
// ends STOPPED; a failed spawn is ERROR with the fault; an evacuation is refused unchanged; in nova
// mode the saves, expected task states and events nova-compute writes.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { failureFromError } from '../../../../agent/rpc/oslo/failure';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, instanceArgs, singleHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-rebuild' };

async function setup(c?: FakeConductor) {
  const { host: a, api, mock, peers } = await singleHost('host-r', c);
  const call = (method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(a.name, method, args, CTX);
  return { a, api, mock, call };
}

test('a new image, the same flavor and allocations: ACTIVE, the guest spawned again, nothing written to Placement', async () => {
  const { a, mock, call } = await setup();
  const inst: Record<string, unknown> = { ...instanceArgs(), image_ref: 'img-1' };
  const uuid = String(inst.uuid);
  await call('build_and_run_instance', { instance: inst });
  const before = a.manager.record(uuid)!;
  mock.requests.length = 0;
  await call('rebuild_instance', { instance: { uuid }, image_ref: 'img-2', orig_image_ref: 'img-1', recreate: false, bdms: null, new_pass: null });
  expect(mock.writes()).toEqual([]);
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1, image_ref: 'img-2', allocations: before.allocations, flavor: FLAVOR });
  // A fresh guest: its console starts over.
  expect(a.driver.hypervisor.find(uuid)).toMatchObject({ powerState: 'RUNNING', console: [expect.stringContaining('booted')] });
  expect(a.notifier.sent.slice(-2).map((n) => n.event_type)).toEqual(['instance.rebuild.start', 'instance.rebuild.end']);
});

test('a STOPPED server is rebuilt and stopped again; a failed spawn is ERROR with the fault; an evacuation is refused, changing nothing', async () => {
  const { a, call } = await setup();
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await call('build_and_run_instance', { instance: inst });
  await call('stop_instance', { instance: { uuid } });
  await call('rebuild_instance', { instance: { uuid }, image_ref: 'img-2' });
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'stopped', task_state: null, power_state: 4, image_ref: 'img-2' });
  expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('SHUTDOWN');

  const err = await call('rebuild_instance', { instance: { uuid }, image_ref: 'img-3', recreate: true }).catch((e: unknown) => e);
  expect(failureFromError(err)).toMatchObject({ className: 'NotImplementedError', message: expect.stringContaining('rebuild_instance with recreate (evacuation)') as string });
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'stopped', task_state: null, image_ref: 'img-2' });

  a.driver.faults.inject('spawn', { error: new Error('image img-4 not found'), times: 1 });
  await call('rebuild_instance', { instance: { uuid }, image_ref: 'img-4' });
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'error', task_state: null, fault: 'rebuild failed: image img-4 not found' });
});

test("nova mode: nova-compute's saves (rebuild_spawning, then ACTIVE with launched_at), the scheduler's view, the action event", async () => {
  const c = new FakeConductor();
  const { a, api, call } = await setup(c);
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  await call('build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, image_ref: 'img-1', flavor: { ...FLAVOR } }) });
  const row = c.instances.get(uuid)!;
  Object.assign(row, { task_state: 'rebuilding', image_ref: 'img-2' });
  c.calls.length = 0;
  await call('rebuild_instance', { instance: c.prim('Instance', row), image_ref: 'img-2', orig_image_ref: 'img-1', recreate: false });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1, image_ref: 'img-2' });
  expect(c.calls.filter((x) => x.what === 'Instance.save').map((x) => [x.changes, x.kwargs?.expected_task_state])).toEqual([
    [['task_state'], ['rebuilding', 'rebuild_block_device_mapping', 'rebuild_spawning']],
    [['power_state', 'vm_state', 'task_state', 'launched_at'], ['rebuild_spawning']],
  ]);
  expect(c.names((x) => x.kind === 'fanout' || x.what.startsWith('InstanceActionEvent'))).toEqual(['InstanceActionEvent.event_start', 'update_instance_info', 'InstanceActionEvent.event_finish_with_failure']);
  expect(a.manager.record(uuid)).toMatchObject({ image_ref: 'img-2' });
});
