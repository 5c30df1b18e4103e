// Nova mode against an in-memory conductor that applies nova's rules (only `changes` are
// written, expected_task_state is checked): registration, heartbeats, and the compute flows'
// steps written as nova-compute writes them, on a mocked Placement with scheduler claims.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { NovaService } from '../../../../agent/nova/service';
import type { InstanceRecord } from '../../../../model/instance';
import { ConductorClient } from '../../../../agent/nova/conductor';
import { RemoteError } from '../../../../agent/rpc/oslo/errors';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, InProcessPeers, makeHost, type HarnessHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

const CTX = { request_id: 'req-nova-test', is_admin: false };
const FACTS = { vcpus: 16, memory_mb: 32768, local_gb: 200, cpu_allocation_ratio: 4, ram_allocation_ratio: 1, disk_allocation_ratio: 1, hypervisor_type: 'fake', hypervisor_version: 1000, cpu_info: '{}' };

afterEach(() => nock.cleanAll());

describe('nova service registration', () => {
  const service = (c: FakeConductor): NovaService => new NovaService({ conductor: c, host: 'cmp-1', serviceVersion: 'auto', hostIp: '192.0.2.10', reportIntervalMs: 60_000, logger: silentLogger() });

  test('creates the Service (nova-compute, topic compute, version) and a ComputeNode with our root uuid and real capacity', async () => {
    const c = new FakeConductor();
    const s = service(c);
    expect(await s.register()).toBeUndefined();
    expect(c.services.get('cmp-1/nova-compute')).toMatchObject({ host: 'cmp-1', binary: 'nova-compute', topic: 'compute', report_count: 0, version: 64 });
    const root = randomUUID();
    await s.registerNode(root, FACTS);
    expect(c.nodes.get('cmp-1/cmp-1')).toMatchObject({ uuid: root, host: 'cmp-1', vcpus: 16, memory_mb: 32768, local_gb: 200, vcpus_used: 0, hypervisor_type: 'fake', cpu_info: '{}' });
    expect(c.names()).toEqual(['ping', 'Service.get_minimum_version', 'Service.get_by_host_and_binary', 'Service.create', 'ComputeNode.get_by_host_and_nodename', 'ComputeNode.get_by_host_and_nodename', 'ComputeNode.create']);
  });

  test("adopts the uuid of the ComputeNode nova already has, and updates its capacity", async () => {
    const c = new FakeConductor();
    await service(c).register();
    const existing = randomUUID();
    c.nodes.set('cmp-1/cmp-1', { id: 7, uuid: existing, host: 'cmp-1', hypervisor_hostname: 'cmp-1', vcpus: 1 });
    const s = service(c);
    expect(await s.register()).toBe(existing);
    await s.registerNode(existing, FACTS);
    expect(c.nodes.get('cmp-1/cmp-1')).toMatchObject({ id: 7, uuid: existing, vcpus: 16 });
    expect(c.names((x) => x.kind === 'object')).toEqual(['Service.create', 'ComputeNode.save']);
  });

  test('each heartbeat saves report_count + 1 and nothing else', async () => {
    const c = new FakeConductor();
    const s = service(c);
    await s.register();
    await s.beat();
    await s.beat();
    const saves = c.calls.filter((x) => x.what === 'Service.save');
    expect(saves.map((x) => x.changes)).toEqual([['report_count'], ['report_count']]);
    expect(c.services.get('cmp-1/nova-compute')).toMatchObject({ report_count: 2, last_seen_up: expect.any(String) as string });
  });

  test("a heartbeat waits for its reply at most one report_interval (rpc_response_timeout if shorter), so a lost reply never holds the next beat back", async () => {
    const timeouts = async (reportIntervalMs: number, pingTimeoutMs: number): Promise<unknown[]> => {
      const c = new FakeConductor();
      const s = new NovaService({ conductor: c, host: 'cmp-1', serviceVersion: 'auto', hostIp: '192.0.2.10', reportIntervalMs, pingTimeoutMs, logger: silentLogger() });
      await s.register();
      await s.beat();
      return c.calls.filter((x) => x.what === 'Service.save').map((x) => x.timeoutMs);
    };
    expect(await timeouts(10_000, 60_000)).toEqual([10_000]);
    expect(await timeouts(120_000, 60_000)).toEqual([60_000]);
  });
});

