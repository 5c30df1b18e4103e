// attach_interface and detach_interface through the real method rows, on a mocked Placement, an
// in-memory Neutron and the fake driver: the port made (or the user's taken over) and bound to this
// host, the NIC given to the driver, the VIF returned and recorded; every failure undone and
// raised in nova's form with the instance's fault; a detach that deletes the agent's port and
// unbinds the user's; a guest that keeps its NIC; an unknown port; arguments refused by name.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NovaError } from '../../../../agent/rpc/oslo/errors';
import { DriverError } from '../../../../virt-drivers/errors';
import type { Vif } from '../../../../model/network';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { MockPlacement } from '../../../helpers/mock-placement';
import { FakeNeutron } from '../../../helpers/fake-neutron';
import { ManualClock } from '../../../helpers/manual-clock';
import { InProcessPeers, instanceArgs, makeHost, neutronExtras } from '../../../helpers/compute-harness';

const CTX = { request_id: 'req-iface' };
const HOST = 'host-a';

afterEach(() => nock.cleanAll());

/** An ACTIVE instance with one port of its own, on a host with a Neutron. */
async function active() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const neutron = new FakeNeutron();
  neutron.aliveHosts.add(HOST);
  const net = neutron.addNetwork({ name: 'private' }).network.id;
  const other = neutron.addNetwork({ name: 'other' }).network.id;
  const clock = new ManualClock();
  const host = await makeHost(HOST, api, peers, silentLogger(), undefined, neutronExtras(HOST, neutron, clock));
  const call = (method: string, args: Record<string, unknown>, ctx = CTX): Promise<unknown> => peers.call(HOST, method, args, ctx);
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await call('build_and_run_instance', { instance: inst, requested_networks: [{ network_id: net }] });
  const first = host.manager.record(uuid)?.network_info?.[0]?.id ?? '';
  const attach = (a: Record<string, unknown>, ctx = CTX): Promise<Vif> =>
    peers.call<Vif>(HOST, 'attach_interface', { instance: { uuid, availability_zone: 'az1' }, network_id: null, port_id: null, requested_ip: null, tag: null, ...a }, ctx);
  const detach = (port: string): Promise<unknown> => call('detach_interface', { instance: { uuid }, port_id: port });
  const ports = (): string[] => (host.manager.record(uuid)?.network_info ?? []).map((v) => v.id);
  const events = (): string[] => host.notifier.sent.map((n) => n.event_type).filter((e) => e.startsWith('instance.interface_'));
  return { neutron, net, other, host, call, uuid, first, attach, detach, ports, events };
}

/** What a rejected promise was rejected with, as nova's failure. */
async function novaFailure(p: Promise<unknown>): Promise<NovaError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof NovaError)) throw new Error(`expected a NovaError, got ${String(e)}`);
  return e;
}

