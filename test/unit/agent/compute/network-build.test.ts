// Builds and deletes with networks, through the real method rows, on a mocked Placement and an
// in-memory Neutron: ports bound before the spawn, the guest held until network-vif-plugged
// (external_instance_event), the vif_plugging_* options, the ports given back on failure and on
// delete, and the events that change an ACTIVE instance's network.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { MockPlacement } from '../../../helpers/mock-placement';
import { FakeNeutron } from '../../../helpers/fake-neutron';
import { ManualClock } from '../../../helpers/manual-clock';
import { InProcessPeers, instanceArgs, makeHost, neutronExtras, type HarnessHost } from '../../../helpers/compute-harness';

const CTX = { request_id: 'req-net' };
const HOST = 'host-a';

async function setup(o: { timeoutS?: number; fatal?: boolean } = {}) {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const neutron = new FakeNeutron();
  neutron.aliveHosts.add(HOST);
  const net = neutron.addNetwork({ name: 'private' }).network.id;
  const clock = new ManualClock();
  const waits: string[] = [];
  const onWait = (outcome: string): number => waits.push(outcome);
  const host = await makeHost(HOST, api, peers, silentLogger(), undefined, neutronExtras(HOST, neutron, clock, { timeoutS: o.timeoutS ?? 300, fatal: o.fatal ?? true, onWait }));
  const call = (method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(HOST, method, args, CTX);
  const event = (uuid: string, name: string, tag: string | null, status = 'completed'): Promise<unknown> =>
    call('external_instance_event', { instances: [], events: [{ instance_uuid: uuid, name, status, tag, data: {} }] });
  return { mock, neutron, net, clock, host, call, event, waits };
}

const until = async (cond: () => boolean, what = 'condition'): Promise<void> => {
  for (let i = 0; i < 400 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!cond()) throw new Error(`${what} not reached`);
};

/** Guests that run (or ran): a guest held PAUSED for its ports' events has not run yet. */
const guests = async (h: HarnessHost): Promise<string[]> => (await h.driver.listInstances()).filter((i) => i.powerState !== 'PAUSED').map((i) => i.uuid);
/** Ports that still belong to `uuid` in Neutron, or are bound to a host. */
const held = (n: FakeNeutron, uuid: string): string[] => [...n.ports.values()].filter((p) => p.device_id === uuid || p['binding:host_id'] !== '').map((p) => p.id);

afterEach(() => nock.cleanAll());

describe('build with a network', () => {
  test('the guest waits for network-vif-plugged of its port, delivered through external_instance_event; then ACTIVE with the VIF', async () => {
    const { neutron, net, clock, host, call, event, waits } = await setup();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    let done = false;
    const build = call('build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }], security_groups: ['default'] }).then(() => (done = true));
    await until(() => clock.sleeping === 1, 'the wait for network-vif-plugged');
    const [port] = [...neutron.ports.values()];
    if (!port) throw new Error('no port');
    expect(port).toMatchObject({ device_id: uuid, device_owner: 'compute:nova', 'binding:host_id': HOST, 'binding:vif_type': 'ovs', tenant_id: 'proj-1' });
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'building', task_state: 'spawning' });
    expect(host.manager.record(uuid)?.network_info?.map((v) => v.id)).toEqual([port.id]);
    // Held before the guest runs: the fake driver keeps it PAUSED.
    expect(await guests(host)).toEqual([]);

    // An event for another port, or for the port but another name, does not release it.
    await event(uuid, 'network-vif-plugged', randomUUID());
    await event(uuid, 'network-vif-unplugged', port.id);
    await new Promise((r) => setTimeout(r, 20));
    expect(done).toBe(false);

    await event(uuid, 'network-vif-plugged', port.id);
    await build;
    expect(waits).toEqual(['completed']); // the metrics' vif_plug_wait_seconds
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'active', task_state: null });
    expect(rec?.network_info).toHaveLength(1);
    expect(rec?.network_info?.[0]).toMatchObject({ id: port.id, address: port.mac_address, devname: `tap${port.id}`.slice(0, 14), type: 'ovs', preserve_on_delete: false });
    expect(await guests(host)).toEqual([uuid]);
    // The VIFs are saved with the record (a restarted agent knows what to plug and give back).
    expect(host.store.get<{ network_info?: Array<{ id: string }> }>('instance', uuid)?.network_info?.map((v) => v.id)).toEqual([port.id]);
  });

  test('a port Neutron already has ACTIVE is not waited for', async () => {
    const { neutron, net, clock, host, call } = await setup();
    const user = neutron.addPort(net, { status: 'ACTIVE' });
    const inst = instanceArgs();
    await call('build_and_run_instance', { instance: inst, requested_networks: [{ port_id: user.id }] });
    expect(clock.sleeping).toBe(0);
    expect(host.manager.record(String(inst.uuid))).toMatchObject({ vm_state: 'active', preserved_ports: [user.id] });
  });

  test('no network-vif-plugged within vif_plugging_timeout (fatal): ERROR naming the port, port deleted, allocation gone, nothing spawned', async () => {
    const { mock, neutron, net, clock, host, call } = await setup({ timeoutS: 300, fatal: true });
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    const build = call('build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }] });
    await until(() => clock.sleeping === 1);
    const portId = [...neutron.ports.keys()][0] ?? '';
    expect(mock.consumers.has(uuid)).toBe(true);
    clock.advance(299_000);
    await new Promise((r) => setTimeout(r, 20));
    expect(host.manager.record(uuid)?.vm_state).toBe('building');
    clock.advance(1_000);
    await build;
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'error', task_state: null });
    expect(rec?.fault).toMatch(new RegExp(`^network failed: no network-vif-plugged from Neutron within 300 s for port ${portId} of instance ${uuid}`));
    expect(neutron.ports.size).toBe(0);
    expect(mock.consumers.has(uuid)).toBe(false);
    expect(await guests(host)).toEqual([]);
    expect(rec?.network_info ?? []).toEqual([]);
  });

  test('timeout with vif_plugging_is_fatal false: the guest runs anyway, ACTIVE', async () => {
    const { neutron, net, clock, host, call } = await setup({ timeoutS: 30, fatal: false });
    const inst = instanceArgs();
    const build = call('build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }] });
    await until(() => clock.sleeping === 1);
    clock.advance(30_000);
    await build;
    expect(host.manager.record(String(inst.uuid))).toMatchObject({ vm_state: 'active' });
    expect(neutron.ports.size).toBe(1);
    expect(await guests(host)).toEqual([String(inst.uuid)]);
  });

  test('network-vif-plugged with status failed: ERROR at once, ports given back, user port unbound not deleted', async () => {
    const { mock, neutron, net, clock, host, call, event } = await setup();
    const user = neutron.addPort(net);
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    const build = call('build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }, { port_id: user.id }] });
    await until(() => clock.sleeping === 1);
    await event(uuid, 'network-vif-plugged', user.id, 'failed');
    await build;
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'error' });
    expect(rec?.fault).toMatch(new RegExp(`network failed: Neutron reported port ${user.id} of instance ${uuid} as failed to plug`));
    expect([...neutron.ports.keys()]).toEqual([user.id]);
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: '', 'binding:host_id': '' });
    expect(mock.consumers.has(uuid)).toBe(false);
    expect(await guests(host)).toEqual([]);
  });

  test("Neutron down while ports are made: ERROR 'network failed: ...', allocations removed, nothing held in Neutron", async () => {
    const { mock, neutron, net, host, call } = await setup();
    neutron.fail('createPort');
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call('build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }] });
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'error', task_state: null });
    expect(rec?.fault).toMatch(/^network failed: .*Neutron unavailable: connect ECONNREFUSED/);
    expect(mock.consumers.has(uuid)).toBe(false);
    expect(held(neutron, uuid)).toEqual([]);
    expect(await guests(host)).toEqual([]);
  });

  test('binding_failed (no network agent on this host): ERROR naming the port and host; created port deleted', async () => {
    const { mock, neutron, net, host, call } = await setup();
    neutron.aliveHosts.clear();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await call('build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }] });
    expect(host.manager.record(uuid)?.fault).toMatch(new RegExp(`^network failed: port \\S+: Neutron could not bind it to host ${HOST}`));
    expect(neutron.ports.size).toBe(0);
    expect(mock.consumers.has(uuid)).toBe(false);
  });
});