test('usage reports save what changed on the ComputeNode, and nothing when nothing changed', async () => {
  const c = new FakeConductor();
  const s = new NovaService({ conductor: c, host: 'cmp-1', serviceVersion: 'auto', hostIp: '192.0.2.10', reportIntervalMs: 60_000, logger: silentLogger() });
  await s.register();
  await s.registerNode(randomUUID(), FACTS);
  await s.reportUsage({ vcpus_used: 2, memory_mb_used: 2048, local_gb_used: 11, running_vms: 1 });
  await s.reportUsage({ vcpus_used: 2, memory_mb_used: 2048, local_gb_used: 11, running_vms: 1 });
  await s.reportUsage({ vcpus_used: 4, memory_mb_used: 4096, local_gb_used: 22, running_vms: 2 });
  const saves = c.calls.filter((x) => x.what === 'ComputeNode.save');
  expect(saves.map((x) => x.changes)).toEqual([
    ['vcpus_used', 'memory_mb_used', 'local_gb_used', 'running_vms', 'free_ram_mb', 'free_disk_gb'],
    ['vcpus_used', 'memory_mb_used', 'local_gb_used', 'running_vms', 'free_ram_mb', 'free_disk_gb'],
  ]);
  expect(c.nodes.get('cmp-1/cmp-1')).toMatchObject({ vcpus_used: 4, memory_mb_used: 4096, free_ram_mb: 32768 - 4096, running_vms: 2 });
});

