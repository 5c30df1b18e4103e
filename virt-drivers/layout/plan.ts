/**
 * Host facts + configuration -> the plan of the compute node's subtree (`HostPlan`).
 *
 * Root provider (named after the node; the tracker creates it):
 * - `VCPU` = logical CPUs online, reserved `reserved_host_cpus`;
 * - `MEMORY_MB` = MemTotal in MiB (floor), reserved `reserved_host_memory_mb`;
 * - `DISK_GB` = size of the instances_path filesystem in GiB (floor), reserved
 *   `reserved_host_disk_mb` rounded up to GiB; left off when a sharing provider serves DISK_GB
 *   (`[compute] disk_gb_on_root`);
 * - `allocation_ratio` only when `*_allocation_ratio` is set (else the tracker keeps Placement's);
 *   reserved never exceeds total (Placement would reject it);
 * - traits: `COMPUTE_NODE`, the driver's capability traits, `HW_CPU_X86_*` from the cpu flags,
 *   `HW_CPU_HYPERTHREADING` with more than one thread per core, and `CUSTOM_HUGEPAGES_<size>`
 *   (2M, 1G, ...) for each huge page size with pages configured.
 * Children: GPUs (`gpu.ts`) and NICs (`nic.ts`).
 *
 * A probe that failed leaves its part as the tree has it (classes, traits, children); a probe
 * that found nothing removes its part.
 */
import type { ProviderTree } from '../../model/provider-tree';
import type { InventoryRecord } from '../../model/provider-types';
import type { HostFacts } from '../host/discover';
import type { HugepagePool } from '../host/facts';
import { CPU_FLAG_TRAITS, cpuFlagTraits } from '../traits';
import { planGpus } from './gpu';
import { planNics, type SpeedMemory } from './nic';
import type { LayoutOptions } from './options';
import type { HostPlan } from './plan-types';

const ROOT_CLASSES = new Set(['VCPU', 'MEMORY_MB', 'DISK_GB']);
const HUGEPAGE_TRAIT = /^CUSTOM_HUGEPAGES_/;
export const SHARES_VIA_AGGREGATE = 'MISC_SHARES_VIA_AGGREGATE';

/** `CUSTOM_HUGEPAGES_2M` for 2048 kB pages, `_1G` for 1048576 kB. */
export function hugepageTrait(sizeKb: number): string {
  const size = sizeKb % (1024 * 1024) === 0 ? `${sizeKb / 1024 / 1024}G` : sizeKb % 1024 === 0 ? `${sizeKb / 1024}M` : `${sizeKb}K`;
  return `CUSTOM_HUGEPAGES_${size}`;
}

/** The sharing provider (another root) serving DISK_GB to `root`'s aggregates, if any. */
export function findDiskSharingProvider(tree: ProviderTree, root: string): string | undefined {
  if (!tree.exists(root)) return undefined;
  const mine = new Set(tree.data(root).aggregates);
  if (mine.size === 0) return undefined;
  for (const uuid of tree.rootUuids()) {
    const p = tree.data(uuid);
    if (p.uuid === tree.uuidOf(root)) continue;
    if (p.traits.includes(SHARES_VIA_AGGREGATE) && p.inventories.DISK_GB && p.aggregates.some((a) => mine.has(a))) return p.uuid;
  }
  return undefined;
}

function record(total: number, reserved: number, ratio: number | undefined, rc: string, notes: string[]): InventoryRecord {
  if (reserved > total) notes.push(`reserved ${rc} ${reserved} exceeds the total ${total}; reporting ${total} reserved`);
  return {
    total,
    reserved: Math.min(reserved, total),
    min_unit: 1,
    max_unit: total,
    step_size: 1,
    ...(ratio === undefined ? {} : { allocation_ratio: ratio }),
  };
}

