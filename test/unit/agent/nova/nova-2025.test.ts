// Nova mode under a 2025.1 (nova 31) control plane, against the in-memory conductor playing that
// release: the release chosen from what the conductor reports, the manifest every later call
// sends, the Service and ComputeNode as 2025.1 expects them (service_id, host_ip, cpu_info,
// hypervisor_version), and Instance.compute_id written beside node (nova 31 refuses a save of node
// without it on Instance 2.8).
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { createLogger, silentLogger } from '../../../../lib/logging/logger';
import { ConductorClient } from '../../../../agent/nova/conductor';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { EPOXY, ZED, type NovaRelease } from '../../../../agent/nova/releases';
import { NovaRegistrationError, NovaService, type ComputeNodeFacts } from '../../../../agent/nova/service';
import { RpcTimeoutError } from '../../../../agent/rpc/oslo/errors';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { FakeConductor, type FakeConductorOptions } from '../../../helpers/fake-conductor';
import { FLAVOR, InProcessPeers, makeHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

const CTX = { request_id: 'req-2025', is_admin: false };
const CPU_INFO = JSON.stringify({ arch: 'x86_64', model: 'Test CPU', vendor: 'Intel', topology: { cells: 1, sockets: 1, cores: 4, threads: 2 }, features: ['avx', 'sse4.2'] });
const FACTS: ComputeNodeFacts = { vcpus: 8, memory_mb: 16384, local_gb: 100, cpu_allocation_ratio: 4, ram_allocation_ratio: 1, disk_allocation_ratio: 1, hypervisor_type: 'QEMU', hypervisor_version: 7002000, cpu_info: CPU_INFO };

afterEach(() => nock.cleanAll());

function service(c: FakeConductor, serviceVersion: 'auto' | number = 'auto', lines?: string[]): NovaService {
  const logger = lines ? createLogger({ sink: { write: (l) => void lines.push(l) } }).logger : silentLogger();
  return new NovaService({ conductor: c, host: 'cmp-1', serviceVersion, hostIp: '192.0.2.10', reportIntervalMs: 60_000, logger });
}

async function registrationFailure(c: FakeConductor, v: 'auto' | number): Promise<string> {
  const e: unknown = await service(c, v).register().then(() => undefined, (x: unknown) => x);
  if (!(e instanceof NovaRegistrationError)) throw new Error(`expected a NovaRegistrationError, got ${String(e)}`);
  expect(e.cause).toMatchObject({ name: 'ServiceVersionError' });
  return e.message;
}

describe('registration', () => {
  test('auto under a 2025.1 conductor: Service created at 68, the manifest switched to nova 31 before it', async () => {
    const c = new FakeConductor({ release: EPOXY });
    const s = service(c);
    await s.register();
    expect(s.release).toBe(EPOXY);
    expect(c.objectVersions).toBe(EPOXY.objects);
    expect(c.names().slice(0, 4)).toEqual(['ping', 'Service.get_minimum_version', 'Service.get_by_host_and_binary', 'Service.create']);
    expect(c.calls[1]?.args).toEqual(['nova-conductor']);
    expect(c.services.get('cmp-1/nova-compute')).toMatchObject({ version: 68, topic: 'compute' });
  });

  test('auto under a Zed conductor: 64 and Zed objects, as before', async () => {
    const c = new FakeConductor({ release: ZED });
    await service(c).register();
    expect(c.objectVersions).toBe(ZED.objects);
    expect(c.services.get('cmp-1/nova-compute')).toMatchObject({ version: 64 });
  });

  test("an existing Service at Zed's version is saved at 68 once the control plane runs 2025.1 (an upgraded agent)", async () => {
    const c = new FakeConductor({ release: EPOXY });
    c.services.set('cmp-1/nova-compute', { id: 3, host: 'cmp-1', binary: 'nova-compute', version: 64, report_count: 9 });
    await service(c).register();
    expect(c.calls.find((x) => x.what === 'Service.save')?.changes).toEqual(['version']);
    expect(c.services.get('cmp-1/nova-compute')).toMatchObject({ id: 3, version: 68 });
  });

  test('refusals stop registration before any record is written, naming the option', async () => {
    expect(await registrationFailure(new FakeConductor({ release: ZED }), 68)).toMatch(/DEFAULT.nova_service_version = 68 \(2025.1\) but nova-conductor runs service version 64/);
    expect(await registrationFailure(new FakeConductor({ release: EPOXY, conductorVersion: 66 }), 'auto')).toMatch(/runs service version 66 \(2023.1 to 2024.2\)/);
    expect(await registrationFailure(new FakeConductor({ conductorVersion: null }), 'auto')).toMatch(/nova registration failed at service version: .*did not report its service version/);
  });

  test('a configured version registers when the conductor does not answer, and warns when the control plane is newer', async () => {
    const quiet = new FakeConductor({ release: EPOXY, conductorVersion: null });
    await service(quiet, 68).register();
    expect(quiet.services.get('cmp-1/nova-compute')).toMatchObject({ version: 68 });
    const lines: string[] = [];
    const newer = new FakeConductor({ release: EPOXY });
    await service(newer, 64, lines).register();
    expect(newer.services.get('cmp-1/nova-compute')).toMatchObject({ version: 64 });
    expect(lines.some((l) => /"level":"warn"/.test(l) && /newer than the zed \(64\)/.test(l))).toBe(true);
  });
});

describe('the ComputeNode', () => {
  test("created with the Service's id, my_ip, the CPU as libvirt shapes it and the hypervisor version", async () => {
    const c = new FakeConductor({ release: EPOXY });
    const s = service(c);
    await s.register();
    const root = randomUUID();
    await s.registerNode(root, FACTS);
    const serviceId = c.services.get('cmp-1/nova-compute')?.id;
    expect(c.nodes.get('cmp-1/cmp-1')).toMatchObject({ uuid: root, service_id: serviceId, host_ip: '192.0.2.10', cpu_info: CPU_INFO, hypervisor_type: 'QEMU', hypervisor_version: 7002000 });
    expect(s.computeNodeId).toBe(c.nodes.get('cmp-1/cmp-1')?.id);
  });

  test('an existing node without service_id (made before 2023.2) gets it, as nova 31 sets it', async () => {
    const c = new FakeConductor({ release: EPOXY });
    const s = service(c);
    await s.register();
    c.nodes.set('cmp-1/cmp-1', { id: 7, uuid: randomUUID(), host: 'cmp-1', hypervisor_hostname: 'cmp-1', service_id: null, host_ip: '127.0.0.1' });
    await s.registerNode(String(c.nodes.get('cmp-1/cmp-1')?.uuid), FACTS);
    const save = c.calls.find((x) => x.what === 'ComputeNode.save');
    expect(save?.changes).toEqual(expect.arrayContaining(['service_id', 'host_ip', 'cpu_info', 'hypervisor_version']));
    expect(c.nodes.get('cmp-1/cmp-1')).toMatchObject({ id: 7, service_id: c.services.get('cmp-1/nova-compute')?.id, host_ip: '192.0.2.10' });
    // Already right: not written again.
    await s.registerNode(String(c.nodes.get('cmp-1/cmp-1')?.uuid), FACTS);
    expect(c.calls.filter((x) => x.what === 'ComputeNode.save').at(-1)?.changes).not.toContain('service_id');
  });
});

test('the real conductor client sends the chosen release\'s manifest with every class action after the choice', async () => {
  const sent: Array<{ method: string; args: Record<string, unknown> }> = [];
  const replies: Record<string, unknown> = { 'Service.get_minimum_version': 68, 'Service.get_by_host_and_binary': null, 'ComputeNode.get_by_host_and_nodename': null };
  const client = {
    call: (_t: unknown, method: string, args: Record<string, unknown>): Promise<unknown> => {
      sent.push({ method, args });
      if (method === 'ping') return Promise.resolve({});
      if (method === 'object_action') return Promise.resolve([{ id: 1 }, null]);
      return Promise.resolve(replies[`${String(args.objname)}.${String(args.objmethod)}`] ?? null);
    },
    cast: (): Promise<void> => Promise.resolve(),
  };
  const conductor = new ConductorClient({ client, exchange: 'nova', timeoutMs: 1000, versions: ZED.objects });
  await new NovaService({ conductor, host: 'cmp-1', serviceVersion: 'auto', hostIp: '192.0.2.10', reportIntervalMs: 60_000, logger: silentLogger() }).register();
  const classActions = sent.filter((x) => x.method === 'object_class_action_versions');
  expect(classActions.map((x) => [x.args.objmethod, x.args.object_versions])).toEqual([
    ['get_minimum_version', ZED.objects],
    ['get_by_host_and_binary', EPOXY.objects],
    ['get_by_host_and_nodename', EPOXY.objects],
  ]);
  const created = sent.find((x) => x.method === 'object_action')?.args.objinst as Record<string, unknown>;
  expect(created).toMatchObject({ 'nova_object.name': 'Service', 'nova_object.version': '1.22', 'nova_object.data': { version: 68 } });
});

describe.each([{ release: ZED }, { release: EPOXY }])('a build under $release.name', ({ release }: { release: NovaRelease }) => {
  test('host, node and (2025.1 only) compute_id saved together; the scheduler told with objects at the release\'s versions', async () => {
    const mock = new MockPlacement().install();
    const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
    const peers = new InProcessPeers();
    const c = new FakeConductor({ release } satisfies FakeConductorOptions);
    c.useObjectVersions(release.objects);
    const a = await makeHost('host-a', api, peers, silentLogger(), new NovaControlPlane({ conductor: c, host: 'host-a', myIp: '192.0.2.10', computeNodeId: () => 41, logger: silentLogger() }));
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await peers.call(a.name, 'build_and_run_instance', { instance: c.instance({ uuid, project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', flavor: { ...FLAVOR } }) }, CTX);
    const first = c.calls.find((x) => x.what === 'Instance.save');
    const row = c.instances.get(uuid) ?? {};
    expect(row).toMatchObject({ vm_state: 'active', host: 'host-a', node: 'host-a' });
    if (release === EPOXY) {
      expect(first?.changes).toEqual(['host', 'node', 'compute_id', 'launched_on', 'vm_state', 'task_state']);
      expect(row.compute_id).toBe(41);
    } else {
      expect(first?.changes).toEqual(['host', 'node', 'launched_on', 'vm_state', 'task_state']);
      expect('compute_id' in row).toBe(false);
    }
    const fanout = c.calls.find((x) => x.what === 'update_instance_info')?.args?.[0] as { instance_info: Record<string, unknown> };
    expect(fanout.instance_info['nova_object.version']).toBe(release.objects.InstanceList);
  });

  test('a failed build is handed back: host, node (and 2025.1 compute_id) cleared in the ERROR save, which the release takes', async () => {
    const mock = new MockPlacement().install();
    const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
    const peers = new InProcessPeers();
    const c = new FakeConductor({ release } satisfies FakeConductorOptions);
    c.useObjectVersions(release.objects);
    const a = await makeHost('host-a', api, peers, silentLogger(), new NovaControlPlane({ conductor: c, host: 'host-a', myIp: '192.0.2.10', computeNodeId: () => 41, logger: silentLogger() }));
    a.driver.faults.inject('spawn', { error: new Error('disk full') });
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await peers.call(a.name, 'build_and_run_instance', { instance: c.instance({ uuid, project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', flavor: { ...FLAVOR } }) }, CTX);
    const last = c.calls.filter((x) => x.what === 'Instance.save').at(-1);
    expect(last?.changes).toEqual(release === EPOXY ? ['host', 'node', 'compute_id', 'launched_on', 'vm_state', 'task_state'] : ['host', 'node', 'launched_on', 'vm_state', 'task_state']);
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'error', host: null, node: null, ...(release === EPOXY ? { compute_id: null } : {}) });
    expect(a.manager.record(uuid)).toBeUndefined();
  });
});

test("nova 31's rule, which the fake conductor applies: node saved without compute_id on Instance 2.8 is refused", async () => {
  const c = new FakeConductor({ release: EPOXY });
  const inst = c.instance({ uuid: randomUUID(), node: null });
  const save = { ...inst, 'nova_object.data': { ...(inst['nova_object.data'] as object), node: 'x' }, 'nova_object.changes': ['node'] };
  await expect(c.objectAction(CTX, save, 'save')).rejects.toThrow(/ObjectActionError: Instance.node is being updated/);
});

describe('waiting for a conductor', () => {
  test('a ping that times out is logged and sent again; registration completes when a conductor answers', async () => {
    const c = new FakeConductor({ release: EPOXY });
    let timeouts = 2;
    const answer = c.ping.bind(c);
    c.ping = (ctx) => (timeouts-- > 0 ? Promise.reject(new RpcTimeoutError('ping', `m${timeouts}`, 30_000, false)) : answer(ctx));
    const lines: string[] = [];
    await service(c, 'auto', lines).register();
    expect(c.services.get('cmp-1/nova-compute')).toMatchObject({ version: 68 });
    const waits = lines.filter((l) => l.includes('timed out waiting for nova-conductor'));
    expect(waits.map((l) => (JSON.parse(l) as { attempt: number }).attempt)).toEqual([1, 2]);
  });

  test('a ping refused for another reason ends registration at once', async () => {
    const c = new FakeConductor({ release: EPOXY });
    c.ping = () => Promise.reject(new Error('broker closed the channel'));
    const e: unknown = await service(c).register().then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(NovaRegistrationError);
    expect((e as Error).message).toBe('nova registration failed at ping: broker closed the channel');
  });
});
