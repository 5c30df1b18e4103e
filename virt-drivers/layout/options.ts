/**
 * The configuration the provider-tree layout reads, parsed out of the agent's config into plain
 * typed values (the config keeps oslo-style string lists so `check-config --show` prints them as
 * written).
 *
 * It is: a pure translation, validated already by `config/schema.ts`. It is not: a second source
 * of defaults; every default lives in the schema.
 */
import type { AgentConfig } from '../../config/schema';

export interface Bandwidth {
  /** kbit/s; undefined: from the link speed. */
  readonly egressKbps?: number;
  readonly ingressKbps?: number;
}

export interface LayoutOptions {
  readonly reservedHostCpus: number;
  readonly reservedHostMemoryMb: number;
  readonly reservedHostDiskMb: number;
  /** Undefined: leave `allocation_ratio` out of the record (the tracker keeps Placement's). */
  readonly cpuAllocationRatio?: number;
  readonly ramAllocationRatio?: number;
  readonly diskAllocationRatio?: number;
  readonly diskGbOnRoot: 'auto' | 'true' | 'false';
  readonly enabledMdevTypes: readonly string[];
  /** mdev type -> resource class (VGPU when absent). */
  readonly mdevClasses: ReadonlyMap<string, string>;
  readonly vgpuLayout: 'per_gpu' | 'root';
  readonly reportPassthroughGpus: boolean;
  /** PCI addresses (lower case) and interface names never reported. */
  readonly ignoredDevices: ReadonlySet<string>;
  /** Interface -> physnets. */
  readonly physnets: ReadonlyMap<string, readonly string[]>;
  /**
   * Whether NIC providers carry NET_BW_* inventory (`[network] report_bandwidth_inventory`); off
   * where Neutron's placement plugin reports bandwidth on providers of its own.
   */
  readonly reportBandwidth: boolean;
  /** Interface -> configured bandwidth (read only with `reportBandwidth`). */
  readonly bandwidths: ReadonlyMap<string, Bandwidth>;
  /** Capability traits of the driver: trait -> whether it applies. */
  readonly capabilityTraits: Readonly<Record<string, boolean>>;
}

function splitPairs(items: readonly string[]): Array<[string, string]> {
  return items.map((item) => {
    const i = item.indexOf(':');
    return [item.slice(0, i), item.slice(i + 1)];
  });
}

function kbps(raw: string | undefined): number | undefined {
  return raw === undefined || raw === '' ? undefined : Number(raw);
}

/** The layout options of a validated configuration. */
export function layoutOptionsFromConfig(config: AgentConfig, capabilityTraits: Readonly<Record<string, boolean>> = {}): LayoutOptions {
  const d = config.DEFAULT;
  const physnets = new Map<string, string[]>();
  for (const [physnet, ifname] of splitPairs(config.network.physical_device_mappings)) {
    physnets.set(ifname, [...(physnets.get(ifname) ?? []), physnet]);
  }
  const bandwidths = new Map<string, Bandwidth>();
  for (const item of config.network.resource_provider_bandwidths) {
    const [ifname = '', egress, ingress] = item.split(':');
    const egressKbps = kbps(egress);
    const ingressKbps = kbps(ingress);
    bandwidths.set(ifname, {
      ...(egressKbps === undefined ? {} : { egressKbps }),
      ...(ingressKbps === undefined ? {} : { ingressKbps }),
    });
  }
  return {
    reservedHostCpus: d.reserved_host_cpus,
    reservedHostMemoryMb: d.reserved_host_memory_mb,
    reservedHostDiskMb: d.reserved_host_disk_mb,
    ...(d.cpu_allocation_ratio === undefined ? {} : { cpuAllocationRatio: d.cpu_allocation_ratio }),
    ...(d.ram_allocation_ratio === undefined ? {} : { ramAllocationRatio: d.ram_allocation_ratio }),
    ...(d.disk_allocation_ratio === undefined ? {} : { diskAllocationRatio: d.disk_allocation_ratio }),
    diskGbOnRoot: config.compute.disk_gb_on_root,
    enabledMdevTypes: config.devices.enabled_mdev_types,
    mdevClasses: new Map(splitPairs(config.devices.mdev_classes)),
    vgpuLayout: config.devices.vgpu_provider_layout,
    reportPassthroughGpus: config.devices.report_passthrough_gpus,
    ignoredDevices: new Set(config.devices.ignored_devices.map((s) => (/^[0-9a-fA-F]{4}:/.test(s) ? s.toLowerCase() : s))),
    physnets,
    reportBandwidth: config.network.report_bandwidth_inventory,
    bandwidths,
    capabilityTraits,
  };
}
