/**
 * NIC facts to providers.
 *
 * Each physical port (not an SR-IOV VF, not a switchdev representor) with something to report gets
 * a child of the compute node named `<nodename>:<ifname>` with:
 * - `SRIOV_NET_VF` = `sriov_totalvfs`, and the trait `HW_NIC_SRIOV`, when the port has SR-IOV;
 * - one `CUSTOM_PHYSNET_<NAME>` trait per physnet `[network] physical_device_mappings` maps to it;
 * - only with `[network] report_bandwidth_inventory`: `NET_BW_EGR_KILOBIT_PER_SEC` /
 *   `NET_BW_IGR_KILOBIT_PER_SEC` = link speed (Mb/s) x 1000, or what `[network]
 *   resource_provider_bandwidths` says for the interface (operator config wins; 0 reports none).
 * A port with none of these gets no provider (Placement rejects a total of 0, and an empty
 * provider says nothing).
 *
 * Bandwidth is off by default because in an OpenStack cloud Neutron's placement plugin owns it: it
 * creates `<host>:<agent>[:<bridge>]` providers of its own under our root with NET_BW_* (and
 * NET_PACKET_RATE_*) inventory, and binds a minimum-bandwidth port only through those. Ours
 * would be capacity counted twice that no port could ever use; nova-compute reports none either.
 * The link speed stays a fact (`discover --facts`) whatever the option says.
 *
 * Link speed is only readable while the link is up. A port whose link goes down keeps the last
 * speed seen by this process (`SpeedMemory`) rather than losing its bandwidth inventory, which may
 * have allocations, on every cable flap.
 */
import { normalizeCustomName, type InventoryRecord } from '../../model/provider-types';
import type { NicFacts } from '../host/facts';
import { pciSlot } from '../host/pci';
import { deviceRecord } from './gpu';
import { nicProviderName } from './ids';
import type { LayoutOptions } from './options';
import type { ChildPlan } from './plan-types';

/** Last link speed seen per interface, for ports whose link is down now. */
export class SpeedMemory {
  private readonly speeds = new Map<string, number>();

  /** The speed to use for `nic`: its own, else the last one seen. Records what it sees. */
  speedOf(nic: NicFacts): number | undefined {
    if (nic.speedMbps !== undefined) {
      this.speeds.set(nic.name, nic.speedMbps);
      return nic.speedMbps;
    }
    return this.speeds.get(nic.name);
  }
}

/** The trait for a physnet, as neutron spells it. */
export function physnetTrait(physnet: string): string {
  return normalizeCustomName(`PHYSNET_${physnet}`);
}

/** The uuid key and lineage of a port: its PCI function, and its card. */
export function nicIdentity(nic: NicFacts): { key: string; lineage: string } {
  return nic.address
    ? { key: `nic:${nic.address}`, lineage: `nic:${pciSlot(nic.address)}` }
    : { key: `nic:name:${nic.name}`, lineage: `nic:name:${nic.name}` };
}

function bandwidthRecords(nic: NicFacts, opts: LayoutOptions, speeds?: SpeedMemory): Record<string, InventoryRecord> {
  // Seen speeds are remembered even when not reported, for a configuration reloaded to report them.
  const speed = speeds ? speeds.speedOf(nic) : nic.speedMbps;
  if (!opts.reportBandwidth) return {};
  const fromLink = speed !== undefined && speed > 0 ? speed * 1000 : undefined;
  const conf = opts.bandwidths.get(nic.name);
  const egress = conf?.egressKbps ?? fromLink;
  const ingress = conf?.ingressKbps ?? fromLink;
  const out: Record<string, InventoryRecord> = {};
  if (egress !== undefined && egress > 0) out.NET_BW_EGR_KILOBIT_PER_SEC = deviceRecord(egress);
  if (ingress !== undefined && ingress > 0) out.NET_BW_IGR_KILOBIT_PER_SEC = deviceRecord(ingress);
  return out;
}

/** Plans the NIC part of the tree. */
export function planNics(nodename: string, nics: readonly NicFacts[], opts: LayoutOptions, speeds?: SpeedMemory): ChildPlan[] {
  const out: ChildPlan[] = [];
  for (const nic of nics) {
    if (nic.role !== 'port') continue;
    if (opts.ignoredDevices.has(nic.name) || (nic.address && opts.ignoredDevices.has(nic.address))) continue;
    const inventories = bandwidthRecords(nic, opts, speeds);
    const traits = (opts.physnets.get(nic.name) ?? []).map(physnetTrait);
    if (nic.sriovTotalVfs !== undefined && nic.sriovTotalVfs > 0) {
      inventories.SRIOV_NET_VF = deviceRecord(nic.sriovTotalVfs);
      traits.push('HW_NIC_SRIOV');
    }
    if (Object.keys(inventories).length === 0 && traits.length === 0) continue;
    out.push({
      kind: 'nic',
      name: nicProviderName(nodename, nic.name),
      ...nicIdentity(nic),
      inventories,
      traits: [...new Set(traits)].sort(),
    });
  }
  return out;
}