describe('attach_interface', () => {
  test('by network: a port made with the fixed IP asked for, owned by the instance, bound here; the driver has the NIC; the VIF is returned and recorded', async () => {
    const { neutron, other, host, uuid, first, attach, ports, events } = await active();
    const vif = await attach({ network_id: other, requested_ip: '10.2.0.50' });
    const port = neutron.ports.get(vif.id);
    expect(port).toMatchObject({ network_id: other, device_id: uuid, device_owner: 'compute:az1', tenant_id: 'proj-1', 'binding:host_id': HOST, 'binding:vif_type': 'ovs' });
    expect(port?.fixed_ips.map((f) => f.ip_address)).toEqual(['10.2.0.50']);
    expect(vif).toMatchObject({ id: vif.id, address: port?.mac_address, type: 'ovs', preserve_on_delete: false, network: { id: other, label: 'other' } });
    expect(vif.network.subnets[0]?.ips[0]?.address).toBe('10.2.0.50');
    expect(ports()).toEqual([first, vif.id]);
    expect(host.driver.vifs.of(uuid).sort()).toEqual([first, vif.id].sort());
    expect(host.driver.hypervisor.find(uuid)?.vifs?.map((v) => v.id)).toEqual([first, vif.id]);
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(host.manager.record(uuid)?.interface_attach).toBeUndefined();
    expect(events()).toEqual(['instance.interface_attach.start', 'instance.interface_attach.end']);
  });

  test('to a STOPPED instance: recorded with the driver, no state change; the next start plugs it', async () => {
    const { other, host, call, uuid, attach, ports } = await active();
    await call('stop_instance', { instance: { uuid } });
    const vif = await attach({ network_id: other });
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'stopped', task_state: null });
    expect(ports()).toContain(vif.id);
    expect(host.driver.hypervisor.find(uuid)?.vifs?.map((v) => v.id)).toContain(vif.id);
    await call('start_instance', { instance: { uuid } });
    expect(host.driver.vifs.of(uuid)).toContain(vif.id);
  });

  test("the user's port: kept as the user's (preserve_on_delete); a detach unbinds it and leaves it in Neutron", async () => {
    const { neutron, net, host, uuid, first, attach, detach, ports } = await active();
    const user = neutron.addPort(net);
    const vif = await attach({ port_id: user.id });
    expect(vif).toMatchObject({ id: user.id, preserve_on_delete: true });
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: uuid, device_owner: 'compute:az1', 'binding:host_id': HOST });
    await detach(user.id);
    expect(ports()).toEqual([first]);
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: '', device_owner: '', 'binding:host_id': '', 'binding:vif_type': 'unbound' });
    expect(host.driver.vifs.of(uuid)).toEqual([first]);
  });

  test('the driver fails: InterfaceAttachFailed; the port made is deleted, a user port unbound; the fault recorded, nothing else changed', async () => {
    const { neutron, net, other, host, uuid, first, attach, ports, events } = await active();
    host.driver.faults.inject('attachInterface', { error: new DriverError('QMP device_add: Bus netport0 not found'), times: 2 });
    const err = await novaFailure(attach({ network_id: other }));
    expect(err.toRemoteFailure()).toMatchObject({ className: 'InterfaceAttachFailed', module: 'nova.exception', kwargs: { instance_uuid: uuid, code: 500 } });
    expect(err.message).toMatch(/Bus netport0 not found/);
    expect([...neutron.ports.keys()]).toEqual([first]);
    const user = neutron.addPort(net);
    await expect(attach({ port_id: user.id })).rejects.toThrow(/Failed to attach network adapter device/);
    expect(neutron.ports.get(user.id)).toMatchObject({ device_id: '', 'binding:host_id': '' });
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'active', task_state: null });
    expect(rec?.fault).toMatch(/^interface attach failed: Failed to attach network adapter device to .*Bus netport0 not found/);
    expect(rec?.interface_attach).toBeUndefined();
    expect(ports()).toEqual([first]);
    expect(host.driver.vifs.of(uuid)).toEqual([first]);
    expect(events()).toEqual(['instance.interface_attach.start', 'instance.interface_attach.error', 'instance.interface_attach.start', 'instance.interface_attach.error']);
  });

  test('Neutron down: InterfaceAttachFailed naming the outage, nothing held in Neutron, the instance as it was', async () => {
    const { neutron, other, host, uuid, first, attach, ports } = await active();
    neutron.fail('createPort');
    const err = await novaFailure(attach({ network_id: other }));
    expect(err.name).toBe('InterfaceAttachFailed');
    expect(err.message).toMatch(/Neutron unavailable: connect ECONNREFUSED/);
    neutron.heal();
    expect([...neutron.ports.keys()]).toEqual([first]);
    expect(ports()).toEqual([first]);
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(host.manager.record(uuid)?.fault).toMatch(/Neutron unavailable/);
  });

  test("refusals in nova's terms: a port in use (elsewhere or here), a missing port or network, a taken fixed IP, a tag the driver cannot show", async () => {
    const { neutron, net, host, uuid, first, attach } = await active();
    const taken = neutron.addPort(net, { device_id: randomUUID() });
    const usedIp = neutron.ports.get(first)?.fixed_ips[0]?.ip_address;
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ port_id: taken.id }, 'PortInUse'],
      [{ port_id: first }, 'PortInUse'],
      [{ port_id: randomUUID() }, 'PortNotFound'],
      [{ network_id: randomUUID() }, 'NetworkNotFound'],
      [{ network_id: net, requested_ip: usedIp }, 'FixedIpAlreadyInUse'],
      [{ network_id: net, tag: 'nic1' }, 'NetworkInterfaceTaggedAttachNotSupported'],
    ];
    const before = [...neutron.ports.keys()].sort();
    for (const [a, cls] of cases) expect([a, (await novaFailure(attach(a))).name]).toEqual([a, cls]);
    expect([...neutron.ports.keys()].sort()).toEqual(before);
    expect(neutron.ports.get(taken.id)?.device_id).not.toBe('');
    expect(host.manager.record(uuid)?.network_info?.map((v) => v.id)).toEqual([first]);
    expect(host.manager.record(uuid)?.fault).toMatch(/^interface attach failed: Tagged network interface attachment is not supported/);
  });

  test('an instance not ACTIVE or STOPPED, or with a task, is refused before anything is done', async () => {
    const { neutron, other, host, uuid, attach, detach, first } = await active();
    const rec = host.manager.record(uuid);
    await host.store.put('instance', uuid, { ...rec, task_state: 'powering-off' });
    const calls = neutron.calls.length;
    await expect(attach({ network_id: other })).rejects.toThrow(`cannot attach an interface to instance ${uuid} while it is active/powering-off`);
    await expect(detach(first)).rejects.toThrow(`cannot detach an interface from instance ${uuid} while it is active/powering-off`);
    expect(neutron.calls.length).toBe(calls);
    expect(host.manager.record(uuid)?.fault).toBeUndefined();
  });

  test('bad arguments are refused by name before anything runs', async () => {
    const { neutron, net, call, uuid, attach } = await active();
    const calls = neutron.calls.length;
    await expect(attach({ port_id: 'port-1' })).rejects.toThrow(/argument 'port_id': expected a UUID string or null, got the string "port-1"/);
    await expect(attach({ network_id: net, requested_ip: '10.1.0.300' })).rejects.toThrow(/argument 'requested_ip': expected an IPv4 or IPv6 address or null/);
    await expect(attach({ network_id: net, port_id: randomUUID() })).rejects.toThrow('invalid arguments network_id and port_id: give one of them, not both');
    await expect(attach({})).rejects.toThrow('invalid arguments network_id and port_id: one of them is needed');
    await expect(attach({ port_id: randomUUID(), requested_ip: '10.1.0.9' })).rejects.toThrow('invalid argument requested_ip: a fixed IP is asked for on a network_id');
    await expect(call('attach_interface', { instance: { uuid }, network_id: net, port_id: null, requested_ip: null, tag: 7 })).rejects.toThrow(/argument 'tag': expected a string or null, got number 7/);
    await expect(call('detach_interface', { instance: { uuid } })).rejects.toThrow(/missing required argument 'port_id' \(a UUID string\)/);
    expect(neutron.calls.length).toBe(calls);
  });
});

