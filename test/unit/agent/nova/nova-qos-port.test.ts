// Nova mode, a server booted with a minimum-bandwidth port: the scheduler allocated the port's
// bandwidth on the provider Neutron created under this host's root, nova-conductor sends the
// request group -> provider mapping in build_and_run_instance's request_spec, and the build binds
// the port with binding:profile.allocation naming Neutron's provider. Neutron's providers are left
// as Neutron made them.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FakeNeutron } from '../../../helpers/fake-neutron';
import { ManualClock } from '../../../helpers/manual-clock';
import { FLAVOR, InProcessPeers, makeHost, neutronExtras } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

const CTX = { request_id: 'req-nova-qos', is_admin: false };
const FLAVOR_ALLOC = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 };
const BW = { NET_BW_EGR_KILOBIT_PER_SEC: 1000 };

afterEach(() => nock.cleanAll());

const prim = (name: string, version: string, data: Record<string, unknown>): Record<string, unknown> => ({
  'nova_object.name': name,
  'nova_object.namespace': 'nova',
  'nova_object.version': version,
  'nova_object.data': data,
  'nova_object.changes': Object.keys(data),
});

/** One QoS port on br-ex; with `second`, another on br-phys2 asking the same, so only the mapping tells them apart. */
async function world(second = false) {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const c = new FakeConductor();
  const neutron = new FakeNeutron();
  neutron.aliveHosts.add('host-a');
  neutron.aliases.add('port-resource-request-groups');
  const pub = neutron.addNetwork({ name: 'public' }).network.id;
  neutron.qosNetworks.add(pub);
  const groupOf = (p: { resource_request?: unknown }): string => (p.resource_request as { request_groups: Array<{ id: string }> }).request_groups[0]?.id ?? '';
  const port = neutron.addPort(pub);
  const groupId = groupOf(port);
  const port2 = neutron.addPort(pub);
  const groupId2 = groupOf(port2);
  const clock = new ManualClock();
  const cp = new NovaControlPlane({ conductor: c, host: 'host-a', myIp: '192.0.2.10', computeNodeId: () => 1, logger: silentLogger() });
  const a = await makeHost('host-a', api, peers, silentLogger(), cp, neutronExtras('host-a', neutron, clock));

  // neutron-server's placement report, after the agent registered its root provider.
  const agent = randomUUID();
  const bridge = randomUUID();
  const full = (total: number) => ({ total, reserved: 0, min_unit: 1, max_unit: total, step_size: 1, allocation_ratio: 1 });
  await api.createProvider({ uuid: agent, name: 'host-a:OVN Controller agent', parent_provider_uuid: a.rootUuid });
  await api.createProvider({ uuid: bridge, name: 'host-a:OVN Controller agent:br-ex', parent_provider_uuid: agent });
  await api.putInventories(bridge, 0, { NET_BW_EGR_KILOBIT_PER_SEC: full(10000000) });
  await api.ensureTrait('CUSTOM_PHYSNET_PUBLIC');
  await api.putTraits(bridge, 1, ['CUSTOM_PHYSNET_PUBLIC']);
  const bridge2 = randomUUID();
  await api.createProvider({ uuid: bridge2, name: 'host-a:OVN Controller agent:br-phys2', parent_provider_uuid: agent });
  await api.putInventories(bridge2, 0, { NET_BW_EGR_KILOBIT_PER_SEC: full(10000000) });
  const neutronState = (): string => JSON.stringify([agent, bridge, bridge2].map((u) => ({ ...mock.providers.get(u), generation: 0 })));
  const before = neutronState();

  // The scheduler's claim: the flavor on the root, the port's group on Neutron's bridge provider.
  const uuid = randomUUID();
  const allocations = { [a.rootUuid]: { resources: FLAVOR_ALLOC }, [bridge]: { resources: BW }, ...(second ? { [bridge2]: { resources: BW } } : {}) };
  await api.putAllocations(uuid, { allocations, project_id: 'p', user_id: 'u', consumer_generation: null });
  const instance = c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, availability_zone: 'nova', flavor: { ...FLAVOR } });
  const onPort = (id: string): Record<string, unknown> => prim('NetworkRequest', '1.3', { network_id: null, address: null, port_id: id, tag: null });
  const requested = prim('NetworkRequestList', '1.1', { objects: second ? [onPort(port.id), onPort(port2.id)] : [onPort(port.id)] });
  const build = (extra: Record<string, unknown>): Promise<unknown> => peers.call(a.name, 'build_and_run_instance', { instance, requested_networks: requested, ...extra }, CTX);
  return { mock, c, neutron, port, groupId, port2, groupId2, uuid, a, bridge, bridge2, allocations, build, neutronState, before };
}

test("each port's binding:profile.allocation names Neutron's provider of its group, from the request_spec's request group mapping", async () => {
  const { mock, c, neutron, port, groupId, port2, groupId2, uuid, bridge, bridge2, allocations, build, neutronState, before } = await world(true);
  // As nova-conductor sends it: RequestSpec.requested_resources, each RequestGroup with requester_id and provider_uuids.
  const group = (requester: string, provider: string): Record<string, unknown> =>
    prim('RequestGroup', '1.3', {
      use_same_provider: true,
      resources: BW,
      required_traits: ['CUSTOM_PHYSNET_PUBLIC', 'CUSTOM_VNIC_TYPE_NORMAL'],
      forbidden_traits: [],
      aggregates: [],
      forbidden_aggregates: [],
      requester_id: requester,
      provider_uuids: [provider],
      in_tree: null,
    });
  const spec = prim('RequestSpec', '1.14', { flavor: prim('Flavor', '1.2', { ...FLAVOR }), requested_resources: [group(groupId, bridge), group(groupId2, bridge2)], num_instances: 1 });
  await build({ request_spec: spec, security_groups: ['default'] });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active' });
  // Both bridges hold 1000 kbit/s of the instance: only the mapping says which port is where.
  expect(neutron.ports.get(port.id)).toMatchObject({ 'binding:host_id': 'host-a', 'binding:profile': { allocation: { [groupId]: bridge } } });
  expect(neutron.ports.get(port2.id)).toMatchObject({ 'binding:host_id': 'host-a', 'binding:profile': { allocation: { [groupId2]: bridge2 } } });
  // The instance keeps its allocation as the scheduler made it, and Neutron's providers are untouched.
  expect(mock.consumers.get(uuid)?.allocations).toEqual(Object.fromEntries(Object.entries(allocations).map(([rp, v]) => [rp, v.resources])));
  expect(neutronState()).toBe(before);
});

test('the same build without the mapping cannot tell the two ports apart: it fails, the ports unbound', async () => {
  const { c, neutron, port, port2, uuid, build } = await world(true);
  await build({ request_spec: null });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'error' });
  for (const p of [port, port2]) expect(neutron.ports.get(p.id)).toMatchObject({ 'binding:host_id': '', 'binding:profile': {} });
});

test('without a request_spec mapping, the provider is the one among the allocations holding the port\'s bandwidth', async () => {
  const { c, neutron, port, groupId, uuid, bridge, build } = await world();
  await build({ request_spec: null });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active' });
  expect(neutron.ports.get(port.id)?.['binding:profile']).toEqual({ allocation: { [groupId]: bridge } });
});
