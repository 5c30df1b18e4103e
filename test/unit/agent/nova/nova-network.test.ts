// Nova mode with networks: nova's records of an instance's ports written through the conductor as
// nova-compute writes them (a VirtualInterface per port, the InstanceInfoCache nova-api reads the
// addresses from), and emptied on delete.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import type { Vif } from '../../../../model/network';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FakeNeutron } from '../../../helpers/fake-neutron';
import { ManualClock } from '../../../helpers/manual-clock';
import { FLAVOR, InProcessPeers, makeHost, neutronExtras } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

const CTX = { request_id: 'req-nova-net', is_admin: false };

afterEach(() => nock.cleanAll());

const prim = (name: string, version: string, data: Record<string, unknown>): Record<string, unknown> => ({
  'nova_object.name': name,
  'nova_object.namespace': 'nova',
  'nova_object.version': version,
  'nova_object.data': data,
  'nova_object.changes': Object.keys(data),
});

test('a networked build writes a VirtualInterface per port and the info cache; delete removes the rows and empties the cache', async () => {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const c = new FakeConductor();
  const neutron = new FakeNeutron();
  neutron.aliveHosts.add('host-a');
  const net = neutron.addNetwork().network.id;
  const user = neutron.addPort(net);
  const clock = new ManualClock();
  const cp = new NovaControlPlane({ conductor: c, host: 'host-a', myIp: '192.0.2.10', computeNodeId: () => 1, logger: silentLogger() });
  const a = await makeHost('host-a', api, peers, silentLogger(), cp, neutronExtras('host-a', neutron, clock));

  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  const instance = c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, availability_zone: 'az1', flavor: { ...FLAVOR } });
  const requested = prim('NetworkRequestList', '1.1', {
    objects: [prim('NetworkRequest', '1.3', { network_id: net, address: null, port_id: null, tag: null }), prim('NetworkRequest', '1.3', { network_id: null, address: null, port_id: user.id, tag: null })],
  });
  await peers.call(a.name, 'build_and_run_instance', { instance, requested_networks: requested, security_groups: ['default'] }, CTX);
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active' });

  const created = [...neutron.ports.values()].find((p) => p.id !== user.id);
  if (!created) throw new Error('no port created');
  expect(created).toMatchObject({ device_id: uuid, device_owner: 'compute:az1', tenant_id: 'p' });
  const ports = [created, neutron.ports.get(user.id) ?? user];

  const vifCreates = c.calls.filter((x) => x.what === 'VirtualInterface.create');
  expect(vifCreates.map((x) => x.data)).toEqual(ports.map((p) => expect.objectContaining({ address: `${p.mac_address}/${p.id}`, uuid: p.id, instance_uuid: uuid }) as unknown));
  expect(c.virtualInterfaces.map((v) => v.address)).toEqual(ports.map((p) => `${p.mac_address}/${p.id}`));
  // nova-network's integer network_id is not nullable: nova-conductor refuses None, so it is left unset.
  expect(vifCreates.every((x) => x.data !== undefined && !('network_id' in x.data))).toBe(true);

  const cacheSave = c.calls.find((x) => x.what === 'InstanceInfoCache.save');
  expect(cacheSave?.changes).toEqual(['network_info']);
  expect(typeof cacheSave?.data?.network_info).toBe('string');
  const cached = JSON.parse(String(c.infoCaches.get(uuid))) as Vif[];
  expect(cached.map((v) => [v.id, v.address, v.preserve_on_delete])).toEqual(ports.map((p) => [p.id, p.mac_address, p.id === user.id]));
  expect(cached[0]?.network.subnets[0]?.ips[0]?.address).toBe(created.fixed_ips[0]?.ip_address);
  // The records are written while the build is in task networking, before nova sees it ACTIVE.
  const names = c.names();
  const active = c.calls.findIndex((x) => x.what === 'Instance.save' && x.changes?.includes('launched_at'));
  expect(names.indexOf('VirtualInterface.create')).toBeLessThan(names.indexOf('InstanceInfoCache.save'));
  expect(names.indexOf('InstanceInfoCache.save')).toBeLessThan(active);
  expect(c.calls.filter((x) => x.what.startsWith('VirtualInterface') || x.what.startsWith('InstanceInfoCache')).every((x) => x.ctx.request_id === 'req-nova-net')).toBe(true);

  const row = c.instances.get(uuid) ?? {};
  await peers.call(a.name, 'terminate_instance', { instance: c.instance({ ...row, task_state: 'deleting' }) }, CTX);
  expect(c.instances.has(uuid)).toBe(false);
  const del = c.calls.filter((x) => x.what === 'VirtualInterface.delete_by_instance_uuid');
  expect(del.map((x) => x.args)).toEqual([[uuid]]);
  expect(c.virtualInterfaces).toEqual([]);
  expect(JSON.parse(String(c.infoCaches.get(uuid)))).toEqual([]);
  expect([...neutron.ports.keys()]).toEqual([user.id]);
  // nova's order: the ports and their records go before the Instance is destroyed.
  const after = c.names();
  expect(after.lastIndexOf('VirtualInterface.delete_by_instance_uuid')).toBeLessThan(after.indexOf('Instance.destroy'));
});
