// The OVS VIF plugger against a scripted Exec: the exact ip and ovs-vsctl command lines os-vif's
// ovs plugin would run (normal and hybrid plug, in a namespace and not), idempotency (what exists
// is not created again; unplugging what is gone is fine), and errors that name the port.
import { hybridName, tapName } from '../../../../model/network';
import { VifPlugError, VifTypeNotSupportedError } from '../../../../virt-drivers/net/errors';
import { defaultPlugger } from '../../../../virt-drivers/net/plugger';
import { FakeExec } from '../../../helpers/fake-exec';
import { ovsVif } from '../../../helpers/vifs';

const PORT = '3f1b2c4d-5e6f-4a70-8b91-a2b3c4d5e6f7';
const MAC = 'fa:16:3e:12:34:56';
const VM = '11111111-1111-4111-8111-111111111111';
const TAP = tapName(PORT); // tap3f1b2c4d-5e
const DB = 'unix:/run/openvswitch/db.sock';
const VSCTL = `ovs-vsctl --db=${DB} --timeout=120 --`;
const IDS = `external_ids:iface-id="${PORT}" external_ids:iface-status="active" external_ids:attached-mac="${MAC}" external_ids:vm-uuid="${VM}"`;
const MISSING = (dev: string) => ({ exitCode: 1, stderr: `Device "${dev}" does not exist.\n` });

function plugger(exec: FakeExec, netns?: string) {
  return defaultPlugger(exec, { connection: DB, vsctl: 'ovs-vsctl', timeoutSec: 120, datapathType: 'system', ...(netns ? { netns } : {}) });
}
const lines = (exec: FakeExec): string[] => exec.calls.map((c) => [c.file, ...c.args].join(' '));

