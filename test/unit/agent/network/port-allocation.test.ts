// binding:profile.allocation for ports with a resource request (minimum-bandwidth QoS): the value
// nova would send for each of Neutron's two request shapes, from nova's request group mapping or,
// without one, from the instance's allocations; and the binding the network service makes with it.
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NetworkService, type NetworkOwner } from '../../../../agent/network/network-api';
import { NeutronResponseError, PortAllocationError } from '../../../../agent/network/errors';
import type { NeutronPort } from '../../../../agent/network/neutron-api';
import { bindingAllocation, movedProfile, portResourceRequest } from '../../../../agent/network/port-allocation';
import type { RequestedNetworks } from '../../../../model/network';
import { FakeNeutron } from '../../../helpers/fake-neutron';
import { ManualClock } from '../../../helpers/manual-clock';

const ROOT = '00000000-0000-4000-8000-0000000000a0';
const BR_EX = '00000000-0000-4000-8000-0000000000b1';
const BR_PHYS2 = '00000000-0000-4000-8000-0000000000b2';
const OVN_AGENT = '00000000-0000-4000-8000-0000000000b0';
const FLAVOR = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 10 };
const BW = { NET_BW_EGR_KILOBIT_PER_SEC: 1000, NET_BW_IGR_KILOBIT_PER_SEC: 1000 };

const port = (resource_request: unknown, over: Partial<NeutronPort> = {}): NeutronPort => ({
  id: randomUUID(),
  network_id: 'n',
  mac_address: 'fa:16:3e:00:00:01',
  fixed_ips: [],
  device_id: '',
  device_owner: '',
  status: 'DOWN',
  admin_state_up: true,
  tenant_id: 'p',
  'binding:host_id': '',
  'binding:vif_type': 'unbound',
  'binding:vif_details': {},
  'binding:vnic_type': 'normal',
  'binding:profile': {},
  resource_request,
  ...over,
});
const group = (id: string, resources: Record<string, number>) => ({ id, required: ['CUSTOM_PHYSNET_PUBLIC', 'CUSTOM_VNIC_TYPE_NORMAL'], resources });

describe('bindingAllocation', () => {
  test('no resource request (absent, null, {}, or no request group): no allocation key', () => {
    for (const r of [undefined, null, {}, { request_groups: [], same_subtree: [] }]) expect(bindingAllocation(port(r), { allocations: {} })).toBeUndefined();
  });

  test("extended (port-resource-request-groups): {group id: provider} from nova's mapping, one per group", () => {
    const bw = randomUUID();
    const pps = randomUUID();
    const p = port({ request_groups: [group(bw, BW), group(pps, { NET_PACKET_RATE_KILOPACKET_PER_SEC: 100 })], same_subtree: [bw, pps] });
    const mapping = { [bw]: [BR_EX], [pps]: [OVN_AGENT] };
    expect(bindingAllocation(p, { allocations: {}, providerMapping: mapping })).toEqual({ [bw]: BR_EX, [pps]: OVN_AGENT });
  });

  test("legacy ({resources, required}): the provider's uuid, from the mapping keyed by the port's id", () => {
    const p = port({ resources: BW, required: ['CUSTOM_PHYSNET_PUBLIC'] });
    expect(bindingAllocation(p, { allocations: {}, providerMapping: { [p.id]: [BR_EX] } })).toBe(BR_EX);
  });

  test("without a mapping: the one provider among the instance's allocations holding the whole group", () => {
    const bw = randomUUID();
    const pps = randomUUID();
    const p = port({ request_groups: [group(bw, BW), group(pps, { NET_PACKET_RATE_KILOPACKET_PER_SEC: 100 })], same_subtree: [bw, pps] });
    // Two ports' bandwidth on one bridge: the provider holds more than this port asks; still the one.
    const allocations = { [ROOT]: FLAVOR, [BR_EX]: { NET_BW_EGR_KILOBIT_PER_SEC: 3000, NET_BW_IGR_KILOBIT_PER_SEC: 2000 }, [OVN_AGENT]: { NET_PACKET_RATE_KILOPACKET_PER_SEC: 100 } };
    expect(bindingAllocation(p, { allocations })).toEqual({ [bw]: BR_EX, [pps]: OVN_AGENT });
    // A mapping that lacks a group: that group falls back, the other follows the mapping.
    expect(bindingAllocation(p, { allocations, providerMapping: { [pps]: [OVN_AGENT] } })).toEqual({ [bw]: BR_EX, [pps]: OVN_AGENT });
    const legacy = port({ resources: BW, required: [] });
    expect(bindingAllocation(legacy, { allocations })).toBe(BR_EX);
  });

  test('without a mapping, no holder or two holders: PortAllocationError naming the port and the group', () => {
    const id = randomUUID();
    const p = port({ request_groups: [group(id, BW)], same_subtree: [id] });
    const none = (): unknown => bindingAllocation(p, { allocations: { [ROOT]: FLAVOR } });
    expect(none).toThrow(PortAllocationError);
    expect(none).toThrow(new RegExp(`port ${p.id}: .*group ${id} in binding:profile.allocation: no provider in the instance's allocations holds 1000 NET_BW_EGR_KILOBIT_PER_SEC, 1000 NET_BW_IGR_KILOBIT_PER_SEC`));
    const two = (): unknown => bindingAllocation(p, { allocations: { [ROOT]: FLAVOR, [BR_EX]: BW, [BR_PHYS2]: BW } });
    expect(two).toThrow(/each hold .* no request group mapping/);
  });

  test('a resource request of neither shape is an unexpected answer from Neutron', () => {
    expect(() => portResourceRequest(port({ request_groups: [{ resources: BW }] }))).toThrow(NeutronResponseError);
    expect(() => portResourceRequest(port('1000kbps'))).toThrow(NeutronResponseError);
  });
});

