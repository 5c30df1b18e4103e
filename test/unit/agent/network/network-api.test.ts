// The network service (nova's allocate_for_instance / deallocate_for_instance /
// get_instance_nw_info) against an in-memory Neutron: what it asks Neutron, the VIFs it builds,
// and that a failed allocation leaves nothing behind.
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NetworkService, type NetworkOwner } from '../../../../agent/network/network-api';
import { NetworkNotConfiguredError, NetworkRequestError, NeutronNotFoundError, NeutronUnavailableError, PortBindingFailedError } from '../../../../agent/network/errors';
import { fixedIps, tapName, vifBridge, vifMtu, type RequestedNetworks } from '../../../../model/network';
import { FakeNeutron } from '../../../helpers/fake-neutron';
import { ManualClock } from '../../../helpers/manual-clock';

const HOST = 'cmp-1';

function setup(): { neutron: FakeNeutron; svc: NetworkService; owner: NetworkOwner; net: string; subnet: string } {
  const neutron = new FakeNeutron();
  neutron.aliveHosts.add(HOST);
  const { network, subnet } = neutron.addNetwork({ name: 'private', mtu: 1442 });
  const svc = new NetworkService({ neutron, host: HOST, logger: silentLogger(), clock: new ManualClock() });
  const owner: NetworkOwner = { uuid: randomUUID(), project_id: 'proj-1', hostname: 'My_VM.one', availability_zone: 'az1' };
  return { neutron, svc, owner, net: network.id, subnet: subnet.id };
}

const on = (...requests: Array<{ network_id: string; address?: string } | { port_id: string }>): RequestedNetworks => ({
  kind: 'list',
  requests: requests.map((r) => ('port_id' in r ? { kind: 'port', port_id: r.port_id } : { kind: 'network', ...r })),
});

/** Ports that still name the instance, or are bound anywhere. */
const leftovers = (n: FakeNeutron, uuid: string): string[] => [...n.ports.values()].filter((p) => p.device_id === uuid || p['binding:host_id'] !== '').map((p) => p.id);

