// scripts/neutron-stack against the real services: Debian 13's Neutron 26.0.0 (2025.1) with
// ML2/OVN behind a private 2025.1 Keystone (scripts/keystone-stack), on the 2025.1 RabbitMQ of
// scripts/stack, and two agent hosts as OVN chassis (OVS 3.5 userspace datapath + ovn-controller in
// namespaces of their own). Through Neutron's API with a Keystone token: both chassis are alive
// "OVN Controller agent"s with the hosts' names; a port bound to host a gets vif_type ovs with
// netdev vif_details; plugged as os-vif plugs (a tap on br-int with the iface-id) it goes ACTIVE
// and OVS marks the Interface ovn-installed; deleted, it leaves OVN's databases. Two ports, one on
// each host, answer ICMP echo across the geneve underlay between the chassis.
//
// It starts a private Keystone, Neutron and hosts (ports and STACK_DIR of its own) and stops them
// all; the 2025.1 RabbitMQ it uses is the machine-wide one scripts/stack keeps (as the suite's
// global setup does for the release under test) and stays running. Skipped, with the reason, only
// where the 2025.1 root cannot be had (CI on Debian 12 builds it).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NeutronCloud, neutronUnavailable, type NeutronReply } from '../../helpers/neutron-cloud';
import { PING, treeRssKb, underlayVeth } from '../../helpers/neutron-stack';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(900_000);

const log = (line: string): boolean => process.stdout.write(`neutron-stack: ${line}\n`);