describe('NetworkService.allocate with a minimum-bandwidth port', () => {
  const HOST = 'cmp-1';
  function setup() {
    const neutron = new FakeNeutron();
    neutron.aliveHosts.add(HOST);
    neutron.aliases.add('port-resource-request-groups');
    const net = neutron.addNetwork({ name: 'public' }).network.id;
    const svc = new NetworkService({ neutron, host: HOST, logger: silentLogger(), clock: new ManualClock() });
    const owner: NetworkOwner = { uuid: randomUUID(), project_id: 'proj-1', hostname: 'vm', availability_zone: 'nova' };
    return { neutron, net, svc, owner };
  }
  const ports = (...ids: string[]): RequestedNetworks => ({ kind: 'list', requests: ids.map((port_id) => ({ kind: 'port', port_id })) });

  test("the user's port is bound with binding:profile.allocation naming Neutron's provider; other profile keys stay", async () => {
    const { neutron, net, svc, owner } = setup();
    neutron.qosNetworks.add(net);
    const qos = neutron.addPort(net, { 'binding:profile': { trusted: true } });
    neutron.qosNetworks.delete(net);
    const plain = neutron.addPort(net);
    const groupId = (qos.resource_request as { request_groups: Array<{ id: string }> }).request_groups[0]?.id ?? '';
    await svc.allocate(owner, ports(qos.id, plain.id), [], { allocations: { [ROOT]: FLAVOR, [BR_EX]: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 } }, providerMapping: { [groupId]: [BR_EX] } });
    expect(neutron.ports.get(qos.id)?.['binding:profile']).toEqual({ trusted: true, allocation: { [groupId]: BR_EX } });
    const updates = neutron.callsOf('updatePort');
    expect(updates.find(([id]) => id === qos.id)?.[1]).toMatchObject({ 'binding:host_id': HOST, 'binding:profile': { trusted: true, allocation: { [groupId]: BR_EX } } });
    // A port without a request is bound as before: no profile in the update.
    expect(updates.find(([id]) => id === plain.id)?.[1]).not.toHaveProperty('binding:profile');
    // Given back, the port loses the allocation key (nova's _unbind_ports) and keeps the rest.
    await svc.deallocate(owner.uuid, new Set([qos.id, plain.id]));
    expect(neutron.ports.get(qos.id)?.['binding:profile']).toEqual({ trusted: true });
  });

  test('a port whose request cannot be tied to a provider fails the allocation before anything is written to Neutron', async () => {
    const { neutron, net, svc, owner } = setup();
    const other = neutron.addNetwork({ name: 'private' }).network.id;
    neutron.qosNetworks.add(net);
    const qos = neutron.addPort(net);
    const err = await svc.allocate(owner, { kind: 'list', requests: [{ kind: 'network', network_id: other }, { kind: 'port', port_id: qos.id }] }, [], { allocations: { [ROOT]: FLAVOR } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PortAllocationError);
    expect(neutron.callsOf('createPort')).toEqual([]);
    expect(neutron.callsOf('updatePort')).toEqual([]);
    expect(neutron.ports.get(qos.id)).toMatchObject({ 'binding:host_id': '', 'binding:profile': {} });
  });
});

describe('a moved port (cold migration, revert): the allocation re-pointed at this host', () => {
  const DEST_ROOT = '00000000-0000-4000-8000-0000000000c0';
  const DEST_BR_EX = '00000000-0000-4000-8000-0000000000c1';
  const group = randomUUID();
  const qos = (profile: Record<string, unknown>): NeutronPort =>
    port({ request_groups: [{ id: group, resources: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 }, required: [] }], same_subtree: [group] }, { 'binding:profile': profile });
  const here = { allocations: { [DEST_ROOT]: FLAVOR, [DEST_BR_EX]: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 } } };

  test("the source's provider becomes this host's; migrating_to goes, other keys stay", () => {
    const untied: string[] = [];
    const out = movedProfile(qos({ allocation: { [group]: BR_EX }, migrating_to: 'b', trusted: true }), here, (r) => untied.push(r));
    expect(out).toEqual({ 'binding:profile': { allocation: { [group]: DEST_BR_EX }, trusted: true } });
    expect(untied).toEqual([]);
  });

  test('already right, or a port without a request: only migrating_to, if any, changes', () => {
    expect(movedProfile(qos({ allocation: { [group]: DEST_BR_EX } }), here, () => undefined)).toEqual({});
    expect(movedProfile(port(undefined, { 'binding:profile': { migrating_to: 'b' } }), here, () => undefined)).toEqual({ 'binding:profile': {} });
  });

  test('a request no single provider here holds keeps the old allocation, and says why', () => {
    const untied: string[] = [];
    const out = movedProfile(qos({ allocation: { [group]: BR_EX } }), { allocations: { [DEST_ROOT]: FLAVOR } }, (r) => untied.push(r));
    expect(out).toEqual({});
    expect(untied).toHaveLength(1);
    expect(untied[0]).toMatch(/no provider in the instance's allocations holds 1000 NET_BW_EGR_KILOBIT_PER_SEC/);
  });
});