describe('OVS VIF plugger', () => {
  test('plug (not hybrid): persistent tap at the MTU, br-int with the binding datapath, the port with the four external_ids in one transaction', async () => {
    const exec = new FakeExec()
      .set(`ip link show dev ${TAP}`, MISSING(TAP))
      .set(`ip tuntap add dev ${TAP} mode tap`, { stdout: '' })
      .set(`ip link set dev ${TAP} mtu 1442 up`, { stdout: '' })
      .set(`${VSCTL} --may-exist add-br br-int -- set Bridge br-int datapath_type=netdev`, { stdout: '' })
      .set(`${VSCTL} --may-exist add-port br-int ${TAP} -- set Interface ${TAP} ${IDS}`, { stdout: '' });
    await plugger(exec).plug(ovsVif(PORT, MAC), VM);
    expect(lines(exec)).toEqual([
      `ip link show dev ${TAP}`,
      `ip tuntap add dev ${TAP} mode tap`,
      `ip link set dev ${TAP} mtu 1442 up`,
      `${VSCTL} --may-exist add-br br-int -- set Bridge br-int datapath_type=netdev`,
      `${VSCTL} --may-exist add-port br-int ${TAP} -- set Interface ${TAP} ${IDS}`,
    ]);
    expect(exec.calls.every((c) => c.outcome === 'ok' || c.args.includes('show'))).toBe(true);
  });

  test('plug again: the tap exists, nothing is created twice; no MTU known: none set; no datapath in the binding: the configured one', async () => {
    const vif = ovsVif(PORT, MAC, { mtu: null, details: { datapath_type: undefined, bridge_name: 'br-alt' } });
    const exec = new FakeExec()
      .set(`ip link show dev ${TAP}`, { stdout: `5: ${TAP}: <BROADCAST> mtu 1500\n` })
      .set(`ip link set dev ${TAP} up`, { stdout: '' })
      .set(`${VSCTL} --may-exist add-br br-alt -- set Bridge br-alt datapath_type=system`, { stdout: '' })
      .set(`${VSCTL} --may-exist add-port br-alt ${TAP} -- set Interface ${TAP} ${IDS}`, { stdout: '' });
    await plugger(exec).plug(vif, VM);
    expect(lines(exec)).not.toContain(`ip tuntap add dev ${TAP} mode tap`);
    expect(exec.calls.every((c) => c.outcome === 'ok')).toBe(true);
  });

  test('in a network namespace every ip command runs with -n; ovs-vsctl talks to that host\'s own db', async () => {
    const exec = new FakeExec()
      .set(`ip -n host-b link show dev ${TAP}`, MISSING(TAP))
      .set(`ip -n host-b tuntap add dev ${TAP} mode tap`, { stdout: '' })
      .set(`ip -n host-b link set dev ${TAP} mtu 1442 up`, { stdout: '' })
      .set(`${VSCTL} --may-exist add-br br-int -- set Bridge br-int datapath_type=netdev`, { stdout: '' })
      .set(`${VSCTL} --may-exist add-port br-int ${TAP} -- set Interface ${TAP} ${IDS}`, { stdout: '' });
    await plugger(exec, 'host-b').plug(ovsVif(PORT, MAC), VM);
    expect(lines(exec).filter((l) => l.startsWith('ip '))).toHaveLength(3);
    expect(lines(exec).filter((l) => l.startsWith('ip ')).every((l) => l.startsWith('ip -n host-b '))).toBe(true);
  });

  test('unplug: del-port --if-exists, then the tap if it is there; a second unplug finds nothing and is fine', async () => {
    const exec = new FakeExec()
      .set(`${VSCTL} --if-exists del-port ${TAP}`, { stdout: '' })
      .set(`ip link show dev ${TAP}`, { stdout: `5: ${TAP}: <BROADCAST>\n` })
      .set(`ip link del dev ${TAP}`, { stdout: '' });
    await plugger(exec).unplug(ovsVif(PORT, MAC));
    expect(lines(exec)).toEqual([`${VSCTL} --if-exists del-port ${TAP}`, `ip link show dev ${TAP}`, `ip link del dev ${TAP}`]);
    exec.set(`ip link show dev ${TAP}`, MISSING(TAP));
    exec.calls.length = 0;
    await plugger(exec).unplug(ovsVif(PORT, MAC));
    expect(lines(exec)).toEqual([`${VSCTL} --if-exists del-port ${TAP}`, `ip link show dev ${TAP}`]);
  });

  test('hybrid plug: qbr bridge, qvb/qvo veth (qvb on qbr), qvo on OVS with the external_ids, the tap on qbr; unplug removes all four', async () => {
    const [qbr, qvb, qvo] = [hybridName('qbr', PORT), hybridName('qvb', PORT), hybridName('qvo', PORT)];
    const vif = ovsVif(PORT, MAC, { details: { ovs_hybrid_plug: true, datapath_type: 'system' }, mtu: 1450 });
    const exec = new FakeExec();
    for (const dev of [qbr, qvb, TAP]) exec.set(`ip link show dev ${dev}`, MISSING(dev));
    for (const l of [
      `ip link add name ${qbr} type bridge forward_delay 0 stp_state 0`,
      `ip link set dev ${qbr} up`,
      `ip link add dev ${qvb} type veth peer name ${qvo}`,
      `ip link set dev ${qvb} mtu 1450 master ${qbr} up`,
      `ip link set dev ${qvo} mtu 1450 up`,
      `${VSCTL} --may-exist add-br br-int -- set Bridge br-int datapath_type=system`,
      `${VSCTL} --may-exist add-port br-int ${qvo} -- set Interface ${qvo} ${IDS}`,
      `ip tuntap add dev ${TAP} mode tap`,
      `ip link set dev ${TAP} mtu 1450 master ${qbr} up`,
    ]) {
      exec.set(l, { stdout: '' });
    }
    await plugger(exec).plug(vif, VM);
    expect(lines(exec).filter((l) => !l.includes(' show '))).toEqual([
      `ip link add name ${qbr} type bridge forward_delay 0 stp_state 0`,
      `ip link set dev ${qbr} up`,
      `ip link add dev ${qvb} type veth peer name ${qvo}`,
      `ip link set dev ${qvb} mtu 1450 master ${qbr} up`,
      `ip link set dev ${qvo} mtu 1450 up`,
      `${VSCTL} --may-exist add-br br-int -- set Bridge br-int datapath_type=system`,
      `${VSCTL} --may-exist add-port br-int ${qvo} -- set Interface ${qvo} ${IDS}`,
      `ip tuntap add dev ${TAP} mode tap`,
      `ip link set dev ${TAP} mtu 1450 master ${qbr} up`,
    ]);

    const un = new FakeExec().set(`${VSCTL} --if-exists del-port ${qvo}`, { stdout: '' });
    for (const dev of [qvb, TAP, qbr]) un.set(`ip link show dev ${dev}`, { stdout: 'x\n' }).set(`ip link del dev ${dev}`, { stdout: '' });
    await plugger(un).unplug(vif);
    expect(lines(un).filter((l) => !l.includes(' show '))).toEqual([`${VSCTL} --if-exists del-port ${qvo}`, `ip link del dev ${qvb}`, `ip link del dev ${TAP}`, `ip link del dev ${qbr}`]);
  });

  test.each(['binding_failed', 'unbound', 'vhostuser', 'bridge'])('vif_type %s: VifTypeNotSupportedError naming port and type, nothing run', async (type) => {
    const exec = new FakeExec();
    const err = await plugger(exec).plug(ovsVif(PORT, MAC, { type }), VM).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VifTypeNotSupportedError);
    expect((err as Error).message).toContain(PORT);
    expect((err as Error).message).toContain(type);
    expect(exec.calls).toEqual([]);
  });

  test('a failing command: VifPlugError naming the port and the step, with ovs-vsctl\'s words', async () => {
    const exec = new FakeExec()
      .set(`ip link show dev ${TAP}`, { stdout: 'x\n' })
      .set(`ip link set dev ${TAP} mtu 1442 up`, { stdout: '' })
      .set(`${VSCTL} --may-exist add-br br-int -- set Bridge br-int datapath_type=netdev`, { exitCode: 1, stderr: 'ovs-vsctl: unix:/run/openvswitch/db.sock: database connection failed (No such file or directory)\n' });
    const err = await plugger(exec).plug(ovsVif(PORT, MAC), VM).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VifPlugError);
    expect((err as Error).message).toMatch(new RegExp(`port ${PORT}: creating OVS bridge br-int failed: .*database connection failed`));
  });

  test('a namespace that does not exist is an error, not "the tap is missing"', async () => {
    const exec = new FakeExec().set(`ip -n nope link show dev ${TAP}`, { exitCode: 1, stderr: 'Cannot open network namespace "nope": No such file or directory\n' });
    await expect(plugger(exec, 'nope').plug(ovsVif(PORT, MAC), VM)).rejects.toThrow(/creating tap .*Cannot open network namespace/);
    expect(lines(exec)).toEqual([`ip -n nope link show dev ${TAP}`]);
  });
});