describe('delete and events of an instance with networks', () => {
  async function active(o: { userPort?: boolean } = {}) {
    const s = await setup({ timeoutS: 0 });
    const user = o.userPort ? s.neutron.addPort(s.net) : undefined;
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await s.call('build_and_run_instance', { instance: inst, requested_networks: [{ network_id: s.net }, ...(user ? [{ port_id: user.id }] : [])] });
    expect(s.host.manager.record(uuid)?.vm_state).toBe('active');
    return { ...s, uuid, user };
  }

  test('terminate deletes the ports made for the instance and unbinds the user port', async () => {
    const { mock, neutron, host, call, uuid, user } = await active({ userPort: true });
    expect(neutron.ports.size).toBe(2);
    await call('terminate_instance', { instance: { uuid } });
    expect([...neutron.ports.keys()]).toEqual([user?.id]);
    expect(neutron.ports.get(user?.id ?? '')).toMatchObject({ device_id: '', device_owner: '', 'binding:host_id': '', 'binding:vif_type': 'unbound' });
    expect(host.manager.record(uuid)).toBeUndefined();
    expect(mock.consumers.has(uuid)).toBe(false);
  });

  test("terminate with Neutron down: ERROR (delete.error), not stuck in 'deleting'; asked again once Neutron is back, it completes", async () => {
    const { mock, neutron, host, call, uuid } = await active();
    neutron.down = true;
    await expect(call('terminate_instance', { instance: { uuid } })).rejects.toThrow(/Neutron unavailable/);
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'error', task_state: null });
    expect(rec?.fault).toMatch(/^network failed: .*Neutron unavailable/);
    expect(neutron.ports.size).toBe(1);
    neutron.heal();
    await call('terminate_instance', { instance: { uuid } });
    expect(host.manager.record(uuid)).toBeUndefined();
    expect(neutron.ports.size).toBe(0);
    expect(mock.consumers.has(uuid)).toBe(false);
  });

  test('a build refused before its network step (no room) does not ask Neutron', async () => {
    const { neutron, net, host, call } = await setup();
    const uuid = randomUUID();
    await call('build_and_run_instance', { instance: instanceArgs(uuid, { name: 'huge', vcpus: 100000, memory_mb: 1, root_gb: 0 }), requested_networks: [{ network_id: net }] });
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'error' });
    expect(host.manager.record(uuid)?.fault).toMatch(/^no room: /);
    expect(neutron.calls).toEqual([]);
  });

  test('a server built without networks is deleted while Neutron is down: Neutron is not asked', async () => {
    const { mock, neutron, host, call } = await setup();
    const uuid = randomUUID();
    await call('build_and_run_instance', { instance: instanceArgs(uuid), requested_networks: [{ network_id: 'none' }] });
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', network_info: [] });
    neutron.down = true;
    const before = neutron.calls.length;
    await call('terminate_instance', { instance: { uuid } });
    expect(host.manager.record(uuid)).toBeUndefined();
    expect(mock.consumers.has(uuid)).toBe(false);
    expect(neutron.calls.length).toBe(before);
  });

  test('network-changed re-reads the ports into record.network_info', async () => {
    const { neutron, host, event, uuid } = await active();
    const portId = host.manager.record(uuid)?.network_info?.[0]?.id ?? '';
    expect(host.manager.record(uuid)?.network_info?.[0]?.active).toBe(false);
    neutron.setStatus(portId, 'ACTIVE');
    neutron.floatingIps.push({ floating_ip_address: '203.0.113.9', fixed_ip_address: neutron.ports.get(portId)?.fixed_ips[0]?.ip_address ?? null, port_id: portId });
    await event(uuid, 'network-changed', portId);
    await until(() => host.manager.record(uuid)?.network_info?.[0]?.active === true, 'the refreshed network_info');
    expect(host.manager.record(uuid)?.network_info?.[0]?.network.subnets[0]?.ips[0]?.floating_ips?.map((f) => f.address)).toEqual(['203.0.113.9']);
  });

  test('network-vif-deleted drops that VIF from record.network_info', async () => {
    const { host, event, uuid, user } = await active({ userPort: true });
    expect(host.manager.record(uuid)?.network_info).toHaveLength(2);
    await event(uuid, 'network-vif-deleted', user?.id ?? '');
    await until(() => host.manager.record(uuid)?.network_info?.length === 1, 'the VIF dropped');
    expect(host.manager.record(uuid)?.network_info?.map((v) => v.id)).not.toContain(user?.id);
  });

  test('an event for an instance nobody waits for is accepted and ignored', async () => {
    const { event, host, uuid } = await active();
    await expect(event(randomUUID(), 'network-vif-plugged', randomUUID())).resolves.toBeUndefined();
    expect(host.manager.record(uuid)?.vm_state).toBe('active');
  });
});

