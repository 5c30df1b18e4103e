// soft_delete_instance, restore_instance and the periodic reclaim in nova mode (fake driver,
// mocked Placement, the in-memory conductor with nova's rules). The test plays nova-api's part:
// it sets soft-deleting or restoring, then casts. Everything else must come from the agent: the
// guest off with its allocation kept while SOFT_DELETED, on again after a restore, and after
// reclaim_instance_interval the server deleted for good (guest, record, allocation, Instance).
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { silentLogger } from '../../../../lib/logging/logger';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, InProcessPeers, makeHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-soft-delete', is_admin: true };
const RES = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 };
const HOUR = 3600;

async function world(reclaimIntervalS: number) {
  let skewMs = 0;
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const c = new FakeConductor();
  const a = await makeHost('host-a', api, peers, silentLogger(), new NovaControlPlane({ conductor: c, host: 'host-a', myIp: '192.0.2.1', computeNodeId: () => 1, logger: silentLogger() }), {
    reclaimIntervalS,
    now: () => Date.now() + skewMs,
  });
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  await peers.call(a.name, 'build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', flavor: { ...FLAVOR } }) }, CTX);
  /** nova's API: the task state set, then the cast with the Instance as it now is. */
  const cast = async (method: string, task: string): Promise<void> => {
    const row = c.instances.get(uuid)!;
    row.task_state = task;
    await peers.call(a.name, method, { instance: c.prim('Instance', row) }, CTX);
  };
  const later = (s: number): void => void (skewMs += s * 1000);
  return { c, mock, a, uuid, cast, later };
}

test("soft delete: the guest off at once, SOFT_DELETED with its allocation; restore: running again, ACTIVE; nova's saves and action events", async () => {
  const { c, mock, a, uuid, cast } = await world(HOUR);
  c.calls.length = 0;
  await cast('soft_delete_instance', 'soft-deleting');
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'soft-delete', task_state: null, power_state: 4, host: 'host-a' });
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'soft-delete', task_state: null, soft_deleted_at: expect.any(String) });
  expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('SHUTDOWN');
  expect(mock.consumers.has(uuid)).toBe(true);

  await cast('restore_instance', 'restoring');
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
  expect(a.manager.record(uuid)?.soft_deleted_at).toBeUndefined();
  expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('RUNNING');
  expect(mock.consumers.has(uuid)).toBe(true);

  const saves = c.calls.filter((x) => x.what === 'Instance.save').map((x) => [x.changes, x.kwargs?.expected_task_state]);
  expect(saves).toEqual([
    [['power_state', 'vm_state', 'task_state'], ['soft-deleting']],
    [['power_state', 'vm_state', 'task_state'], 'restoring'],
  ]);
  const evs = c.calls.filter((x) => x.what.startsWith('InstanceActionEvent')).map((x) => `${x.what.split('.')[1]}:${String(x.args?.[1])}`);
  expect(evs).toEqual(['soft_delete', 'restore'].flatMap((m) => [`event_start:compute_${m}_instance`, `event_finish_with_failure:compute_${m}_instance`]));
  expect(c.faults).toEqual([]);
});

test('the reclaim deletes a server soft-deleted longer than reclaim_instance_interval, and only such a one', async () => {
  const { c, mock, a, uuid, cast, later } = await world(HOUR);
  expect(await a.manager.softDeletes.reclaimExpired(CTX)).toBe(0); // ACTIVE: never
  await cast('soft_delete_instance', 'soft-deleting');
  later(HOUR - 5);
  expect(await a.manager.softDeletes.reclaimExpired(CTX)).toBe(0); // not yet due
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'soft-delete' });
  later(10);
  c.calls.length = 0;
  expect(await a.manager.softDeletes.reclaimExpired(CTX)).toBe(1);
  expect(a.manager.record(uuid)).toBeUndefined();
  expect(await a.driver.listInstances()).toEqual([]);
  expect(mock.consumers.has(uuid)).toBe(false);
  // nova's delete: DELETED, then the Instance destroyed.
  expect(c.calls.filter((x) => x.what === 'Instance.save').at(-1)?.changes).toEqual(expect.arrayContaining(['vm_state', 'task_state']));
  expect(c.names((x) => x.what === 'Instance.destroy')).toEqual(['Instance.destroy']);
  expect(c.instances.has(uuid)).toBe(false);
});

test('a restored server is not reclaimed; soft-deleted again, the interval counts from the second soft delete', async () => {
  const { a, uuid, cast, later } = await world(HOUR);
  await cast('soft_delete_instance', 'soft-deleting');
  later(HOUR / 2);
  await cast('restore_instance', 'restoring');
  later(HOUR);
  expect(await a.manager.softDeletes.reclaimExpired(CTX)).toBe(0);
  await cast('soft_delete_instance', 'soft-deleting');
  later(HOUR / 2);
  expect(await a.manager.softDeletes.reclaimExpired(CTX)).toBe(0);
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'soft-delete' });
});

test('reclaim_instance_interval 0: soft-deleted servers stay until deleted or restored', async () => {
  const { a, uuid, cast, later } = await world(0);
  await cast('soft_delete_instance', 'soft-deleting');
  later(30 * 24 * HOUR);
  expect(await a.manager.softDeletes.reclaimExpired(CTX)).toBe(0);
  // A user's force delete is nova's terminate_instance.
  await cast('terminate_instance', 'deleting');
  expect(a.manager.record(uuid)).toBeUndefined();
});

test('a driver failure: the task cleared, the state kept, the fault recorded; a restore of a server that is not soft-deleted is refused', async () => {
  const { c, a, uuid, cast } = await world(HOUR);
  await expect(cast('restore_instance', 'restoring')).rejects.toMatchObject({ name: 'InvalidStateError' });
  a.driver.faults.inject('powerOff', { error: new Error('the monitor did not answer'), times: 1 });
  await cast('soft_delete_instance', 'soft-deleting');
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, fault: 'soft delete failed: the monitor did not answer' });
  expect(c.faults).toEqual([expect.objectContaining({ instance_uuid: uuid, message: expect.stringContaining('the monitor did not answer') })]);
  expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('RUNNING');
});