const unavailable = neutronUnavailable();
if (unavailable) log(`skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describe;

const suffix = Math.random().toString(36).slice(2, 7);
const HOST_A = `nt${suffix}a`;
const HOST_B = `nt${suffix}b`;

let cloud: NeutronCloud;
const run = (name: string, args: string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<string> => cloud.run(name, args, extraEnv);
const inHost = (host: string, ...cmd: string[]): Promise<string> => cloud.inHost(host, ...cmd);
const neutron = (method: string, path: string, body?: unknown): Promise<NeutronReply> => cloud.neutron(method, path, body);
const must = <T>(method: string, path: string, body: unknown, key: string): Promise<T> => cloud.must<T>(method, path, body, key);

interface Agent {
  agent_type: string;
  host: string;
  alive: boolean;
  binary: string;
}
interface Port {
  id: string;
  status: string;
  mac_address: string;
  'binding:vif_type': string;
  'binding:vif_details': Record<string, unknown>;
  'binding:host_id': string;
}

const ip = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8' });

/** A "VM" namespace for `port` on `host` (NeutronCloud.plugVm); its name. */
async function plugVm(host: string, port: Port & { fixed_ips: Array<{ ip_address: string }> }): Promise<string> {
  const ns = `ca-${host}-vm`;
  await cloud.plugVm(host, port, ns);
  return ns;
}

/** Packets the underlay bridge received from `host` (its veth end in the underlay namespace). */
function underlayRx(host: string): number {
  const dev = underlayVeth(host);
  const [link] = JSON.parse(ip('-j', '-s', '-n', `ca-ul-${cloud.ports.neutron}`, 'link', 'show', 'dev', dev)) as Array<{ stats64: { rx: { packets: number } } }>;
  return link?.stats64.rx.packets ?? 0;
}

suite('scripts/neutron-stack (Neutron 2025.1, ML2/OVN, two chassis)', () => {
  beforeAll(async () => {
    cloud = await NeutronCloud.create({ log });
    await cloud.up({ hosts: [HOST_A, HOST_B] });
  });

  afterAll(async () => {
    await cloud?.down();
  });

  test('status names every part, env names the hosts, zed is refused', async () => {
    const status = await run('neutron-stack', ['status']);
    for (const part of ['mariadb', 'ovn-nb', 'ovn-sb', 'ovn-northd', 'neutron-rpc-server', 'neutron-api', `host ${HOST_A}`, `host ${HOST_B}`]) {
      expect(status).toMatch(new RegExp(`^${part.replace(/\./g, '\\.')} +up `, 'm'));
    }
    const vars = await run('neutron-stack', ['env']);
    expect(vars).toContain(`NEUTRON_URL=http://127.0.0.1:${cloud.ports.neutron}\n`);
    expect(vars).toContain(`NEUTRON_HOST_${HOST_A}_NETNS=ca-${HOST_A}\n`);
    expect(vars).toContain(`NEUTRON_HOST_${HOST_A}_OVS_DB=unix:${cloud.neutronDir}/hosts/${HOST_A}/db.sock\n`);
    await expect(run('neutron-stack', ['status'], { OPENSTACK_RELEASE: 'zed' })).rejects.toThrow(/runs Neutron 2025\.1 .* only/);
  });

  test('both chassis are alive OVN Controller agents named after their hosts', async () => {
    let agents: Agent[] = [];
    await waitUntil(
      'two alive OVN Controller agents',
      async () => {
        agents = (await must<Agent[]>('GET', '/agents', undefined, 'agents')).filter((a) => a.agent_type === 'OVN Controller agent');
        return [HOST_A, HOST_B].every((h) => agents.some((a) => a.host === h && a.alive));
      },
      60_000,
    );
    expect(agents.map((a) => a.host).sort()).toEqual([HOST_A, HOST_B]);
    expect(agents.every((a) => a.binary === 'ovn-controller')).toBe(true);
  });

  test('a port bound to host a is an ovs/netdev VIF, goes ACTIVE once plugged as os-vif plugs, and leaves OVN when deleted', async () => {
    const net = await must<{ id: string; 'provider:network_type': string; mtu: number }>('POST', '/networks', { network: { name: `nt-${suffix}` } }, 'network');
    expect(net['provider:network_type']).toBe('geneve');
    expect(net.mtu).toBe(1442);
    await must('POST', '/subnets', { subnet: { network_id: net.id, ip_version: 4, cidr: '10.199.0.0/24' } }, 'subnet');

    // No chassis has this hostname: ML2/OVN refuses to bind.
    const stray = await must<Port>('POST', '/ports', { port: { network_id: net.id, 'binding:host_id': `${HOST_A}-absent` } }, 'port');
    expect(stray['binding:vif_type']).toBe('binding_failed');

    const port = await must<Port>('POST', '/ports', { port: { network_id: net.id, device_owner: 'compute:nova', device_id: 'b7f1c9a4-0000-4000-8000-00000000000a', 'binding:host_id': HOST_A } }, 'port');
    expect(port['binding:vif_type']).toBe('ovs');
    expect(port['binding:vif_details']).toMatchObject({ bridge_name: 'br-int', datapath_type: 'netdev', connectivity: 'l2' });
    expect(port['binding:vif_details']).not.toHaveProperty('ovs_hybrid_plug');
    expect(port.status).toBe('DOWN');

    const tap = `tap${port.id.slice(0, 11)}`;
    await inHost(HOST_A, 'ip', 'tuntap', 'add', 'dev', tap, 'mode', 'tap');
    await inHost(HOST_A, 'ip', 'link', 'set', tap, 'up');
    const t0 = Date.now();
    await inHost(HOST_A, 'ovs-vsctl', '--', '--may-exist', 'add-port', 'br-int', tap, '--', 'set', 'Interface', tap,
      `external_ids:iface-id=${port.id}`, 'external_ids:iface-status=active', `external_ids:attached-mac=${port.mac_address}`,
      'external_ids:vm-uuid=b7f1c9a4-0000-4000-8000-00000000000a');
    await waitUntil('the port is ACTIVE', async () => (await must<Port>('GET', `/ports/${port.id}`, undefined, 'port')).status === 'ACTIVE', 60_000);
    log(`port ACTIVE ${((Date.now() - t0) / 1000).toFixed(1)} s after the plug`);
    expect((await inHost(HOST_A, 'ovs-vsctl', 'get', 'Interface', tap, 'external_ids:ovn-installed')).trim()).toBe('"true"');
    const nbBefore = await run('neutron-stack', ['host-exec', HOST_A, 'ovn-nbctl', `--db=unix:${cloud.neutronDir}/ovn/nb.sock`, 'lsp-get-up', port.id]);
    expect(nbBefore.trim()).toBe('up');
    const chassis = await run('neutron-stack', ['host-exec', HOST_A, 'ovn-sbctl', `--db=unix:${cloud.neutronDir}/ovn/sb.sock`, '--bare', '--columns=chassis', 'find', 'Port_Binding', `logical_port=${port.id}`]);
    const chassisName = await run('neutron-stack', ['host-exec', HOST_A, 'ovn-sbctl', `--db=unix:${cloud.neutronDir}/ovn/sb.sock`, '--bare', '--columns=name', 'list', 'Chassis', chassis.trim()]);
    expect(chassisName.trim()).toBe(HOST_A);

    // os-vif's unplug, then the delete nova makes.
    await inHost(HOST_A, 'ovs-vsctl', '--if-exists', 'del-port', 'br-int', tap);
    await inHost(HOST_A, 'ip', 'link', 'del', tap);
    expect((await neutron('DELETE', `/ports/${port.id}`)).status).toBe(204);
    expect((await neutron('GET', `/ports/${port.id}`)).status).toBe(404);
    await waitUntil('the LSP and its Port_Binding are gone', async () => {
      const lsps = await run('neutron-stack', ['host-exec', HOST_A, 'ovn-nbctl', `--db=unix:${cloud.neutronDir}/ovn/nb.sock`, '--bare', '--columns=name', 'list', 'Logical_Switch_Port']);
      const pbs = await run('neutron-stack', ['host-exec', HOST_A, 'ovn-sbctl', `--db=unix:${cloud.neutronDir}/ovn/sb.sock`, '--bare', '--columns=logical_port', 'list', 'Port_Binding']);
      return !lsps.includes(port.id) && !pbs.includes(port.id);
    }, 30_000);

    expect((await neutron('DELETE', `/ports/${stray.id}`)).status).toBe(204);
    expect((await neutron('DELETE', `/networks/${net.id}`)).status).toBe(204);
  });

  test('ports on the two hosts answer each other across the geneve underlay', async () => {
    const net = await must<{ id: string }>('POST', '/networks', { network: { name: `nt-${suffix}-geneve` } }, 'network');
    await must('POST', '/subnets', { subnet: { network_id: net.id, ip_version: 4, cidr: '10.198.0.0/24' } }, 'subnet');
    type VmPort = Port & { fixed_ips: Array<{ ip_address: string }> };
    const bound = (host: string): Promise<VmPort> =>
      must<VmPort>('POST', '/ports', { port: { network_id: net.id, device_owner: 'compute:nova', device_id: `b7f1c9a4-0000-4000-8000-0000000000${host.slice(-1) === 'a' ? '01' : '02'}`, 'binding:host_id': host } }, 'port');
    const [pa, pb] = [await bound(HOST_A), await bound(HOST_B)];
    const vmA = await plugVm(HOST_A, pa);
    await plugVm(HOST_B, pb);
    await waitUntil('both ports ACTIVE', async () => {
      const all = await Promise.all([pa, pb].map((p) => must<Port>('GET', `/ports/${p.id}`, undefined, 'port')));
      return all.every((p) => p.status === 'ACTIVE');
    }, 60_000);
    const tunnel = await inHost(HOST_A, 'ovs-vsctl', '--bare', '--columns=options', 'find', 'Interface', 'type=geneve');
    expect(tunnel).toMatch(/remote_ip="?172\.31\.254\.\d+/);

    const [rxA, rxB] = [underlayRx(HOST_A), underlayRx(HOST_B)];
    // The first echo may go while OVS resolves the remote tunnel end's MAC.
    const answered = Number(execFileSync('ip', ['netns', 'exec', vmA, 'python3', '-c', PING, pb.fixed_ips[0]?.ip_address ?? '', '6'], { encoding: 'utf8' }).trim());
    log(`${answered}/6 echoes answered from ${HOST_A} to ${HOST_B}`);
    expect(answered).toBeGreaterThanOrEqual(4);
    // Requests left host a and answers left host b through the underlay: geneve, not a shortcut.
    expect(underlayRx(HOST_A) - rxA).toBeGreaterThanOrEqual(answered);
    expect(underlayRx(HOST_B) - rxB).toBeGreaterThanOrEqual(answered);

    for (const p of [pa, pb]) expect((await neutron('DELETE', `/ports/${p.id}`)).status).toBe(204);
    expect((await neutron('DELETE', `/networks/${net.id}`)).status).toBe(204);
  });

  test('steady memory of the Neutron processes', () => {
    const nd = cloud.neutronDir;
    const pid = (f: string): number => Number(readFileSync(join(nd, f), 'utf8').trim());
    const mib = (f: string): number => Math.round(treeRssKb(pid(f)) / 1024);
    const rss = { api: mib('neutron-api.pid'), rpc: mib('neutron-rpc.pid'), maintenance: mib('neutron-ovn-maintenance.pid'), mariadb: mib('mysql.pid') };
    log(`RSS MiB: neutron-api (uwsgi master + worker) ${rss.api}, neutron-rpc-server (+ rpc worker) ${rss.rpc}, neutron-ovn-maintenance-worker (+ worker) ${rss.maintenance}, mariadb ${rss.mariadb}`);
    for (const v of Object.values(rss)) expect(v).toBeGreaterThan(10);
  });
});