describe('detach_interface', () => {
  test('a port the agent made: the NIC out of the driver, the port deleted, the VIF dropped', async () => {
    const { neutron, other, host, uuid, first, attach, detach, ports, events } = await active();
    const vif = await attach({ network_id: other });
    await detach(vif.id);
    expect(neutron.ports.has(vif.id)).toBe(false);
    expect(ports()).toEqual([first]);
    expect(host.driver.vifs.of(uuid)).toEqual([first]);
    expect(host.driver.hypervisor.find(uuid)?.vifs?.map((v) => v.id)).toEqual([first]);
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(events().slice(-2)).toEqual(['instance.interface_detach.start', 'instance.interface_detach.end']);
    // The port the instance was built with goes the same way.
    await detach(first);
    expect(neutron.ports.size).toBe(0);
    expect(ports()).toEqual([]);
  });

  test('the guest does not release the NIC: InterfaceDetachFailed, the fault recorded, the interface kept everywhere', async () => {
    const { neutron, host, uuid, first, detach, ports, events } = await active();
    host.driver.faults.inject('detachInterface', { error: new DriverError(`instance ${uuid}: the guest did not release NIC net0 (port ${first}) within 20000 ms; it stays attached`), times: 1 });
    const err = await novaFailure(detach(first));
    expect(err.toRemoteFailure()).toMatchObject({ className: 'InterfaceDetachFailed', kwargs: { instance_uuid: uuid } });
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'active', task_state: null });
    expect(rec?.fault).toMatch(/^interface detach failed: .*the guest did not release NIC net0.*the interface stays attached$/);
    expect(ports()).toEqual([first]);
    expect(neutron.ports.get(first)).toMatchObject({ device_id: uuid, 'binding:host_id': HOST });
    expect(host.driver.vifs.of(uuid)).toEqual([first]);
    expect(events()).toEqual(['instance.interface_detach.start', 'instance.interface_detach.error']);
    // Asked again once the guest lets go, it completes.
    await detach(first);
    expect(ports()).toEqual([]);
    expect(neutron.ports.size).toBe(0);
  });

  test('Neutron down after the unplug: the VIF stays recorded with the fault; asked again, it finishes', async () => {
    const { neutron, host, uuid, first, detach, ports } = await active();
    neutron.down = true;
    await expect(detach(first)).rejects.toThrow(/the NIC is out of the guest, but Neutron could not delete the port: .*Neutron unavailable/);
    expect(ports()).toEqual([first]);
    expect(host.driver.vifs.of(uuid)).toEqual([]);
    neutron.heal();
    await detach(first);
    expect(ports()).toEqual([]);
    expect(neutron.ports.size).toBe(0);
  });

  test('a port the instance does not have: PortNotFound and the fault; nothing asked of the driver or Neutron', async () => {
    const { neutron, host, uuid, first, detach, ports } = await active();
    const calls = neutron.calls.length;
    const stray = randomUUID();
    const err = await novaFailure(detach(stray));
    expect(err.toRemoteFailure()).toMatchObject({ className: 'PortNotFound', kwargs: { port_id: stray, code: 404 } });
    expect(host.manager.record(uuid)?.fault).toBe(`interface detach failed: Port id ${stray} could not be found: not attached to instance ${uuid}`);
    expect(neutron.calls.length).toBe(calls);
    expect(ports()).toEqual([first]);
    expect(host.driver.vifs.of(uuid)).toEqual([first]);
  });
});