describe('allocate', () => {
  test('on a network: a port is created for the instance on its project, then bound to this host', async () => {
    const { neutron, svc, owner, net } = setup();
    const sg = neutron.addSecurityGroup('web');
    const info = await svc.allocate(owner, on({ network_id: net }), ['web']);
    expect(info).toHaveLength(1);
    const [create] = neutron.callsOf('createPort');
    expect(create).toEqual([{ network_id: net, device_id: owner.uuid, admin_state_up: true, tenant_id: 'proj-1', security_groups: [sg] }]);
    const [update] = neutron.callsOf('updatePort');
    expect(update?.[1]).toEqual({ device_id: owner.uuid, device_owner: 'compute:az1', 'binding:host_id': HOST });
    const port = neutron.ports.get(info[0]?.id ?? '');
    expect(port).toMatchObject({ device_id: owner.uuid, device_owner: 'compute:az1', 'binding:host_id': HOST, 'binding:vif_type': 'ovs', tenant_id: 'proj-1', security_groups: [sg] });
    // The binding comes after the create, and the lookups before it.
    const m = neutron.methods();
    expect(m.indexOf('listNetworks')).toBeLessThan(m.indexOf('createPort'));
    expect(m.indexOf('createPort')).toBeLessThan(m.indexOf('updatePort'));
  });

  test('dns_name is sent only where Neutron has dns-integration, as a DNS label of the host name', async () => {
    const { neutron, svc, owner, net } = setup();
    neutron.aliases.add('dns-integration');
    const [vif] = await svc.allocate(owner, on({ network_id: net }), []);
    expect(neutron.callsOf('updatePort')[0]?.[1]).toMatchObject({ dns_name: 'my-vm-one' });
    expect(neutron.ports.get(vif?.id ?? '')?.dns_name).toBe('my-vm-one');
  });

  test('the VIF model: devname, bridge from vif_details, mtu, subnet with ip/gateway/dns, ovs ids, not active until Neutron says so', async () => {
    const { neutron, svc, owner, net } = setup();
    neutron.vifDetails = { port_filter: true, connectivity: 'l2', bridge_name: 'br-ovn', datapath_type: 'netdev' };
    const [vif] = await svc.allocate(owner, on({ network_id: net }), []);
    if (!vif) throw new Error('no vif');
    const port = neutron.ports.get(vif.id);
    expect(vif).toMatchObject({
      id: port?.id,
      address: port?.mac_address,
      type: 'ovs',
      devname: `tap${vif.id}`.slice(0, 14),
      ovs_interfaceid: vif.id,
      details: { bridge_name: 'br-ovn', datapath_type: 'netdev', port_filter: true },
      active: false,
      preserve_on_delete: false,
      vnic_type: 'normal',
      delegate_create: true,
    });
    expect(vif.devname).toBe(tapName(vif.id));
    expect(vif.devname).toHaveLength(14);
    expect(vifBridge(vif)).toBe('br-ovn');
    expect(vif.network).toMatchObject({ id: net, bridge: 'br-ovn', label: 'private', meta: { mtu: 1442, tenant_id: 'proj-1', tunneled: true } });
    expect(vifMtu(vif)).toBe(1442);
    expect(vif.network.subnets).toHaveLength(1);
    expect(vif.network.subnets[0]).toMatchObject({
      cidr: '10.1.0.0/24',
      version: 4,
      gateway: { address: '10.1.0.1', type: 'gateway' },
      dns: [{ address: '10.1.0.2', type: 'dns' }],
      ips: [{ address: port?.fixed_ips[0]?.ip_address, type: 'fixed', version: 4, floating_ips: [] }],
      meta: { enable_dhcp: true },
    });
  });

  test('a binding that names no bridge gets br-int; an ACTIVE port is active; floating IPs are on their fixed IP', async () => {
    const { neutron, svc, owner } = setup();
    neutron.vifDetails = { port_filter: true, connectivity: 'l2' };
    const { network } = neutron.addNetwork({ mtu: undefined, type: 'vlan' });
    const user = neutron.addPort(network.id, { status: 'ACTIVE' });
    neutron.floatingIps.push({ floating_ip_address: '203.0.113.7', fixed_ip_address: user.fixed_ips[0]?.ip_address ?? null, port_id: user.id });
    const [vif] = await svc.allocate(owner, on({ port_id: user.id }), []);
    if (!vif) throw new Error('no vif');
    expect(vifBridge(vif)).toBe('br-int');
    expect(vif.network.bridge).toBe('br-int');
    expect(vif.network.meta.tunneled).toBe(false);
    expect(vif.active).toBe(true);
    expect(vif.network.subnets[0]?.ips[0]?.floating_ips).toEqual([{ address: '203.0.113.7', type: 'floating', version: 4, meta: {} }]);
  });

  test('with a fixed IP: asked of Neutron and on the VIF', async () => {
    const { neutron, svc, owner, net } = setup();
    const [vif] = await svc.allocate(owner, on({ network_id: net, address: '10.1.0.77' }), []);
    expect(neutron.callsOf('createPort')[0]?.[0]).toMatchObject({ fixed_ips: [{ ip_address: '10.1.0.77' }] });
    expect(vif && fixedIps(vif)).toEqual(['10.1.0.77']);
  });

  test("the user's port: not created, bound to this host for the instance, preserve_on_delete; VIFs in request order", async () => {
    const { neutron, svc, owner, net } = setup();
    const user = neutron.addPort(net, { tenant_id: 'proj-1' });
    const info = await svc.allocate(owner, on({ network_id: net }, { port_id: user.id }), []);
    expect(neutron.callsOf('createPort')).toHaveLength(1);
    expect(info.map((v) => v.preserve_on_delete)).toEqual([false, true]);
    expect(info[1]?.id).toBe(user.id);
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: owner.uuid, device_owner: 'compute:az1', 'binding:host_id': HOST, 'binding:vif_type': 'ovs' });
  });

  test("a port in use by another instance is refused, and nothing is created or changed", async () => {
    const { neutron, svc, owner, net } = setup();
    const other = randomUUID();
    const user = neutron.addPort(net, { device_id: other, device_owner: 'compute:nova' });
    const err = await svc.allocate(owner, on({ network_id: net }, { port_id: user.id }), []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkRequestError);
    expect((err as Error).message).toContain(other);
    expect(neutron.callsOf('createPort')).toEqual([]);
    expect(neutron.callsOf('updatePort')).toEqual([]);
    expect(neutron.ports.get(user.id)?.device_id).toBe(other);
  });

  test('a port that does not exist is a 404 before anything is created', async () => {
    const { neutron, svc, owner, net } = setup();
    await expect(svc.allocate(owner, on({ network_id: net }, { port_id: randomUUID() }), [])).rejects.toBeInstanceOf(NeutronNotFoundError);
    expect(neutron.callsOf('createPort')).toEqual([]);
  });

  test('security groups: names resolved in the project, ids passed through; the lone default is left to Neutron', async () => {
    const { neutron, svc, owner, net } = setup();
    const web = neutron.addSecurityGroup('web');
    const dflt = neutron.addSecurityGroup('default');
    neutron.addSecurityGroup('web', 'other-project');
    const byId = randomUUID();
    await svc.allocate(owner, on({ network_id: net }), ['web', byId, 'default']);
    expect(neutron.callsOf('listSecurityGroups')).toEqual([[{ tenant_id: 'proj-1', name: ['web', 'default'] }]]);
    expect(neutron.callsOf('createPort')[0]?.[0]).toMatchObject({ security_groups: [web, byId, dflt] });

    neutron.calls.length = 0;
    await svc.allocate({ ...owner, uuid: randomUUID() }, on({ network_id: net }), ['default']);
    expect(neutron.callsOf('listSecurityGroups')).toEqual([]);
    expect(neutron.callsOf('createPort')[0]?.[0]).not.toHaveProperty('security_groups');

    neutron.calls.length = 0;
    await svc.allocate({ ...owner, uuid: randomUUID() }, on({ network_id: net }), [byId]);
    expect(neutron.callsOf('listSecurityGroups')).toEqual([]);
    expect(neutron.callsOf('createPort')[0]?.[0]).toMatchObject({ security_groups: [byId] });
  });

  test.each([
    ['unknown', [] as string[], /security group nope not found in project proj-1/],
    ['ambiguous', ['nope', 'nope'], /security group name nope is ambiguous in project proj-1/],
  ])('an %s security group name is a NetworkRequestError, and no port is created', async (_what, existing, message) => {
    const { neutron, svc, owner, net } = setup();
    for (const n of existing) neutron.addSecurityGroup(n);
    const err = await svc.allocate(owner, on({ network_id: net }), ['nope']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkRequestError);
    expect((err as Error).message).toMatch(message);
    expect(neutron.callsOf('createPort')).toEqual([]);
  });

  test('a network Neutron does not know is a NetworkRequestError naming it, and no port is created', async () => {
    const { neutron, svc, owner, net } = setup();
    const missing = randomUUID();
    const err = await svc.allocate(owner, on({ network_id: net }, { network_id: missing }), []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkRequestError);
    expect((err as Error).message).toContain(missing);
    expect(neutron.callsOf('createPort')).toEqual([]);
  });

  test('binding_failed (no network agent on this host): PortBindingFailedError; created ports deleted, the user port unbound', async () => {
    const { neutron, svc, owner, net } = setup();
    neutron.aliveHosts.clear();
    const user = neutron.addPort(net, { 'binding:profile': { allocation: 'rp-1', keep: 'me' } });
    const err = await svc.allocate(owner, on({ port_id: user.id }, { network_id: net }), []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PortBindingFailedError);
    expect((err as Error).message).toMatch(new RegExp(`port ${user.id}: Neutron could not bind it to host ${HOST} \\(binding:vif_type binding_failed\\)`));
    expect(neutron.ports.size).toBe(1);
    expect(leftovers(neutron, owner.uuid)).toEqual([]);
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: '', device_owner: '', 'binding:host_id': '', 'binding:vif_type': 'unbound', 'binding:profile': { keep: 'me' } });
  });

  test('a bind that Neutron cannot answer: every port created for the build is deleted', async () => {
    const { neutron, svc, owner, net } = setup();
    neutron.fail('updatePort', undefined, 1);
    const err = await svc.allocate(owner, on({ network_id: net }, { network_id: net }), []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NeutronUnavailableError);
    expect(neutron.callsOf('createPort')).toHaveLength(2);
    expect(neutron.callsOf('deletePort')).toHaveLength(2);
    expect(neutron.ports.size).toBe(0);
  });

  test('a created port with a resource request (minimum-bandwidth QoS) is refused and deleted', async () => {
    const { neutron, svc, owner, net } = setup();
    neutron.qosNetworks.add(net);
    const err = await svc.allocate(owner, on({ network_id: net }), []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkRequestError);
    expect((err as Error).message).toMatch(/QoS policy with a minimum guarantee/);
    expect(neutron.callsOf('updatePort')).toEqual([]);
    expect(neutron.ports.size).toBe(0);
  });

  test("'auto' is refused clearly, before any request", async () => {
    const { neutron, svc, owner } = setup();
    await expect(svc.allocate(owner, { kind: 'auto' }, [])).rejects.toThrow(/networks 'auto'.*name a network or a port/);
    expect(neutron.calls).toEqual([]);
  });

  test("'none' is no VIF and no request at all, with or without a Neutron", async () => {
    const { neutron, svc, owner } = setup();
    expect(await svc.allocate(owner, { kind: 'none' }, ['web'])).toEqual([]);
    expect(neutron.calls).toEqual([]);
    const bare = new NetworkService({ neutron: undefined, host: HOST, logger: silentLogger(), clock: new ManualClock() });
    expect(await bare.allocate(owner, { kind: 'none' }, [])).toEqual([]);
    expect(bare.configured).toBe(false);
    await expect(bare.allocate(owner, on({ network_id: randomUUID() }), [])).rejects.toBeInstanceOf(NetworkNotConfiguredError);
    await expect(bare.deallocate(owner.uuid, new Set())).resolves.toBeUndefined();
  });

  test('the extension list is read once per TTL', async () => {
    const neutron = new FakeNeutron();
    neutron.aliveHosts.add(HOST);
    const { network } = neutron.addNetwork();
    const clock = new ManualClock();
    const svc = new NetworkService({ neutron, host: HOST, logger: silentLogger(), clock, extensionTtlMs: 600_000 });
    const owner = (): NetworkOwner => ({ uuid: randomUUID(), project_id: 'proj-1', hostname: 'vm', availability_zone: 'nova' });
    await svc.allocate(owner(), on({ network_id: network.id }), []);
    await svc.allocate(owner(), on({ network_id: network.id }), []);
    expect(neutron.callsOf('extensions')).toHaveLength(1);
    clock.advance(600_001);
    await svc.allocate(owner(), on({ network_id: network.id }), []);
    expect(neutron.callsOf('extensions')).toHaveLength(2);
  });
});

