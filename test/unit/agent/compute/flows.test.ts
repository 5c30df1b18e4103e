// Compute flows between two managers on a mocked Placement: every step's allocations are checked
// against what the instances hold, moves are single writes, conflicts fail cleanly.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { MockPlacement } from '../../../helpers/mock-placement';
import { FLAVOR, InProcessPeers, instanceArgs, makeHost, type HarnessHost } from '../../../helpers/compute-harness';

const CTX = { request_id: 'req-test' };

async function setup() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const a = await makeHost('host-a', api, peers);
  const b = await makeHost('host-b', api, peers);
  const call = (h: HarnessHost, method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(h.name, method, args, CTX);
  return { mock, api, peers, a, b, call };
}

/** Placement's allocations of every consumer, and what the managers' records say they hold. */
function consumers(mock: MockPlacement): Map<string, Record<string, Record<string, number>>> {
  return new Map([...mock.consumers.entries()].map(([c, v]) => [c, v.allocations]));
}

afterEach(() => nock.cleanAll());

describe('compute flows (mocked Placement)', () => {
  test('spawn without a claim: one PUT with consumer_generation null; the instance is ACTIVE; terminate frees it', async () => {
    const { mock, a, call } = await setup();
    const inst = instanceArgs();
    mock.requests.length = 0;
    await call(a, 'build_and_run_instance', { instance: inst });
    const writes = mock.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatchObject({ method: 'PUT', path: `/allocations/${String(inst.uuid)}` });
    expect((writes[0]?.body as { consumer_generation: unknown }).consumer_generation).toBeNull();
    expect(mock.requests.filter((r) => r.method === 'GET')).toHaveLength(0);
    const rec = a.manager.record(String(inst.uuid));
    expect(rec).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    expect(consumers(mock).get(String(inst.uuid))).toEqual({ [a.rootUuid]: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } });
    expect(a.notifier.sent.map((n) => n.event_type)).toEqual(['instance.create.start', 'instance.create.end']);

    await call(a, 'terminate_instance', { instance: { uuid: inst.uuid } });
    expect(mock.consumers.size).toBe(0);
    expect(a.manager.record(String(inst.uuid))).toBeUndefined();
    expect(await a.driver.listInstances()).toEqual([]);
  });

  test('NovaObject primitives are accepted as a real conductor sends them', async () => {
    const { mock, a, call } = await setup();
    const uuid = randomUUID();
    const prim = (name: string, data: object) => ({ 'nova_object.name': name, 'nova_object.namespace': 'nova', 'nova_object.version': '1.0', 'nova_object.data': data });
    await call(a, 'build_and_run_instance', {
      instance: prim('Instance', { uuid, display_name: 'prim', project_id: 'p', user_id: 'u', flavor: prim('Flavor', { ...FLAVOR, swap: 0 }) }),
      host_list: prim('SelectionList', { objects: [] }),
    });
    expect(mock.consumers.get(uuid)?.allocations[a.rootUuid]).toEqual({ VCPU: 2, MEMORY_MB: 2048, DISK_GB: 10 });
  });

  test('malformed arguments are refused with the argument named', async () => {
    const { a, call } = await setup();
    await expect(call(a, 'build_and_run_instance', { instance: { uuid: 'not-a-uuid', project_id: 'p', user_id: 'u' } })).rejects.toThrow(/instance\.uuid: a UUID/);
    await expect(call(a, 'build_and_run_instance', { instance: { uuid: randomUUID(), project_id: 'p', user_id: 'u', flavor: { vcpus: 'two', memory_mb: 1 } } })).rejects.toThrow(/instance\.flavor\.vcpus/);
  });

  test('a scheduler claim is verified, not rewritten; a claim that does not match fails the build and is removed', async () => {
    const { mock, api, a, call } = await setup();
    const good = instanceArgs();
    await api.putAllocations(String(good.uuid), { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    mock.requests.length = 0;
    await call(a, 'build_and_run_instance', { instance: good, host_list: [{ service_host: 'host-a', allocation_request: '{"allocations": {}}' }] });
    expect(mock.writes()).toEqual([]);
    expect(a.manager.record(String(good.uuid))?.vm_state).toBe('active');

    const bad = instanceArgs();
    await api.putAllocations(String(bad.uuid), { allocations: { [a.rootUuid]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await call(a, 'build_and_run_instance', { instance: bad, host_list: [{ service_host: 'host-a', allocation_request: '{}' }] });
    expect(a.manager.record(String(bad.uuid))).toMatchObject({ vm_state: 'error', fault: expect.stringContaining('does not match the flavor') as string });
    expect(mock.consumers.has(String(bad.uuid))).toBe(false);
  });

  test('an existing consumer without a claim is a hard failure (never overwritten)', async () => {
    const { mock, api, a, call } = await setup();
    const inst = instanceArgs();
    await api.putAllocations(String(inst.uuid), { allocations: { [a.rootUuid]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await call(a, 'build_and_run_instance', { instance: inst });
    expect(a.manager.record(String(inst.uuid))?.vm_state).toBe('error');
    expect(mock.consumers.get(String(inst.uuid))?.allocations[a.rootUuid]).toEqual({ VCPU: 1 });
  });

  test('driver spawn failure frees the allocation (forced delete) and marks ERROR', async () => {
    const { mock, a, call } = await setup();
    a.driver.faults.inject('spawn', { error: new Error('disk full') });
    const inst = instanceArgs();
    await call(a, 'build_and_run_instance', { instance: inst });
    expect(a.manager.record(String(inst.uuid))).toMatchObject({ vm_state: 'error', fault: 'spawn failed: disk full' });
    expect(mock.consumers.has(String(inst.uuid))).toBe(false);
    expect(a.notifier.sent.map((n) => n.event_type)).toContain('instance.create.error');
  });

  test('no room: refused before anything is written', async () => {
    const { mock, a, call } = await setup();
    mock.requests.length = 0;
    const inst = instanceArgs(randomUUID(), { ...FLAVOR, vcpus: 1000 });
    await call(a, 'build_and_run_instance', { instance: inst });
    expect(a.manager.record(String(inst.uuid))?.fault).toMatch(/^no room: not enough VCPU/);
    expect(mock.writes()).toEqual([]);
  });

  test('cold migration a -> b, confirmed: one POST swaps the allocations, confirm empties the migration', async () => {
    const { mock, peers, a, b, call } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call(a, 'build_and_run_instance', { instance: inst });
    const mig = { uuid: randomUUID(), migration_type: 'migration', source_compute: 'host-a', dest_compute: 'host-b' };
    mock.requests.length = 0;
    await call(b, 'prep_resize', { instance: inst, flavor: FLAVOR, migration: mig });
    await peers.settle();
    expect(peers.failures).toEqual([]);
    expect(mock.writes().map((w) => `${w.method} ${w.path}`)).toEqual(['POST /allocations']);
    expect(consumers(mock).get(mig.uuid)).toEqual({ [a.rootUuid]: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } });
    expect(consumers(mock).get(uuid)).toEqual({ [b.rootUuid]: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } });
    expect(b.manager.record(uuid)?.vm_state).toBe('resized');
    expect(a.manager.record(uuid)?.task_state).toBe('resize_migrated');

    mock.requests.length = 0;
    await call(a, 'confirm_resize', { instance: { uuid }, migration: mig });
    await peers.settle();
    expect(mock.writes().map((w) => `${w.method} ${w.path}`)).toEqual([`PUT /allocations/${mig.uuid}`]);
    expect(mock.consumers.has(mig.uuid)).toBe(false);
    expect(a.manager.record(uuid)).toBeUndefined();
    expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect((await b.driver.listInstances()).map((i) => i.uuid)).toEqual([uuid]);
    expect(await a.driver.listInstances()).toEqual([]);
  });

  test('cold migration reverted: the allocations come back in one POST and the source runs again', async () => {
    const { mock, peers, a, b, call } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call(a, 'build_and_run_instance', { instance: inst });
    const mig = { uuid: randomUUID(), migration_type: 'migration', source_compute: 'host-a', dest_compute: 'host-b' };
    await call(b, 'prep_resize', { instance: inst, flavor: FLAVOR, migration: mig });
    await peers.settle();
    mock.requests.length = 0;
    await call(b, 'revert_resize', { instance: { uuid }, migration: mig });
    await peers.settle();
    expect(peers.failures).toEqual([]);
    expect(mock.writes().map((w) => `${w.method} ${w.path}`)).toEqual(['POST /allocations']);
    expect(consumers(mock).get(uuid)).toEqual({ [a.rootUuid]: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } });
    expect(mock.consumers.has(mig.uuid)).toBe(false);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(b.manager.record(uuid)).toBeUndefined();
    expect((await a.driver.listInstances()).map((i) => i.uuid)).toEqual([uuid]);
  });

  test('live migration b -> a: the instance ends ACTIVE on a; the migration consumer is gone', async () => {
    const { mock, peers, a, b, call } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call(b, 'build_and_run_instance', { instance: inst });
    const mig = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: 'host-b', dest_compute: 'host-a' };
    const data = await call(a, 'check_can_live_migrate_destination', { instance: inst, migration: mig, block_migration: false, disk_over_commit: false });
    await call(b, 'live_migration', { instance: { uuid }, dest: 'host-a', migration: mig, migrate_data: data, block_migration: false });
    await peers.settle();
    expect(peers.failures).toEqual([]);
    expect(consumers(mock).get(uuid)).toEqual({ [a.rootUuid]: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } });
    expect(mock.consumers.has(mig.uuid)).toBe(false);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(b.manager.record(uuid)).toBeUndefined();
  });

  test('a check whose migration never came (the control plane gave up after it) is undone by the next check to the same host, which then succeeds', async () => {
    const { mock, peers, a, b, call } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call(b, 'build_and_run_instance', { instance: inst });
    const first = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: 'host-b', dest_compute: 'host-a' };
    await call(a, 'check_can_live_migrate_destination', { instance: inst, migration: first });
    expect(a.manager.record(uuid)?.migration?.uuid).toBe(first.uuid);
    // No live_migration for `first`. A new request for the same host:
    const second = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: 'host-b', dest_compute: 'host-a' };
    const data = await call(a, 'check_can_live_migrate_destination', { instance: inst, migration: second });
    expect(mock.consumers.has(first.uuid)).toBe(false);
    await call(b, 'live_migration', { instance: { uuid }, dest: 'host-a', migration: second, migrate_data: data });
    await peers.settle();
    expect(peers.failures).toEqual([]);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(consumers(mock).get(uuid)).toEqual({ [a.rootUuid]: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } });
    expect(mock.consumers.has(second.uuid)).toBe(false);
  });

  test('a PAUSED server live-migrates paused: PAUSED on the destination, its guest paused there', async () => {
    const { peers, a, b, call } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call(b, 'build_and_run_instance', { instance: inst });
    await call(b, 'pause_instance', { instance: { uuid } });
    const mig = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: 'host-b', dest_compute: 'host-a' };
    const data = await call(a, 'check_can_live_migrate_destination', { instance: { ...inst, vm_state: 'paused' }, migration: mig });
    await call(b, 'live_migration', { instance: { uuid }, dest: 'host-a', migration: mig, migrate_data: data });
    await peers.settle();
    expect(peers.failures).toEqual([]);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'paused', task_state: null, power_state: 3 });
    expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('PAUSED');
    expect(b.manager.record(uuid)).toBeUndefined();
  });

  test('live migration failing in the driver rolls back: source keeps the instance and its allocations', async () => {
    const { mock, peers, a, b, call } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call(b, 'build_and_run_instance', { instance: inst });
    const mig = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: 'host-b', dest_compute: 'host-a' };
    const data = await call(a, 'check_can_live_migrate_destination', { instance: inst, migration: mig });
    b.driver.faults.inject('liveMigration', { error: new Error('connection refused') });
    await call(b, 'live_migration', { instance: { uuid }, dest: 'host-a', migration: mig, migrate_data: data });
    await peers.settle();
    expect(consumers(mock).get(uuid)).toEqual({ [b.rootUuid]: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } });
    expect(mock.consumers.has(mig.uuid)).toBe(false);
    expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(a.manager.record(uuid)).toBeUndefined();
    expect(b.notifier.sent.map((n) => n.event_type)).toContain('instance.live_migration_abort.end');
  });

  test('an outside write to the instance consumer during a migration fails it cleanly, nothing leaked', async () => {
    const { mock, api, peers, a, b, call } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call(a, 'build_and_run_instance', { instance: inst });
    // Someone rewrites the consumer between the manager's read and its POST.
    const realRead = api.consumerAllocations.bind(api);
    api.consumerAllocations = async (c, o) => {
      const r = await realRead(c, o);
      if (c === uuid) {
        await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: r.consumer_generation ?? null });
        api.consumerAllocations = realRead;
      }
      return r;
    };
    const mig = { uuid: randomUUID(), migration_type: 'migration', source_compute: 'host-a', dest_compute: 'host-b' };
    await expect(call(b, 'prep_resize', { instance: inst, flavor: FLAVOR, migration: mig })).rejects.toThrow(/changed by someone else/);
    await peers.settle();
    expect(mock.consumers.has(mig.uuid)).toBe(false);
    expect(Object.keys(consumers(mock).get(uuid) ?? {})).toEqual([a.rootUuid]);
    expect(b.manager.record(uuid)).toBeUndefined();
    expect(b.tracker.claims.has(uuid)).toBe(false);
    expect(a.manager.record(uuid)?.vm_state).toBe('active');
  });

  test('a resize and a delete of one instance sent together are serialized; the end state is consistent', async () => {
    const { mock, peers, a, b, call } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call(a, 'build_and_run_instance', { instance: inst });
    const mig = { uuid: randomUUID(), migration_type: 'migration', source_compute: 'host-a', dest_compute: 'host-b' };
    await call(b, 'prep_resize', { instance: inst, flavor: FLAVOR, migration: mig });
    // resize_instance is queued on host-a; a delete arrives for the same instance at the same time.
    await peers.cast('host-a', 'terminate_instance', { instance: { uuid } }, CTX);
    await peers.settle();
    // Whatever interleaving the queue gave, no allocation of this instance or its migration leaks on a.
    expect([...mock.consumers.keys()].filter((c) => c === mig.uuid)).toEqual([]);
    expect(a.manager.record(uuid)).toBeUndefined();
    expect(Object.keys(consumers(mock).get(uuid) ?? {}).includes(a.rootUuid)).toBe(false);
  });

  test('an operation invalid for the state fails with a clear reason', async () => {
    const { a, call } = await setup();
    const inst = instanceArgs();
    await call(a, 'build_and_run_instance', { instance: inst });
    await expect(call(a, 'confirm_resize', { instance: { uuid: inst.uuid }, migration: { uuid: randomUUID(), source_compute: 'host-a', dest_compute: 'host-b' } })).rejects.toThrow(
      /cannot confirm the resize of instance .* while it is active/,
    );
  });
});