export interface PlanInput {
  readonly nodename: string;
  readonly facts: HostFacts;
  readonly options: LayoutOptions;
  /** The tree being updated (for sharing providers). */
  readonly tree: ProviderTree;
  readonly speeds?: SpeedMemory;
}

/** Builds the plan. Never throws for missing facts; failed probes freeze their part. */
export function planHost({ nodename, facts, options: o, tree, speeds }: PlanInput): HostPlan {
  const notes: string[] = [];
  const inv: Record<string, InventoryRecord> = {};
  const traits = new Set<string>(['COMPUTE_NODE']);
  for (const [trait, on] of Object.entries(o.capabilityTraits)) if (on) traits.add(trait);

  const { cpu, memory, disk, gpu, nic } = facts;
  if (cpu.status === 'detected') {
    const c = cpu.data;
    inv.VCPU = record(c.online, o.reservedHostCpus, o.cpuAllocationRatio, 'VCPU', notes);
    for (const t of cpuFlagTraits(c.flags, c.vendor)) traits.add(t);
    if (c.threadsPerCore > 1) traits.add('HW_CPU_HYPERTHREADING');
  }
  if (memory.status === 'detected') {
    const m = memory.data;
    if (m.totalMb > 0) inv.MEMORY_MB = record(m.totalMb, o.reservedHostMemoryMb, o.ramAllocationRatio, 'MEMORY_MB', notes);
    m.hugepages.filter((p: HugepagePool) => p.total > 0).forEach((p) => traits.add(hugepageTrait(p.sizeKb)));
  }
  const sharing = o.diskGbOnRoot === 'true' ? undefined : findDiskSharingProvider(tree, nodename);
  const diskOnRoot = o.diskGbOnRoot === 'true' || (o.diskGbOnRoot === 'auto' && sharing === undefined);
  if (disk.status === 'detected' && diskOnRoot) {
    inv.DISK_GB = record(disk.data.totalGb, Math.ceil(o.reservedHostDiskMb / 1024), o.diskAllocationRatio, 'DISK_GB', notes);
  }

  const gpuPlan = gpu.status === 'detected' ? planGpus(nodename, gpu.data, o) : { children: [], rootTotals: {}, keep: [] };
  for (const [rc, total] of Object.entries(gpuPlan.rootTotals)) {
    inv[rc] = { total, reserved: 0, min_unit: 1, max_unit: total, step_size: 1, allocation_ratio: 1.0 };
  }
  const nicChildren = nic.status === 'detected' ? planNics(nodename, nic.data, o, speeds) : [];

  const gpuFrozen = gpu.status === 'failed' || (o.vgpuLayout === 'root' && gpuPlan.keep.length > 0);
  const keep = new Set(gpuPlan.keep);
  return {
    rootInventories: inv,
    keepRootClass: (rc) =>
      (rc === 'VCPU' && cpu.status === 'failed') ||
      (rc === 'MEMORY_MB' && memory.status === 'failed') ||
      (rc === 'DISK_GB' && disk.status === 'failed' && diskOnRoot) ||
      (!ROOT_CLASSES.has(rc) && gpuFrozen),
    rootTraits: [...traits].sort(),
    ownsRootTrait: (t) =>
      t === 'COMPUTE_NODE' || t === 'HW_CPU_HYPERTHREADING' || CPU_FLAG_TRAITS.has(t) || HUGEPAGE_TRAIT.test(t) || t in o.capabilityTraits,
    keepRootTrait: (t) =>
      ((CPU_FLAG_TRAITS.has(t) || t === 'HW_CPU_HYPERTHREADING') && cpu.status === 'failed') ||
      (HUGEPAGE_TRAIT.test(t) && memory.status === 'failed'),
    children: [...gpuPlan.children, ...nicChildren],
    keepChild: (name, kind) => (kind === 'gpu' ? gpu.status === 'failed' || keep.has(name) : nic.status === 'failed'),
    ...(sharing !== undefined && !diskOnRoot ? { diskGbProvider: sharing } : {}),
    notes,
  };
}
