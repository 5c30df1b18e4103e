/**
 * Host facts: what the probes found, as plain data. The same shapes come out of the real probes
 * (`host/*.ts`) and out of the fake driver's host file (`fake/host-file.ts`), so the provider-tree
 * layout (`layout/`) never knows where they came from.
 *
 * It is: facts about hardware, in the units the kernel or the tool reports (MiB, kB, Mb/s).
 * It is not: inventory. Turning facts into resource classes, totals and traits is `layout/`'s job.
 */

/** A pool of huge pages of one size. */
export interface HugepagePool {
  readonly sizeKb: number;
  /** Pages configured (`nr_hugepages`). */
  readonly total: number;
  /** Pages not in use (`free_hugepages`), when known. */
  readonly free?: number;
}

/** The CPUs of one NUMA node. */
export interface NumaCpuFacts {
  readonly id: number;
  /** Logical CPU ids on this node, online or not. */
  readonly cpus: readonly number[];
}

/** The memory of one NUMA node. */
export interface NumaMemoryFacts {
  readonly id: number;
  /** The node's MemTotal in MiB, rounded down. */
  readonly memoryMb?: number;
  readonly hugepages: readonly HugepagePool[];
}

export interface CpuFacts {
  /** Logical CPUs online: VCPU total. */
  readonly online: number;
  readonly sockets: number;
  /** Physical cores in the whole host. */
  readonly cores: number;
  readonly threadsPerCore: number;
  /** `vendor_id` of /proc/cpuinfo (GenuineIntel, AuthenticAMD), when shown. */
  readonly vendor?: string;
  readonly model?: string;
  /** Kernel architecture name (x86_64, aarch64), when known. */
  readonly arch?: string;
  /** /proc/cpuinfo flag names, sorted. */
  readonly flags: readonly string[];
  readonly numaNodes: readonly NumaCpuFacts[];
}

export interface MemoryFacts {
  /** MemTotal in MiB, rounded down. */
  readonly totalMb: number;
  /** Host-wide huge page pools, one per size. */
  readonly hugepages: readonly HugepagePool[];
  /** Per NUMA node memory and huge pages (empty on a host without NUMA information). */
  readonly numaNodes: readonly NumaMemoryFacts[];
}

export interface DiskFacts {
  /** The configured instances_path. */
  readonly path: string;
  /** The existing directory that was measured (instances_path or its nearest existing ancestor). */
  readonly measuredPath: string;
  /** Filesystem size in GiB, rounded down. */
  readonly totalGb: number;
  readonly availableGb: number;
}

/** A mediated-device type a GPU offers (`/sys/class/mdev_bus/<addr>/mdev_supported_types/<type>`). */
export interface MdevTypeFacts {
  /** Directory name, e.g. `nvidia-35`. */
  readonly type: string;
  /** The `name` file, e.g. `GRID M60-0B`, when present. */
  readonly name?: string;
  /** More mdevs of this type that can still be created. */
  readonly availableInstances: number;
  /** Mdevs of this type that exist already (`devices/`). */
  readonly existing: number;
}

/** MIG GPU instances of one profile on one GPU. */
export interface MigProfileFacts {
  /** Profile name as nvidia-smi prints it without the "MIG " prefix, e.g. `1g.10gb`. */
  readonly profile: string;
  /** GPU instances of this profile that have at least one compute instance. */
  readonly count: number;
}

export type GpuVendor = 'nvidia' | 'amd' | 'intel' | 'other';

export interface GpuFacts {
  /** PCI address, `dddd:bb:ss.f`, lower case. */
  readonly address: string;
  /** PCI vendor and device ids, four lower-case hex digits. */
  readonly vendorId: string;
  readonly deviceId: string;
  readonly vendor: GpuVendor;
  /** Marketing name from the vendor tool or driver, when known. */
  readonly model?: string;
  readonly memoryMb?: number;
  readonly numaNode?: number;
  /** Kernel driver bound to the device (nvidia, amdgpu, i915, vfio-pci), when bound. */
  readonly driver?: string;
  /** CUDA compute capability ("9.0"), NVIDIA only. */
  readonly computeCapability?: string;
  /** MIG mode is enabled; `migProfiles` lists its usable GPU instances. */
  readonly migEnabled?: boolean;
  readonly migProfiles?: readonly MigProfileFacts[];
  readonly mdevTypes: readonly MdevTypeFacts[];
  /**
   * Set when part of what decides this GPU's inventory could not be learned (nvidia-smi failed
   * or hung): the layout keeps whatever the tree already says about this GPU.
   */
  readonly incomplete?: string;
}

export interface NicFacts {
  /** Interface name (`ens1f0`). */
  readonly name: string;
  /** PCI address of the function behind it, when it is a PCI device. */
  readonly address?: string;
  readonly driver?: string;
  readonly mac?: string;
  readonly operstate?: string;
  /** Link speed in Mb/s; undefined when the link is down or the driver does not say. */
  readonly speedMbps?: number;
  /** `sriov_totalvfs` of the function (0 or undefined: no SR-IOV). */
  readonly sriovTotalVfs?: number;
  /** `sriov_numvfs`: VFs created now. */
  readonly sriovNumVfs?: number;
  readonly numaNode?: number;
  /**
   * `port`: a physical port. `vf`: an SR-IOV virtual function (`device/physfn` exists), counted
   * in its PF's SRIOV_NET_VF. `representor`: a switchdev VF/PF representor (`phys_port_name` such
   * as pf0vf3), sharing its PF's device. Only ports get providers.
   */
  readonly role: 'port' | 'vf' | 'representor';
}
