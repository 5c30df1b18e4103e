// Nova mode: attach_interface and detach_interface write what nova-compute writes through the
// conductor: the action event around each (compute_attach_interface, compute_detach_interface),
// the attached port's VirtualInterface row and the info cache with it, on a detach the row
// destroyed and the cache without it, and on a failure the InstanceFault and the event finished
// with it.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { DriverError } from '../../../../virt-drivers/errors';
import type { Vif } from '../../../../model/network';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FakeNeutron } from '../../../helpers/fake-neutron';
import { ManualClock } from '../../../helpers/manual-clock';
import { FLAVOR, InProcessPeers, makeHost, neutronExtras } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

const CTX = { request_id: 'req-nova-iface', is_admin: false };

afterEach(() => nock.cleanAll());

async function activeInNova() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const c = new FakeConductor();
  const neutron = new FakeNeutron();
  neutron.aliveHosts.add('host-a');
  const net = neutron.addNetwork().network.id;
  const clock = new ManualClock();
  const cp = new NovaControlPlane({ conductor: c, host: 'host-a', myIp: '192.0.2.10', computeNodeId: () => 1, logger: silentLogger() });
  const a = await makeHost('host-a', api, peers, silentLogger(), cp, neutronExtras('host-a', neutron, clock));
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  const instance = c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, availability_zone: 'az1', flavor: { ...FLAVOR } });
  await peers.call(a.name, 'build_and_run_instance', { instance, requested_networks: [{ network_id: net }] }, CTX);
  const first = [...neutron.ports.keys()][0] ?? '';
  // nova sends the Instance as it has it now, and every argument (null where none).
  const inst = (): Record<string, unknown> => c.instance({ ...(c.instances.get(uuid) ?? {}) });
  const attach = (a2: Record<string, unknown>): Promise<Vif> =>
    peers.call<Vif>(a.name, 'attach_interface', { instance: inst(), network_id: null, port_id: null, requested_ip: null, tag: null, ...a2 }, CTX);
  const detach = (port: string): Promise<unknown> => peers.call(a.name, 'detach_interface', { instance: inst(), port_id: port }, CTX);
  const cached = (): string[] => (JSON.parse(String(c.infoCaches.get(uuid))) as Vif[]).map((v) => v.id);
  return { c, a, neutron, net, uuid, first, attach, detach, cached };
}

test('attach writes the VirtualInterface and the info cache with both ports inside the action event; detach destroys the row and saves the cache without it', async () => {
  const { c, neutron, net, uuid, first, attach, detach, cached } = await activeInNova();
  c.calls.length = 0;
  const vif = await attach({ network_id: net });
  const port = neutron.ports.get(vif.id);
  expect(port).toMatchObject({ device_owner: 'compute:az1', tenant_id: 'p' });
  expect(c.names()).toEqual(['InstanceActionEvent.event_start', 'VirtualInterface.create', 'InstanceInfoCache.save', 'InstanceActionEvent.event_finish_with_failure']);
  expect(c.calls[0]?.args).toEqual([uuid, 'compute_attach_interface']);
  expect(c.calls[3]).toMatchObject({ args: [uuid, 'compute_attach_interface'], kwargs: { exc_val: null } });
  expect(c.calls[1]?.data).toMatchObject({ address: `${port?.mac_address}/${vif.id}`, uuid: vif.id, instance_uuid: uuid });
  expect(cached()).toEqual([first, vif.id]);
  expect(c.calls.every((x) => x.ctx.request_id === CTX.request_id)).toBe(true);
  // nova's Instance is not saved: an attach changes no state.
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });

  c.calls.length = 0;
  await detach(vif.id);
  expect(c.names()).toEqual(['InstanceActionEvent.event_start', 'VirtualInterface.get_by_uuid', 'VirtualInterface.destroy', 'InstanceInfoCache.save', 'InstanceActionEvent.event_finish_with_failure']);
  expect(c.calls[0]?.args).toEqual([uuid, 'compute_detach_interface']);
  expect(c.virtualInterfaces.map((v) => v.uuid)).toEqual([first]);
  expect(cached()).toEqual([first]);
  expect(neutron.ports.has(vif.id)).toBe(false);
});

test('a failed attach and a failed detach: InstanceFault with the reason and the event finished with it; nova sees no new port', async () => {
  const { c, a, net, uuid, first, attach, detach, cached } = await activeInNova();
  a.driver.faults.inject('attachInterface', { error: new DriverError('no NIC slot left'), times: 1 });
  c.calls.length = 0;
  await expect(attach({ network_id: net })).rejects.toThrow(/no NIC slot left/);
  expect(c.names()).toEqual(['InstanceActionEvent.event_start', 'InstanceFault.create', 'InstanceActionEvent.event_finish_with_failure']);
  expect(c.faults[0]).toMatchObject({ instance_uuid: uuid, message: expect.stringMatching(/^interface attach failed: Failed to attach network adapter device to .*no NIC slot left/) as unknown });
  expect(c.calls[2]?.kwargs?.exc_val).toBe(c.faults[0]?.message);
  expect(c.virtualInterfaces.map((v) => v.uuid)).toEqual([first]);
  expect(cached()).toEqual([first]);

  a.driver.faults.inject('detachInterface', { error: new DriverError('the guest did not release NIC net0'), times: 1 });
  c.calls.length = 0;
  await expect(detach(first)).rejects.toThrow(/did not release/);
  expect(c.names()).toEqual(['InstanceActionEvent.event_start', 'InstanceFault.create', 'InstanceActionEvent.event_finish_with_failure']);
  expect(c.calls[0]?.args).toEqual([uuid, 'compute_detach_interface']);
  expect(c.virtualInterfaces.map((v) => v.uuid)).toEqual([first]);
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
});
