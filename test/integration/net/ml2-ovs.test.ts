// Servers on ML2/OVS, as kolla-ansible 2025.1 deploys Neutron by default: scripts/neutron-stack
// with NEUTRON_ML2=openvswitch (the openvswitch mechanism driver, vxlan tenant networks, on each
// host the Open vSwitch agent and the DHCP agent with dnsmasq). Host a's Open vSwitch agent runs
// the openvswitch firewall, so its bindings say ovs_hybrid_plug=false and the agent plugs the tap
// straight into br-int; host b's runs iptables_hybrid, so they say true and the agent plugs as
// os-vif's VIFBridge does (tap on qbr, veth qvb/qvo, qvo on br-int). On each host the agent builds
// the net guest on a port the user made: the port goes ACTIVE (the OVS agent wired it and the DHCP
// agent's provisioning block cleared), network-vif-plugged reaches the agent through Neutron's
// real notifier, the guest's console shows dnsmasq's lease of exactly the port's address with the
// vxlan MTU, the two guests reach each other across vxlan, and a probe in the DHCP namespace
// reaches both, until the group's ICMP rule goes (each firewall enforces it). Delete unbinds the
// user's ports and leaves no tap, bridge, veth or OVS port.
//
// It starts a private Keystone, the Placement behind it, Neutron and two hosts, and stops them all.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Daemon } from '../../../agent/daemon';
import { hybridName, tapName } from '../../../model/network';
import { startDaemon, type AgentSpec } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { EventRelay } from '../../helpers/event-relay';
import { buildNetGuest, leases, pings } from '../../helpers/net-guest';
import { NeutronCloud, neutronQemuAgent, neutronUnavailable } from '../../helpers/neutron-cloud';
import { PING } from '../../helpers/neutron-stack';
import { describeWithQemu, reapLeftovers } from '../../helpers/qemu-hosts';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(900_000);
const log = (line: string): boolean => process.stdout.write(`ml2-ovs: ${line}\n`);