describe('deallocate and refresh', () => {
  test("deallocate deletes the instance's ports and unbinds the preserved ones (host keys taken out of the profile); again is a no-op", async () => {
    const { neutron, svc, owner, net } = setup();
    neutron.aliases.add('dns-integration');
    const user = neutron.addPort(net);
    const info = await svc.allocate(owner, on({ network_id: net }, { port_id: user.id }), []);
    neutron.ports.get(user.id)!['binding:profile'] = { allocation: 'rp-uuid', migrating_to: 'cmp-2', pci_slot: '0000:00:01.0', trusted: true };
    const created = info[0]?.id ?? '';
    await svc.deallocate(owner.uuid, new Set([user.id]));
    expect(neutron.ports.has(created)).toBe(false);
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: '', device_owner: '', 'binding:host_id': '', 'binding:vif_type': 'unbound', 'binding:profile': { trusted: true }, dns_name: '' });
    expect(neutron.callsOf('updatePort').at(-1)?.[1]).toEqual({ device_id: '', device_owner: '', 'binding:host_id': null, 'binding:profile': { trusted: true }, dns_name: '' });

    neutron.calls.length = 0;
    await svc.deallocate(owner.uuid, new Set([user.id]));
    expect(neutron.methods()).toEqual(['listPorts']);
  });

  test('deallocate with Neutron failing throws, after trying every port', async () => {
    const { neutron, svc, owner, net } = setup();
    await svc.allocate(owner, on({ network_id: net }, { network_id: net }), []);
    neutron.fail('deletePort', undefined, 1);
    await expect(svc.deallocate(owner.uuid, new Set())).rejects.toBeInstanceOf(NeutronUnavailableError);
    expect(neutron.callsOf('deletePort')).toHaveLength(2);
    expect(neutron.ports.size).toBe(1);
    await svc.deallocate(owner.uuid, new Set());
    expect(neutron.ports.size).toBe(0);
  });

  test('deallocatePort: one port deleted (ours) or unbound (the user\'s), the others untouched; a port already gone is fine', async () => {
    const { neutron, svc, owner, net } = setup();
    const user = neutron.addPort(net);
    const [mine, other, theirs] = await svc.allocate(owner, on({ network_id: net }, { network_id: net }, { port_id: user.id }), []);
    await svc.deallocatePort(owner.uuid, mine?.id ?? '', false);
    await svc.deallocatePort(owner.uuid, theirs?.id ?? '', true);
    expect([...neutron.ports.keys()].sort()).toEqual([other?.id, user.id].sort());
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: '', 'binding:host_id': '', 'binding:vif_type': 'unbound' });
    expect(neutron.ports.get(other?.id ?? '')).toMatchObject({ device_id: owner.uuid, 'binding:host_id': HOST });
    await expect(svc.deallocatePort(owner.uuid, mine?.id ?? '', false)).resolves.toBeUndefined();
    await expect(svc.deallocatePort(owner.uuid, randomUUID(), true)).resolves.toBeUndefined();
    expect(await svc.portIdsOf(owner.uuid)).toEqual([other?.id]);
    neutron.down = true;
    await expect(svc.deallocatePort(owner.uuid, other?.id ?? '', false)).rejects.toBeInstanceOf(NeutronUnavailableError);
    expect(neutron.ports.has(other?.id ?? '')).toBe(true);
  });

  test('refresh keeps the previous order, puts new ports last, keeps preserve_on_delete, and sees new state', async () => {
    const { neutron, svc, owner, net } = setup();
    const user = neutron.addPort(net);
    const before = await svc.allocate(owner, on({ port_id: user.id }, { network_id: net }, { network_id: net }), []);
    const reversed = [...before].reverse();
    // A port attached since (by device_id), and a status change Neutron made.
    const later = neutron.addPort(net, { device_id: owner.uuid });
    neutron.setStatus(user.id, 'ACTIVE');
    const after = await svc.refresh(owner.uuid, reversed);
    expect(after.map((v) => v.id)).toEqual([...reversed.map((v) => v.id), later.id]);
    expect(after.find((v) => v.id === user.id)).toMatchObject({ preserve_on_delete: true, active: true });
    expect(after.filter((v) => v.preserve_on_delete).map((v) => v.id)).toEqual([user.id]);
  });
});
