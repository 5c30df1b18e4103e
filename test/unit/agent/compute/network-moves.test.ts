// Cold migration and resize of a server with ports, through the real method rows, between two
// hosts on a mocked Placement and one in-memory Neutron: the source unplugs with the power off and
// names the ports in finish_resize's instance; the destination binds them to itself before the
// guest starts and plugs them; confirm leaves them bound to the destination only; a revert binds
// them back to the source, which plugs them and waits for their network-vif-plugged.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { withNetworkInfo } from '../../../../agent/compute/decode-network';
import type { ManualClock } from '../../../helpers/manual-clock';
import { instanceArgs, neutronPair } from '../../../helpers/compute-harness';

const CTX = { request_id: 'req-net-move' };
const BIG = { name: 'm1.large', vcpus: 4, memory_mb: 8192, root_gb: 20, ephemeral_gb: 0, swap: 0, extra_specs: {} };

afterEach(() => nock.cleanAll());

/** Until something waits on the manual clock (a wait for network-vif-plugged). */
async function sleepingOnce(clock: ManualClock): Promise<void> {
  for (let i = 0; i < 400 && clock.sleeping === 0; i++) await new Promise((r) => setTimeout(r, 5));
  expect(clock.sleeping).toBe(1);
}

/** An instance with a port built on host-a and resized to host-b; `destAlive: false`: host-b has no chassis, so its bindings fail. */
async function resized(o: { timeoutS?: number; destAlive?: boolean } = {}) {
  const { neutron, net, peers, clock, a, b, call } = await neutronPair({ ...o, ctx: CTX });
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  const build = call(a, 'build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }] });
  if ((o.timeoutS ?? 0) > 0) {
    // The build waits for its port's event, as the revert will.
    await sleepingOnce(clock);
    const [id] = [...neutron.ports.keys()];
    await call(a, 'external_instance_event', { instances: [], events: [{ instance_uuid: uuid, name: 'network-vif-plugged', status: 'completed', tag: id, data: {} }] });
  }
  await build;
  const [port = ''] = [...neutron.ports.keys()];
  expect(a.driver.vifs.plugged.has(port)).toBe(true);
  const mig = { uuid: randomUUID(), migration_type: 'resize', source_compute: 'host-a', dest_compute: 'host-b' };
  await call(b, 'prep_resize', { instance: inst, flavor: BIG, migration: mig });
  await peers.settle();
  expect(peers.failures).toEqual([]);
  return { neutron, peers, clock, a, b, call, uuid, mig, port };
}

test('the destination binds the ports to itself and plugs them; the source unplugged them with the power off', async () => {
  const { neutron, a, b, uuid, port } = await resized();
  expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'resized', task_state: null });
  expect(neutron.ports.get(port)).toMatchObject({ 'binding:host_id': 'host-b', device_id: uuid, 'binding:vif_type': 'ovs' });
  expect(b.manager.record(uuid)?.network_info?.map((v) => v.id)).toEqual([port]);
  expect(b.driver.vifs.plugged.get(port)?.instance).toBe(uuid);
  expect(a.driver.vifs.plugged.has(port)).toBe(false);
  expect(a.driver.vifs.history).toEqual([`plug ${port}`, `unplug ${port}`]);
  // Only the host moves: Neutron 2025.1 lets only the `service` role write binding:profile, so an
  // unchanged profile is not sent.
  const rebind = neutron.callsOf('updatePort').at(-1)?.[1];
  expect(rebind).toEqual({ 'binding:host_id': 'host-b' });
});

test('confirm: the port stays bound to the destination only; the source binding is deleted (gone already: 404)', async () => {
  const { neutron, peers, a, b, call, uuid, mig, port } = await resized();
  await call(a, 'confirm_resize', { instance: { uuid }, migration: mig });
  await peers.settle();
  expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(neutron.ports.get(port)).toMatchObject({ 'binding:host_id': 'host-b' });
  expect(neutron.callsOf('deleteBinding')).toEqual([[port, 'host-a']]);
  expect(a.manager.record(uuid)).toBeUndefined();
  expect(a.driver.vifs.plugged.size).toBe(0);
  expect(b.driver.vifs.plugged.get(port)?.instance).toBe(uuid);
});

