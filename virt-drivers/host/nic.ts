/**
 * NIC probe: every physical network interface in /sys/class/net, with or without an IP address.
 *
 * An interface is physical when its sysfs node is not under /sys/devices/virtual (so lo, bridges,
 * bonds, veth, vxlan and ifb are skipped). For each: PCI address and driver (`device`, or its
 * parent for virtio), MAC, operstate, link speed (`speed`, Mb/s; -1 or EINVAL when the link is
 * down), SR-IOV `sriov_totalvfs`/`sriov_numvfs`, NUMA node, and its role: a port, an SR-IOV
 * virtual function (`device/physfn`), or a switchdev representor (`phys_port_name` pfNvfM).
 *
 * systeminformation's `networkInterfaces()` is not used: it starts from `os.networkInterfaces()`,
 * so interfaces without an IP address (SR-IOV PFs, bond slaves, down ports) are invisible; it runs
 * execSync per interface plus nmcli, stalling the event loop ~60 ms with two interfaces; it
 * reports no PCI address or SR-IOV data and guesses "virtual" from MAC prefixes.
 */
import { posix } from 'node:path';
import type { NicFacts } from './facts';
import type { HostFs } from './host-fs';
import { isPciAddress, readPciFunction } from './pci';
import { type Probe, type ProbeResult } from './probe';

export const CLASS_NET = '/sys/class/net';

const REPRESENTOR = /^(c\d+)?pf\d+(vf\d+|sf\d+)$/;

async function pciAddressOf(fs: HostFs, ifname: string): Promise<string | undefined> {
  const device = await fs.resolveLink(`${CLASS_NET}/${ifname}/device`);
  if (!device) return undefined;
  const own = posix.basename(device);
  if (isPciAddress(own)) return own;
  const parent = posix.basename(posix.dirname(device)); // virtio: .../0000:00:03.0/virtio2
  return isPciAddress(parent) ? parent : undefined;
}

function optInt(raw: string | undefined): number | undefined {
  return raw !== undefined && /^-?\d+$/.test(raw) ? Number(raw) : undefined;
}

async function readNic(fs: HostFs, ifname: string): Promise<NicFacts | undefined> {
  const base = `${CLASS_NET}/${ifname}`;
  const node = await fs.resolveLink(base);
  if (!node || node.includes('/devices/virtual/')) return undefined;
  const [address, driverLink, mac, operstate, speedRaw, portName, physfn] = await Promise.all([
    pciAddressOf(fs, ifname),
    fs.resolveLink(`${base}/device/driver`),
    fs.readValue(`${base}/address`),
    fs.readValue(`${base}/operstate`),
    fs.readValue(`${base}/speed`),
    fs.readValue(`${base}/phys_port_name`),
    fs.exists(`${base}/device/physfn`),
  ]);
  const pci = address ? await readPciFunction(fs, address) : undefined;
  const speed = optInt(speedRaw);
  const role: NicFacts['role'] = physfn ? 'vf' : portName && REPRESENTOR.test(portName) ? 'representor' : 'port';
  return {
    name: ifname,
    ...(address ? { address } : {}),
    ...(driverLink ? { driver: posix.basename(driverLink) } : {}),
    ...(mac ? { mac } : {}),
    ...(operstate ? { operstate } : {}),
    ...(speed !== undefined && speed > 0 ? { speedMbps: speed } : {}),
    ...(pci?.sriovTotalVfs !== undefined ? { sriovTotalVfs: pci.sriovTotalVfs } : {}),
    ...(pci?.sriovNumVfs !== undefined ? { sriovNumVfs: pci.sriovNumVfs } : {}),
    ...(pci?.numaNode !== undefined ? { numaNode: pci.numaNode } : {}),
    role,
  };
}

export const nicProbe: Probe<NicFacts[]> = {
  name: 'nic',
  async run({ fs }): Promise<ProbeResult<NicFacts[]>> {
    if (!(await fs.isDirectory(CLASS_NET))) return { detected: false, reason: `${CLASS_NET} does not exist` };
    const names = await fs.list(CLASS_NET);
    const nics = (await Promise.all(names.map((n) => readNic(fs, n)))).filter((n): n is NicFacts => n !== undefined);
    if (nics.length === 0) return { detected: false, reason: `no physical interface in ${CLASS_NET}` };
    return { detected: true, data: nics };
  },
};