const unavailable = neutronUnavailable();
if (unavailable) log(`skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describeWithQemu;

const suffix = Math.random().toString(36).slice(2, 7);
const HOST_A = `ov${suffix}a`;
const HOST_B = `ov${suffix}b`;
const FLAVOR = { name: 'net', vcpus: 1, memory_mb: 128, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };
/** A vxlan network's MTU on a 1500-byte underlay: 1500 - 50 (IPv4 outer headers and the VXLAN header). */
const VXLAN_MTU = 1450;

interface Port {
  id: string;
  status: string;
  mac_address: string;
  device_id: string;
  device_owner: string;
  fixed_ips: Array<{ ip_address: string }>;
  'binding:host_id': string;
  'binding:vif_type': string;
  'binding:vif_details': Record<string, unknown>;
}

suite('servers on Neutron 2025.1 with ML2/OVS (openvswitch and iptables_hybrid firewalls), built by the agent', () => {
  const exchange = `test-ovs-${randomUUID().slice(0, 8)}`;
  const cp = new ControlPlane(exchange);
  const relay = new EventRelay((host, method, args) => cp.cast(host, method, args));
  let cloud: NeutronCloud;
  const specs: Record<string, AgentSpec> = {};
  const daemons: Daemon[] = [];
  let image = '';
  let network = '';
  let projectId = '';
  let group = '';
  let icmpRule = '';

  const port = (id: string): Promise<Port> => cloud.must<Port>('GET', `/ports/${id}`, undefined, 'port');
  const consoleOf = (uuid: string, host: string): string => {
    try {
      return readFileSync(join(specs[host]?.dir ?? '', 'instances', uuid, 'console.log'), 'utf8');
    } catch {
      return '';
    }
  };
  const links = (host: string): string => execFileSync('ip', ['-n', `ca-${host}`, '-o', 'link', 'show'], { encoding: 'utf8' });
  const brInt = (host: string): Promise<string> => cloud.inHost(host, 'ovs-vsctl', 'list-ports', 'br-int');

  /** Echoes answered by `address` out of `count`, sent from the network's DHCP namespace (dnsmasq's). */
  function pingFromDhcp(address: string, count: number): number {
    const pid = execFileSync('pgrep', ['-o', '-f', `dnsmasq.*${network}`], { encoding: 'utf8' }).trim();
    return Number(execFileSync('nsenter', ['-t', pid, '-n', 'python3', '-c', PING, address, String(count)], { encoding: 'utf8' }).trim());
  }

  /** A rule of the test's group admitting ICMP from anywhere; its id. */
  const admitIcmp = async (): Promise<string> =>
    (await cloud.must<{ id: string }>('POST', '/security-group-rules', { security_group_rule: { security_group_id: group, direction: 'ingress', protocol: 'icmp', ethertype: 'IPv4', remote_ip_prefix: '0.0.0.0/0' } }, 'security_group_rule')).id;

  beforeAll(async () => {
    image = buildNetGuest().image;
    await relay.start();
    cloud = await NeutronCloud.create({ computePort: relay.port, log, ml2: 'openvswitch' });
    await cloud.up({ placement: true, hosts: [HOST_A, HOST_B], firewalls: { [HOST_A]: 'openvswitch', [HOST_B]: 'iptables_hybrid' } });
    projectId = await cloud.projectId('service');
    network = (await cloud.must<{ id: string }>('POST', '/networks', { network: { name: `ov-${suffix}`, tenant_id: projectId } }, 'network')).id;
    await cloud.must('POST', '/subnets', { subnet: { network_id: network, tenant_id: projectId, ip_version: 4, cidr: '10.198.0.0/24' } }, 'subnet');
    group = (await cloud.must<{ id: string }>('POST', '/security-groups', { security_group: { name: `ov-${suffix}`, tenant_id: projectId } }, 'security_group')).id;
    icmpRule = await admitIcmp();
    await cp.start();
    for (const host of [HOST_A, HOST_B]) {
      const spec = neutronQemuAgent(cloud, host, exchange, { vifTimeoutS: 60, fatal: true });
      specs[host] = spec;
      daemons.push(await startDaemon(spec));
    }
  });

  afterAll(async () => {
    for (const d of daemons) await d.stop('test end');
    for (const s of Object.values(specs)) reapLeftovers(s.dir);
    await relay.close();
    await cp.close();
    await cloud?.down();
  });

  test('a guest per firewall driver: bound as the host says (direct / hybrid), ACTIVE, leased, reaching each other across vxlan; the group is enforced; delete unbinds and leaves nothing', async () => {
    // The user's ports, each telling its guest (DHCP option 42) to ping the other's address.
    const userPorts: Port[] = [];
    for (let i = 0; i < 2; i++) userPorts.push(await cloud.must<Port>('POST', '/ports', { port: { network_id: network, tenant_id: projectId, security_groups: [group] } }, 'port'));
    const ipOf = (p: Port | undefined): string => p?.fixed_ips[0]?.ip_address ?? '';
    for (const [i, p] of userPorts.entries()) {
      await cloud.must('PUT', `/ports/${p.id}`, { port: { extra_dhcp_opts: [{ opt_name: 'ntp-server', opt_value: ipOf(userPorts[1 - i]) }] } }, 'port');
    }
    // The DHCP agent writes the options into dnsmasq's opts file on its own time; a guest leased
    // before that gets no option 42 and pings nobody until a renew a day later. Build once both are there.
    const dhcpOpts = (): string => {
      try {
        return execFileSync('sh', ['-c', `find '${cloud.dir}' -path '*/${network}/opts' -exec cat {} + 2>/dev/null`], { encoding: 'utf8' });
      } catch {
        return '';
      }
    };
    await waitUntil('the DHCP agent to hand out both ntp-server options', () => Promise.resolve(userPorts.every((p) => dhcpOpts().includes(`ntp-server,${ipOf(p)}`))), 60_000);
    const uuids: string[] = [];
    const t0 = Date.now();
    for (const [i, host] of [HOST_A, HOST_B].entries()) {
      const uuid = randomUUID();
      uuids.push(uuid);
      relay.place(uuid, host);
      await cp.cast(host, 'build_and_run_instance', {
        instance: { uuid, display_name: `ov-${uuid.slice(0, 6)}`, project_id: projectId, user_id: 'u', flavor: FLAVOR, image_ref: image },
        requested_networks: [{ port_id: userPorts[i]?.id }],
      });
    }
    await cp.waitFor('instance.create.end', uuids, 300_000);
    log(`two builds, cast to ACTIVE: ${((Date.now() - t0) / 1000).toFixed(1)} s`);

    const [hostA = '', hostB = ''] = [HOST_A, HOST_B];
    const [portA, portB] = await Promise.all(userPorts.map((p) => port(p.id)));
    for (const [p, host, uuid, hybrid] of [[portA, hostA, uuids[0], false], [portB, hostB, uuids[1], true]] as const) {
      expect(p).toMatchObject({ status: 'ACTIVE', 'binding:host_id': host, device_id: uuid, device_owner: 'compute:nova', 'binding:vif_type': 'ovs' });
      expect(p?.['binding:vif_details']).toMatchObject({ ovs_hybrid_plug: hybrid, datapath_type: 'netdev' });
      const plugged = relay.eventsOf(uuid ?? '').filter((e) => e.name === 'network-vif-plugged');
      expect(plugged.length).toBeGreaterThanOrEqual(1);
      expect(plugged.every((e) => e.tag === p?.id && e.status === 'completed')).toBe(true);
    }
    // Direct on a: the tap is br-int's port. Hybrid on b: the tap is on qbr, qvo is br-int's port.
    const idA = portA?.id ?? '';
    const idB = portB?.id ?? '';
    expect(await brInt(hostA)).toContain(tapName(idA));
    expect((await cloud.inHost(hostA, 'ovs-vsctl', 'get', 'Interface', tapName(idA), 'external_ids:iface-id')).trim()).toBe(`"${idA}"`);
    const [qbr, qvo] = [hybridName('qbr', idB), hybridName('qvo', idB)];
    expect(links(hostB)).toMatch(new RegExp(`${tapName(idB)}:.* master ${qbr} `));
    expect(links(hostB)).toMatch(new RegExp(`${hybridName('qvb', idB)}@${qvo}:.* master ${qbr} `));
    expect(await brInt(hostB)).toContain(qvo);
    expect(await brInt(hostB)).not.toContain(tapName(idB));
    expect((await cloud.inHost(hostB, 'ovs-vsctl', 'get', 'Interface', qvo, 'external_ids:iface-id')).trim()).toBe(`"${idB}"`);

    for (const [uuid, host, p] of [[uuids[0], hostA, portA], [uuids[1], hostB, portB]] as const) {
      await waitUntil(`the guest on ${host} prints its lease`, () => Promise.resolve(leases(consoleOf(uuid ?? '', host)).length > 0), 180_000);
      expect(leases(consoleOf(uuid ?? '', host))[0]).toMatchObject({ ip: ipOf(p), prefix: 24, mtu: VXLAN_MTU, mac: p?.mac_address });
    }
    for (const [uuid, host, other] of [[uuids[0], hostA, portB], [uuids[1], hostB, portA]] as const) {
      await waitUntil(`the guest on ${host} reaches ${ipOf(other)}`, () => Promise.resolve(pings(consoleOf(uuid ?? '', host)).some((c) => c.ip === ipOf(other) && c.state === 'ok')), 120_000);
    }
    log('each guest reports the other answering its pings (across vxlan, one firewall driver each)');

    const answered = [portA, portB].map((p) => pingFromDhcp(ipOf(p), 4));
    log(`from the DHCP namespace: ${answered.join(', ')} of 4 echoes answered (openvswitch, iptables_hybrid)`);
    expect(answered.every((n) => n >= 2)).toBe(true);
    // Without the ICMP rule both firewalls drop the echoes; with it back they pass again.
    await cloud.must('DELETE', `/security-group-rules/${icmpRule}`, undefined, 'none', [204]);
    let without: number[] = [];
    await waitUntil('both firewalls drop ICMP without the rule', () => Promise.resolve((without = [portA, portB].map((p) => pingFromDhcp(ipOf(p), 2))).every((n) => n === 0)), 60_000);
    icmpRule = await admitIcmp();
    await waitUntil('both guests answer again with ICMP admitted', () => Promise.resolve([portA, portB].every((p) => pingFromDhcp(ipOf(p), 2) > 0)), 60_000);
    log(`without the ICMP rule: ${without.join(', ')} answered; with it back, both answer`);

    for (const [uuid, host] of [[uuids[0], hostA], [uuids[1], hostB]] as const) await cp.cast(host, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', uuids, 120_000);
    for (const p of [idA, idB]) expect(await port(p)).toMatchObject({ 'binding:host_id': '', device_id: '', device_owner: '' });
    expect(links(hostA)).not.toContain(tapName(idA));
    expect(await brInt(hostA)).not.toContain(tapName(idA));
    for (const dev of [tapName(idB), qbr, qvo, hybridName('qvb', idB)]) expect(links(hostB)).not.toContain(`${dev}`);
    expect(await brInt(hostB)).not.toContain(qvo);
    for (const p of [idA, idB]) await cloud.must('DELETE', `/ports/${p}`, undefined, 'none', [204]);
  });
});