describe('a build resumed after an interruption', () => {
  /** An ACTIVE instance put back to `task` as a build interrupted there leaves it (the guest the first try made is still there). */
  async function interrupted(task: 'networking' | 'spawning', timeoutS = 0) {
    const s = await setup({ timeoutS });
    const user = s.neutron.addPort(s.net);
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    const args = { instance: inst, requested_networks: [{ network_id: s.net }, { port_id: user.id }] };
    s.neutron.setStatus(user.id, 'ACTIVE');
    const first = s.call('build_and_run_instance', args);
    if (timeoutS > 0) {
      await until(() => s.clock.sleeping === 1);
      const created = [...s.neutron.ports.keys()].find((id) => id !== user.id) ?? '';
      await s.event(uuid, 'network-vif-plugged', created);
    }
    await first;
    const rec = s.host.manager.record(uuid);
    if (!rec) throw new Error('no record');
    await s.host.store.put('instance', uuid, { ...rec, vm_state: 'building', task_state: task, launched_at: null });
    return { ...s, uuid, user, args, firstPort: rec.network_info?.[0]?.id ?? '' };
  }

  test('in networking: what the first try bound is given back, then bound anew; no stray port, the user port kept', async () => {
    const { neutron, host, call, uuid, user, args, firstPort } = await interrupted('networking');
    await call('build_and_run_instance', args);
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'active', task_state: null });
    expect(neutron.ports.has(firstPort)).toBe(false);
    const mine = [...neutron.ports.values()].filter((p) => p.device_id === uuid);
    expect(mine.map((p) => p.id).sort()).toEqual(rec?.network_info?.map((v) => v.id).sort());
    expect(mine).toHaveLength(2);
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: uuid, 'binding:host_id': HOST });
    expect(await guests(host)).toEqual([uuid]);
  });

  test('in spawning with the guest there (left paused by the interrupted try): it is started again and runs without waiting, as after a restart', async () => {
    const { clock, host, call, uuid } = await interrupted('spawning', 300);
    await call('build_and_run_instance', { instance: { uuid, display_name: 'x', project_id: 'proj-1', user_id: 'user-1', flavor: host.manager.record(uuid)?.flavor } });
    expect(clock.sleeping).toBe(0);
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active' });
    expect(await guests(host)).toEqual([uuid]);
  });
});
