// A server on a real Neutron network, end to end: an agent with the qemu driver on OVN chassis a
// (scripts/neutron-stack: Neutron 2025.1, ML2/OVN, its own Open vSwitch in namespace ca-<host>)
// builds an instance of the net guest with a requested network. Neutron's real notifier sends
// network-vif-plugged to the catalog's compute endpoint, where a relay casts it to the agent as
// nova-api would (test/helpers/event-relay.ts). The agent binds the port to its host, plugs the
// tap into br-int as os-vif does, keeps QEMU paused until the event, and runs it: the guest's
// console shows OVN's DHCP lease of exactly the port's address with the network's MTU, and a
// "VM" namespace plugged on chassis b reaches it across geneve. Delete leaves no port, tap, OVS
// port or allocation; a port that never goes up fails the build after vif_plugging_timeout with a
// fault naming it, leaving nothing behind; an agent SIGKILLed while the guest waits paused resumes
// the build to ACTIVE when it comes back.
//
// It starts a private Keystone, the Placement behind it, Neutron and two hosts, and stops them all.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Daemon } from '../../../agent/daemon';
import { tapName } from '../../../model/network';
import { AgentProcess, agentConfig, startDaemon, type AgentSpec } from '../../helpers/agents';
import { placementFromConfig } from '../../../tracker/placement/factory';
import { ControlPlane } from '../../helpers/control-plane';
import { EventRelay } from '../../helpers/event-relay';
import { buildNetGuest, leases } from '../../helpers/net-guest';
import { NeutronCloud, neutronQemuAgent, neutronUnavailable } from '../../helpers/neutron-cloud';
import { PING } from '../../helpers/neutron-stack';
import { describeWithQemu, reapLeftovers } from '../../helpers/qemu-hosts';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(900_000);
const log = (line: string): boolean => process.stdout.write(`neutron-boot: ${line}\n`);

