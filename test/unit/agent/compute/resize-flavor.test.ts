// Resize to a different flavor (prep_resize with the new flavor) between two managers on a mocked
// Placement: the destination claims the new flavor in the same write that moves the old one to
// the migration; confirm leaves exactly the new flavor on the destination, revert exactly the old
// one on the source, and the records and drivers say the same.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { MockPlacement } from '../../../helpers/mock-placement';
import { FLAVOR, InProcessPeers, instanceArgs, makeHost, type HarnessHost } from '../../../helpers/compute-harness';

const CTX = { request_id: 'req-resize-flavor' };
const BIG = { name: 'm1.large', vcpus: 4, memory_mb: 8192, root_gb: 20, ephemeral_gb: 0, swap: 0, extra_specs: {} };
const OLD = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 };
const NEW = { VCPU: 4, MEMORY_MB: 8192, DISK_GB: 20 };

afterEach(() => nock.cleanAll());

async function resized() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const a = await makeHost('host-a', api, peers);
  const b = await makeHost('host-b', api, peers);
  const call = (h: HarnessHost, method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(h.name, method, args, CTX);
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await call(a, 'build_and_run_instance', { instance: inst });
  const mig = { uuid: randomUUID(), migration_type: 'resize', source_compute: 'host-a', dest_compute: 'host-b' };
  mock.requests.length = 0;
  await call(b, 'prep_resize', { instance: inst, flavor: BIG, migration: mig });
  await peers.settle();
  expect(peers.failures).toEqual([]);
  const allocations = (c: string): unknown => mock.consumers.get(c)?.allocations;
  return { mock, peers, a, b, call, uuid, mig, allocations };
}

test('the new flavor is claimed on the destination in the one write that moves the old one to the migration', async () => {
  const { mock, a, b, uuid, mig, allocations } = await resized();
  expect(mock.writes().map((w) => `${w.method} ${w.path}`)).toEqual(['POST /allocations']);
  expect(allocations(uuid)).toEqual({ [b.rootUuid]: NEW });
  expect(allocations(mig.uuid)).toEqual({ [a.rootUuid]: OLD });
  expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'resized', flavor: BIG });
  expect(b.driver.hypervisor.find(uuid)?.flavor).toMatchObject({ vcpus: 4, memory_mb: 8192 });
});

test('confirm: the new flavor alone, on the destination; the source copy and the migration consumer gone', async () => {
  const { mock, peers, a, b, call, uuid, mig, allocations } = await resized();
  await call(a, 'confirm_resize', { instance: { uuid }, migration: mig });
  await peers.settle();
  expect(allocations(uuid)).toEqual({ [b.rootUuid]: NEW });
  expect(mock.consumers.has(mig.uuid)).toBe(false);
  expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, flavor: BIG });
  expect(a.manager.record(uuid)).toBeUndefined();
  expect(await a.driver.listInstances()).toEqual([]);
});

test('revert: the old flavor alone, on the source, running it again; nothing of the new flavor left', async () => {
  const { mock, peers, a, b, call, uuid, mig, allocations } = await resized();
  await call(b, 'revert_resize', { instance: { uuid }, migration: mig });
  await peers.settle();
  expect(peers.failures).toEqual([]);
  expect(allocations(uuid)).toEqual({ [a.rootUuid]: OLD });
  expect(mock.consumers.has(mig.uuid)).toBe(false);
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, flavor: FLAVOR });
  expect(a.driver.hypervisor.find(uuid)).toMatchObject({ powerState: 'RUNNING', flavor: { vcpus: 2 } });
  expect(b.manager.record(uuid)).toBeUndefined();
  expect(await b.driver.listInstances()).toEqual([]);
});
