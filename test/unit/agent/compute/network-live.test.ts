// Live migration of a server with ports, through the real method rows, between two hosts on a
// mocked Placement and one in-memory Neutron with the binding-extended extension: the destination
// binds the ports to itself INACTIVE with migrating_to and plugs them before the guest arrives;
// once it runs there the source activates that binding, unplugs, and deletes its own binding; a
// failure anywhere before that leaves the ports on the source, with nothing of the destination's.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { instanceArgs, neutronPair } from '../../../helpers/compute-harness';

const CTX = { request_id: 'req-net-live' };

afterEach(() => nock.cleanAll());

/** A server on host-a with one port of its own and one the user gave; `destAlive: false`: host-b has no chassis. */
async function onHostA(o: { destAlive?: boolean } = {}) {
  const { mock, neutron, net, peers, a, b, call } = await neutronPair({ ...o, ctx: CTX });
  const user = neutron.addPort(net).id;
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await call(a, 'build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }, { port_id: user }] });
  const ports = [...neutron.ports.keys()];
  const own = ports.find((p) => p !== user) ?? '';
  expect(a.manager.record(uuid)?.network_info?.map((v) => v.id)).toEqual([own, user]);
  const mig = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: 'host-a', dest_compute: 'host-b' };
  const migrate = async (): Promise<void> => {
    const data = await call(b, 'check_can_live_migrate_destination', { instance: inst, migration: mig, block_migration: false, disk_over_commit: false });
    await call(a, 'live_migration', { instance: { uuid }, dest: 'host-b', migration: mig, migrate_data: data, block_migration: false });
    await peers.settle();
  };
  return { mock, neutron, peers, a, b, call, uuid, own, user, migrate };
}

test('the ports move: bound to the destination (its binding active), migrating_to gone, plugged there only; the source binding deleted; a delete there still unbinds the user port', async () => {
  const { neutron, peers, a, b, call, uuid, own, user, migrate } = await onHostA();
  await migrate();
  expect(peers.failures).toEqual([]);
  expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(a.manager.record(uuid)).toBeUndefined();
  for (const port of [own, user]) {
    expect(neutron.ports.get(port)).toMatchObject({ 'binding:host_id': 'host-b', 'binding:vif_type': 'ovs', device_id: uuid });
    expect(neutron.ports.get(port)?.['binding:profile']).not.toHaveProperty('migrating_to');
    expect(neutron.bindings.get(`${port}/host-b`)?.status).toBe('ACTIVE');
    expect(b.driver.vifs.plugged.get(port)?.instance).toBe(uuid);
  }
  expect(a.driver.vifs.plugged.size).toBe(0);
  // The destination made its binding (no conductor did), then named itself in migrating_to.
  expect(neutron.callsOf('createBinding').map((c) => (c[1] as { host: string }).host)).toEqual(['host-b', 'host-b']);
  expect(neutron.callsOf('updatePort').filter((c) => (c[1] as Record<string, Record<string, unknown>>)['binding:profile']?.migrating_to === 'host-b')).toHaveLength(2);
  expect(neutron.callsOf('deleteBinding')).toEqual([
    [own, 'host-a'],
    [user, 'host-a'],
  ]);
  expect(b.manager.record(uuid)?.network_info?.map((v) => [v.id, v.preserve_on_delete])).toEqual([
    [own, false],
    [user, true],
  ]);
  await call(b, 'terminate_instance', { instance: { uuid } });
  expect([...neutron.ports.keys()]).toEqual([user]);
  expect(neutron.ports.get(user)).toMatchObject({ device_id: '', 'binding:host_id': '' });
  expect(b.driver.vifs.plugged.size).toBe(0);
});

test("a binding nova's conductor made already is the one used: none is made again", async () => {
  const { neutron, peers, b, own, user, migrate } = await onHostA();
  for (const port of [own, user]) await neutron.createBinding(port, { host: 'host-b', vnic_type: 'normal', profile: {} });
  await migrate();
  expect(peers.failures).toEqual([]);
  expect(neutron.callsOf('createBinding')).toHaveLength(2); // the two above
  expect(b.driver.vifs.plugged.size).toBe(2);
});

test('a failed migration leaves the ports on the source: the destination binding deleted, migrating_to gone, nothing plugged there', async () => {
  const { neutron, peers, a, b, uuid, own, user, migrate } = await onHostA();
  a.driver.faults.inject('liveMigration', { error: new Error('connection refused') });
  await migrate();
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(b.manager.record(uuid)).toBeUndefined();
  for (const port of [own, user]) {
    expect(neutron.ports.get(port)).toMatchObject({ 'binding:host_id': 'host-a' });
    expect(neutron.ports.get(port)?.['binding:profile']).not.toHaveProperty('migrating_to');
    expect(neutron.bindings.has(`${port}/host-b`)).toBe(false);
    expect(a.driver.vifs.plugged.get(port)?.instance).toBe(uuid);
  }
  expect(b.driver.vifs.plugged.size).toBe(0);
  expect(peers.failures).toEqual([]);
});

test('a destination Neutron cannot bind the ports to (no network agent there): the move fails before QEMU starts, nothing of it is left', async () => {
  const { neutron, a, b, uuid, own, user, migrate } = await onHostA({ destAlive: false });
  await migrate();
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(b.manager.record(uuid)).toBeUndefined();
  expect((await b.driver.listInstances()).map((i) => i.uuid)).not.toContain(uuid);
  for (const port of [own, user]) {
    expect(neutron.bindings.has(`${port}/host-b`)).toBe(false);
    expect(neutron.ports.get(port)).toMatchObject({ 'binding:host_id': 'host-a' });
  }
  expect(a.notifier.sent.map((n) => n.event_type)).toContain('instance.live_migration_abort.end');
});