describe('compute flows in nova mode', () => {
  async function setup(): Promise<{ c: FakeConductor; api: PlacementClient; mock: MockPlacement; a: HarnessHost; peers: InProcessPeers }> {
    const mock = new MockPlacement().install();
    const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
    const peers = new InProcessPeers();
    const c = new FakeConductor();
    const a = await makeHost('host-a', api, peers, silentLogger(), new NovaControlPlane({ conductor: c, host: 'host-a', myIp: '192.0.2.10', computeNodeId: () => 1, logger: silentLogger() }));
    return { c, api, mock, a, peers };
  }

  test('build: the scheduler claim is verified; nova sees host, node, the task states in order, ACTIVE; events and fanout', async () => {
    const { c, api, mock, a, peers } = await setup();
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    mock.requests.length = 0;
    const instance = c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, flavor: { ...FLAVOR } });
    await peers.call(a.name, 'build_and_run_instance', { instance }, CTX);
    expect(mock.writes()).toEqual([]);
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1, host: 'host-a', node: 'host-a', launched_on: 'host-a', launched_at: expect.any(String) as string });
    const saves = c.calls.filter((x) => x.what === 'Instance.save');
    expect(saves.map((x) => [x.changes, x.kwargs?.expected_task_state])).toEqual([
      [['host', 'node', 'launched_on', 'vm_state', 'task_state'], ['scheduling', null]],
      [['task_state'], [null]],
      [['task_state'], ['networking']],
      [['task_state'], ['block_device_mapping']],
      [['vm_state', 'task_state', 'power_state', 'launched_at'], 'spawning'],
    ]);
    expect(c.names((x) => x.what.startsWith('InstanceActionEvent') || x.kind === 'fanout')).toEqual(['InstanceActionEvent.event_start', 'update_instance_info', 'InstanceActionEvent.event_finish_with_failure']);
    // nova finds the instance action by the request's id: the request context goes to the conductor.
    expect(c.calls.every((x) => x.kind === 'ping' || x.ctx.request_id === 'req-nova-test')).toBe(true);
  });

  test('a scheduler fanout the broker refuses is logged; the ACTIVE save and the action event are still written', async () => {
    const { c, api, a, peers } = await setup();
    c.fanoutError = new Error("PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'scheduler_fanout'");
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await peers.call(a.name, 'build_and_run_instance', { instance: c.instance({ uuid, project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', flavor: { ...FLAVOR } }) }, CTX);
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active' });
    expect(c.names((x) => x.what.startsWith('InstanceActionEvent') || x.kind === 'fanout')).toEqual(['InstanceActionEvent.event_start', 'update_instance_info', 'InstanceActionEvent.event_finish_with_failure']);
  });

  test('a claim that does not match the flavor: ERROR in nova, the claim freed', async () => {
    const { c, api, mock, a, peers } = await setup();
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    const instance = c.instance({ uuid, project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', flavor: { ...FLAVOR } });
    await peers.call(a.name, 'build_and_run_instance', { instance }, CTX);
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'error', task_state: null, host: null, node: null, launched_on: null });
    expect(mock.consumers.has(uuid)).toBe(false);
    // Handed back as nova-compute hands a failed build back: nova-api deletes it without this host.
    expect(a.manager.record(uuid)).toBeUndefined();
    const finish = c.calls.find((x) => x.what === 'InstanceActionEvent.event_finish_with_failure');
    expect(String(finish?.kwargs?.exc_val)).toMatch(/does not match the flavor/);
    // The reason `server show` gives for the ERROR, as nova-compute records it for a failed build.
    expect(c.faults).toEqual([expect.objectContaining({ instance_uuid: uuid, message: expect.stringMatching(/does not match the flavor/) as unknown })]);
  });

  test('a spawn that fails: nova gets ERROR with no host (its delete needs no compute host), the host keeps nothing', async () => {
    const { c, api, mock, a, peers } = await setup();
    a.driver.faults.inject('spawn', { error: new Error('disk full') });
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await peers.call(a.name, 'build_and_run_instance', { instance: c.instance({ uuid, project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', flavor: { ...FLAVOR } }) }, CTX);
    const error = c.calls.filter((x) => x.what === 'Instance.save').at(-1);
    // Zed's Instance (the fake conductor's version) has no compute_id; nova-2025 checks the 2025.1 form.
    expect(error?.changes).toEqual(['host', 'node', 'launched_on', 'vm_state', 'task_state']);
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'error', task_state: null, host: null, node: null });
    expect(c.faults).toEqual([expect.objectContaining({ instance_uuid: uuid, message: expect.stringMatching(/spawn failed: disk full/) as unknown })]);
    expect(a.manager.record(uuid)).toBeUndefined();
    expect(await a.driver.listInstances()).toEqual([]);
    expect(mock.consumers.has(uuid)).toBe(false);
    expect(a.manager.removals.pending()).toEqual([]);
  });

  test('terminate: saved DELETED, destroyed, the scheduler told, the allocation deleted', async () => {
    const { c, api, mock, a, peers } = await setup();
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await peers.call(a.name, 'build_and_run_instance', { instance: c.instance({ uuid, project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', flavor: { ...FLAVOR } }) }, CTX);
    const row = c.instances.get(uuid) ?? {};
    await peers.call(a.name, 'terminate_instance', { instance: c.instance({ ...row, task_state: 'deleting' }) }, CTX);
    expect(c.instances.has(uuid)).toBe(false);
    const tail = c.names().slice(-5);
    expect(tail).toEqual(['InstanceActionEvent.event_start', 'Instance.save', 'Instance.destroy', 'delete_instance_info', 'InstanceActionEvent.event_finish_with_failure']);
    expect(c.calls.find((x) => x.what === 'Instance.save' && x.changes?.includes('terminated_at'))?.changes).toEqual(['vm_state', 'task_state', 'power_state', 'terminated_at']);
    expect(mock.consumers.has(uuid)).toBe(false);
  });
});

test('a step resumed after a restart (no objects from a request) reads the Instance and the Migration from nova, then saves', async () => {
  const c = new FakeConductor();
  const uuid = randomUUID();
  const mig = randomUUID();
  c.instance({ uuid, vm_state: 'active', task_state: 'resize_finish', host: 'host-b' });
  c.migration({ uuid: mig, instance_uuid: uuid, status: 'post-migrating' });
  const cp = new NovaControlPlane({ conductor: c, host: 'host-b', myIp: '192.0.2.11', computeNodeId: () => 2, logger: silentLogger() });
  const rec: InstanceRecord = {
    uuid, name: 'vm', host: 'host-b', vm_state: 'resized', task_state: null, power_state: 1, flavor: FLAVOR, project_id: 'p', user_id: 'u', allocations: {}, updated_at: '',
    migration: { uuid: mig, type: 'migration', status: 'finished', source_compute: 'host-a', dest_compute: 'host-b', role: 'dest' },
  };
  await cp.step(rec, 'resize_finish.end', CTX);
  expect(c.names()).toEqual(['Migration.get_by_uuid', 'Migration.save', 'Instance.get_by_uuid', 'Instance.save']);
  expect(c.migrations.get(mig)?.status).toBe('finished');
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'resized', task_state: null });
});

test('conductor calls that fail on a rolled-back database error are retried; other remote errors are not', async () => {
  const failure = (cls: string): RemoteError => new RemoteError({ className: cls, module: 'sqlalchemy.exc', message: 'database is locked', tb: [], args: [], kwargs: {} });
  const replies: unknown[] = [failure('OperationalError'), failure('OperationalError'), [{ report_count: 1 }, null]];
  let calls = 0;
  const client = {
    call: (): Promise<unknown> => {
      calls++;
      const r = replies.shift();
      return r instanceof Error ? Promise.reject(r) : Promise.resolve(r);
    },
    cast: (): Promise<void> => Promise.resolve(),
  };
  const conductor = new ConductorClient({ client, exchange: 'nova', timeoutMs: 1000, versions: {} });
  const obj = { 'nova_object.name': 'Service', 'nova_object.data': { id: 1 }, 'nova_object.changes': ['report_count'] };
  await expect(conductor.objectAction(CTX, obj, 'save')).resolves.toEqual({ updates: { report_count: 1 }, result: null });
  expect(calls).toBe(3);
  replies.push(failure('UnexpectedTaskStateError'));
  await expect(conductor.objectAction(CTX, obj, 'save')).rejects.toThrow(/Service.save: UnexpectedTaskStateError/);
  expect(calls).toBe(4);
});