const unavailable = neutronUnavailable();
if (unavailable) log(`skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describeWithQemu;

const suffix = Math.random().toString(36).slice(2, 7);
const HOST_A = `nb${suffix}a`;
const HOST_B = `nb${suffix}b`;
const FLAVOR = { name: 'net', vcpus: 1, memory_mb: 128, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };
/** `vif_plugging_timeout` of the test's agents: the happy path takes under 10 s here. */
const VIF_TIMEOUT_S = 20;

interface Port {
  id: string;
  status: string;
  mac_address: string;
  device_owner: string;
  fixed_ips: Array<{ ip_address: string }>;
  'binding:host_id': string;
}

suite('a server on a Neutron 2025.1 network (ML2/OVN), built by the agent', () => {
  const exchange = `test-nb-${randomUUID().slice(0, 8)}`;
  const cp = new ControlPlane(exchange);
  const relay = new EventRelay((host, method, args) => cp.cast(host, method, args));
  let cloud: NeutronCloud;
  let spec: AgentSpec;
  let daemon: Daemon | undefined;
  let specB: AgentSpec;
  let daemonB: Daemon | undefined;
  const processes: AgentProcess[] = [];
  let image = '';
  let network = '';
  let projectId = '';
  let peerNs = '';

  const ports = (device: string): Promise<Port[]> => cloud.must<Port[]>('GET', `/ports?device_id=${device}`, undefined, 'ports');
  const consoleOf = (uuid: string, on: AgentSpec = spec): string => {
    try {
      return readFileSync(join(on.dir, 'instances', uuid, 'console.log'), 'utf8');
    } catch {
      return '';
    }
  };
  const nsLinks = (host: string): string => execFileSync('ip', ['-n', `ca-${host}`, '-o', 'link', 'show'], { encoding: 'utf8' });

  /** A namespace standing in for a VM on chassis `host`, on `network`, plugged as os-vif plugs; its address. */
  async function peerOn(host: string): Promise<string> {
    const port = await cloud.must<Port>('POST', '/ports', { port: { network_id: network, tenant_id: projectId, device_owner: 'compute:nova', device_id: randomUUID(), 'binding:host_id': host } }, 'port');
    peerNs = `ca-${host}-peer`;
    await cloud.plugVm(host, port, peerNs);
    await waitUntil('the peer port is ACTIVE', async () => (await cloud.must<Port>('GET', `/ports/${port.id}`, undefined, 'port')).status === 'ACTIVE', 60_000);
    return port.fixed_ips[0]?.ip_address ?? '';
  }

  /** A qemu agent on chassis `host`: its OVS, its namespace, the cloud's Keystone; events waited for 20 s. */
  const qemuAgent = (host: string, fatal: boolean): AgentSpec => neutronQemuAgent(cloud, host, exchange, { vifTimeoutS: VIF_TIMEOUT_S, fatal });

  /** Stops `host`'s ovn-controller as a crash would (SIGKILL): its chassis stays registered, so ports still bind, but none goes up. */
  function killOvnController(host: string): void {
    const pid = Number(readFileSync(join(cloud.neutronDir, 'hosts', host, 'ovn-controller.pid'), 'utf8').trim());
    process.kill(pid, 'SIGKILL');
  }

  /** Builds the net guest on `host` with a port on the test network; the instance's uuid. */
  async function build(host: string): Promise<string> {
    const uuid = randomUUID();
    relay.place(uuid, host);
    await cp.cast(host, 'build_and_run_instance', {
      instance: { uuid, display_name: `nb-${uuid.slice(0, 6)}`, project_id: projectId, user_id: 'u', flavor: FLAVOR, image_ref: image },
      requested_networks: [{ network_id: network }],
    });
    return uuid;
  }

  beforeAll(async () => {
    image = buildNetGuest().image;
    await relay.start();
    cloud = await NeutronCloud.create({ computePort: relay.port, log });
    await cloud.up({ placement: true, hosts: [HOST_A, HOST_B] });
    projectId = await cloud.projectId('service');
    const net = await cloud.must<{ id: string; mtu: number }>('POST', '/networks', { network: { name: `nb-${suffix}`, tenant_id: projectId } }, 'network');
    network = net.id;
    await cloud.must('POST', '/subnets', { subnet: { network_id: network, tenant_id: projectId, ip_version: 4, cidr: '10.197.0.0/24' } }, 'subnet');
    await cp.start();

    spec = qemuAgent(HOST_A, true);
    specB = qemuAgent(HOST_B, false);
    daemon = await startDaemon(spec);
    daemonB = await startDaemon(specB);
  });

  afterAll(async () => {
    await daemon?.stop('test end');
    await daemonB?.stop('test end');
    for (const p of processes) await p.kill(true);
    if (spec) reapLeftovers(spec.dir);
    if (specB) reapLeftovers(specB.dir);
    await relay.close();
    await cp.close();
    await cloud?.down();
  });

  test('the guest boots on the network: port bound and ACTIVE, DHCP lease of its address, reachable across geneve; delete leaves nothing', async () => {
    const t0 = Date.now();
    const uuid = await build(HOST_A);
    await cp.waitFor('instance.create.end', [uuid], 300_000);
    log(`build cast to ACTIVE: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const [port] = await ports(uuid);
    expect(port).toMatchObject({ status: 'ACTIVE', 'binding:host_id': HOST_A, device_owner: 'compute:nova' });
    // ML2/OVN may report the port up more than once (the LSP's up, then the port's status).
    const plugged = relay.eventsOf(uuid).filter((e) => e.name === 'network-vif-plugged');
    expect(plugged.length).toBeGreaterThanOrEqual(1);
    expect(plugged.every((e) => e.tag === port?.id && e.status === 'completed')).toBe(true);
    const tap = tapName(port?.id ?? '');
    expect(nsLinks(HOST_A)).toContain(`${tap}:`);
    expect((await cloud.inHost(HOST_A, 'ovs-vsctl', 'get', 'Interface', tap, 'external_ids:iface-id')).trim()).toBe(`"${port?.id}"`);

    const address = port?.fixed_ips[0]?.ip_address ?? '';
    await waitUntil('the guest prints its lease', () => Promise.resolve(leases(consoleOf(uuid)).length > 0), 120_000);
    expect(leases(consoleOf(uuid))[0]).toMatchObject({ ip: address, prefix: 24, mtu: 1442, mac: port?.mac_address });

    const peer = await peerOn(HOST_B);
    const answered = Number(execFileSync('ip', ['netns', 'exec', peerNs, 'python3', '-c', PING, address, '5'], { encoding: 'utf8' }).trim());
    log(`${answered}/5 echoes answered by the guest from chassis ${HOST_B} (${peer})`);
    expect(answered).toBeGreaterThanOrEqual(3);

    await cp.cast(HOST_A, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', [uuid], 120_000);
    expect(await ports(uuid)).toEqual([]);
    expect((await cloud.neutron('GET', `/ports/${port?.id}`)).status).toBe(404);
    expect(nsLinks(HOST_A)).not.toContain(`${tap}:`);
    expect(await cloud.inHost(HOST_A, 'ovs-vsctl', 'list-ports', 'br-int')).not.toContain(tap);
  });
  test("no network-vif-plugged (ovn-controller dead): ERROR after vif_plugging_timeout with a fault naming the port; no port, tap, OVS port or allocation left", async () => {
    killOvnController(HOST_A);
    try {
      const t0 = Date.now();
      const uuid = await build(HOST_A);
      await cp.waitFor('instance.create.error', [uuid], 120_000);
      log(`build to ERROR without the event: ${((Date.now() - t0) / 1000).toFixed(1)} s (vif_plugging_timeout ${VIF_TIMEOUT_S} s)`);
      const rec = daemon?.compute?.record(uuid);
      expect(rec).toMatchObject({ vm_state: 'error', task_state: null });
      expect(rec?.fault).toMatch(new RegExp(`no network-vif-plugged from Neutron within ${VIF_TIMEOUT_S} s for port [0-9a-f-]{36} of instance ${uuid}`));
      const portId = /for port ([0-9a-f-]{36})/.exec(rec?.fault ?? '')?.[1] ?? '';
      expect((await cloud.neutron('GET', `/ports/${portId}`)).status).toBe(404);
      expect(await ports(uuid)).toEqual([]);
      expect(nsLinks(HOST_A)).not.toContain(`${tapName(portId)}:`);
      expect(await cloud.inHost(HOST_A, 'ovs-vsctl', 'list-ports', 'br-int')).not.toContain(tapName(portId));
      expect(await placementFromConfig(agentConfig(spec)).consumerAllocations(uuid)).toMatchObject({ allocations: {} });
    } finally {
      await cloud.run('neutron-stack', ['host-up', HOST_A]);
    }
  });

  test('vif_plugging_is_fatal = false: the guest runs after the timeout, and takes its lease once the chassis wires the port', async () => {
    killOvnController(HOST_B);
    let uuid = '';
    try {
      uuid = await build(HOST_B);
      await cp.waitFor('instance.create.end', [uuid], 120_000);
      const [port] = await ports(uuid);
      expect(port?.status).toBe('DOWN');
    } finally {
      await cloud.run('neutron-stack', ['host-up', HOST_B]);
    }
    const [port] = await ports(uuid);
    await waitUntil('the port goes ACTIVE once ovn-controller is back', async () => (await ports(uuid))[0]?.status === 'ACTIVE', 60_000);
    await waitUntil('the guest prints its lease', () => Promise.resolve(leases(consoleOf(uuid, specB)).length > 0), 120_000);
    expect(leases(consoleOf(uuid, specB))[0]).toMatchObject({ ip: port?.fixed_ips[0]?.ip_address, mtu: 1442 });
    await cp.cast(HOST_B, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', [uuid], 120_000);
    expect(await ports(uuid)).toEqual([]);
  });
  test('the agent SIGKILLed between plug and run (guest paused, waiting), then restarted: the build resumes to ACTIVE and the guest takes its lease', async () => {
    // Agent a as a process of the built binary, on the same state, so it can be killed.
    await daemon?.stop('replaced by a process');
    daemon = undefined;
    const proc = new AgentProcess(spec);
    processes.push(proc);
    await proc.start();
    killOvnController(HOST_A);
    let uuid = '';
    try {
      uuid = await build(HOST_A);
      // Plugged and paused: the tap is on br-int and QEMU waits for the event that cannot come.
      await waitUntil('the port is plugged on chassis a', async () => (await ports(uuid)).some((p) => nsLinks(HOST_A).includes(`${tapName(p.id)}:`)), 60_000);
      await proc.kill();
    } finally {
      await cloud.run('neutron-stack', ['host-up', HOST_A]);
    }
    const t0 = Date.now();
    await proc.start();
    await cp.waitFor('instance.create.end', [uuid], 120_000);
    log(`restart to ACTIVE after the SIGKILL: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    // The restarted agent re-plugs without waiting on events (the one Neutron sent may have gone to
    // the dead agent): the port goes ACTIVE once the ovn-controller started again claims it.
    await waitUntil('the port goes ACTIVE once ovn-controller is back', async () => (await ports(uuid))[0]?.status === 'ACTIVE', 60_000);
    const [port] = await ports(uuid);
    expect(port).toMatchObject({ status: 'ACTIVE', 'binding:host_id': HOST_A });
    await waitUntil('the guest prints its lease', () => Promise.resolve(leases(consoleOf(uuid)).length > 0), 120_000);
    expect(leases(consoleOf(uuid))[0]).toMatchObject({ ip: port?.fixed_ips[0]?.ip_address, mtu: 1442 });
    expect(cp.events.filter((e) => e.uuid === uuid && e.event_type === 'instance.create.error')).toEqual([]);
    await cp.cast(HOST_A, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', [uuid], 120_000);
    expect(await ports(uuid)).toEqual([]);
    expect(nsLinks(HOST_A)).not.toContain(`${tapName(port?.id ?? '')}:`);
  });
});