test('revert: the port is bound back to the source, plugged there and unplugged at the destination; the revert waits for its network-vif-plugged', async () => {
  const { neutron, peers, clock, a, b, call, uuid, mig, port } = await resized({ timeoutS: 300 });
  await call(b, 'revert_resize', { instance: { uuid }, migration: mig });
  // The source plugged the port and started the guest, and now waits for the event.
  await sleepingOnce(clock);
  expect(neutron.ports.get(port)).toMatchObject({ 'binding:host_id': 'host-a' });
  expect(a.driver.vifs.plugged.get(port)?.instance).toBe(uuid);
  expect(b.driver.vifs.plugged.has(port)).toBe(false);
  expect(a.manager.record(uuid)?.migration).toBeDefined(); // the revert is not over until the event came
  await call(a, 'external_instance_event', { instances: [], events: [{ instance_uuid: uuid, name: 'network-vif-plugged', status: 'completed', tag: port, data: {} }] });
  await peers.settle();
  expect(peers.failures).toEqual([]);
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(a.manager.record(uuid)?.migration).toBeUndefined();
  expect(b.manager.record(uuid)).toBeUndefined();
});

test('a port that cannot be bound on the destination: ERROR with a fault naming it, the guest not started there', async () => {
  const { b, uuid, port } = await resized({ destAlive: false });
  expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'error', task_state: null });
  expect(b.manager.record(uuid)?.fault).toMatch(new RegExp(`could not be bound to host-b: .*${port}`));
  expect(b.driver.vifs.plugged.size).toBe(0);
  expect((await b.driver.listInstances()).map((i) => i.uuid)).not.toContain(uuid);
});

describe('the ports of finish_resize’s instance', () => {
  const vif = { id: randomUUID(), address: 'fa:16:3e:00:00:01' };
  test('a nova Instance primitive carries them in its info cache, as a JSON string', () => {
    const inst = { 'nova_object.name': 'Instance', 'nova_object.namespace': 'nova', 'nova_object.version': '2.8', 'nova_object.data': { uuid: 'u-1', host: 'a' } };
    const out = withNetworkInfo(inst, [vif as never]);
    const cache = (out['nova_object.data'] as Record<string, Record<string, Record<string, unknown>>>).info_cache;
    expect(cache?.['nova_object.name']).toBe('InstanceInfoCache');
    expect(JSON.parse(String(cache?.['nova_object.data']?.network_info))).toEqual([vif]);
    expect(inst['nova_object.data']).not.toHaveProperty('info_cache');
  });
  test('a plain instance carries them as network_info; none adds nothing', () => {
    expect(withNetworkInfo({ uuid: 'u-1' }, [vif as never])).toEqual({ uuid: 'u-1', network_info: [vif] });
    expect(withNetworkInfo({ uuid: 'u-1' }, [])).toEqual({ uuid: 'u-1' });
  });
});

test("a port the user gave stays the user's on the destination: deleted there after the confirm, it is unbound, not deleted", async () => {
  const { neutron, net, peers, a, b, call } = await neutronPair({ ctx: CTX });
  const user = neutron.addPort(net).id;
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await call(a, 'build_and_run_instance', { instance: inst, requested_networks: [{ port_id: user }] });
  const mig = { uuid: randomUUID(), migration_type: 'migration', source_compute: 'host-a', dest_compute: 'host-b' };
  await call(b, 'prep_resize', { instance: inst, flavor: BIG, migration: mig });
  await peers.settle();
  await call(a, 'confirm_resize', { instance: { uuid }, migration: mig });
  await peers.settle();
  expect(peers.failures).toEqual([]);
  expect(b.manager.record(uuid)?.network_info?.map((v) => [v.id, v.preserve_on_delete])).toEqual([[user, true]]);
  await call(b, 'terminate_instance', { instance: { uuid } });
  expect(neutron.ports.get(user)).toMatchObject({ device_id: '', 'binding:host_id': '' });
});