describe('an attach interrupted by a restart', () => {
  /** An attach that bound its port and gave the driver the NIC, as a crash before its last save leaves it. */
  async function interrupted(user: boolean) {
    const s = await active();
    const userPort = user ? s.neutron.addPort(s.net) : undefined;
    const vif = await s.attach(userPort ? { port_id: userPort.id } : { network_id: s.other });
    const rec = s.host.manager.record(s.uuid);
    await s.host.store.put('instance', s.uuid, { ...rec, network_info: [rec?.network_info?.[0]], interface_attach: { request_id: CTX.request_id, port_id: userPort?.id ?? null, vif } });
    return { ...s, vif };
  }

  test('its request replayed: the NIC and the port are taken back, and it fails asking to be sent again', async () => {
    const { neutron, host, uuid, first, vif, attach, ports } = await interrupted(false);
    await expect(attach({ network_id: vif.network.id })).rejects.toThrow(/interrupted by a restart of compute-agent and has been undone; ask again/);
    expect(neutron.ports.has(vif.id)).toBe(false);
    expect(host.driver.vifs.of(uuid)).toEqual([first]);
    expect(ports()).toEqual([first]);
    expect(host.manager.record(uuid)?.interface_attach).toBeUndefined();
  });

  test('a new attach first undoes it (a user port is unbound, not deleted), then attaches', async () => {
    const { neutron, other, uuid, first, vif, attach, ports } = await interrupted(true);
    const next = await attach({ network_id: other }, { request_id: 'req-later' });
    expect(neutron.ports.get(vif.id)).toMatchObject({ device_id: '', 'binding:host_id': '' });
    expect(ports()).toEqual([first, next.id]);
    expect(neutron.ports.get(next.id)).toMatchObject({ device_id: uuid });
  });

  test('deleting the instance gives back its ports, the interrupted user port unbound and kept', async () => {
    const { neutron, call, uuid, vif } = await interrupted(true);
    await call('terminate_instance', { instance: { uuid } });
    expect([...neutron.ports.keys()]).toEqual([vif.id]);
    expect(neutron.ports.get(vif.id)).toMatchObject({ device_id: '', 'binding:host_id': '' });
  });
});
