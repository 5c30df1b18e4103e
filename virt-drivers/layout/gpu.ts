/**
 * GPU facts to providers, following nova's libvirt conventions.
 *
 * Each physical GPU becomes one child of the compute node named `<nodename>_pci_<dddd_bb_ss_f>`
 * with exactly one of these inventories, decided in this order:
 * 1. MIG enabled (NVIDIA): one custom class per MIG profile, `CUSTOM_MIG_<PROFILE>` (profile
 *    `1g.10gb` -> `CUSTOM_MIG_1G_10GB`, `1g.10gb+me` -> `CUSTOM_MIG_1G_10GB_ME`), total = GPU
 *    instances of that profile that have a compute instance. No instances: no provider.
 * 2. An mdev type listed in `[devices] enabled_mdev_types` (the first listed that the GPU offers):
 *    `VGPU`, or the class `[devices] mdev_classes` names for the type; total = mdevs of that type
 *    already created + `available_instances` (as nova counts). The trait `CUSTOM_<TYPE>` names the
 *    type (`nvidia-35` -> `CUSTOM_NVIDIA_35`). With `vgpu_provider_layout = root` the total is
 *    added to the compute node instead and the GPU gets no child (nova before Stein).
 * 3. Otherwise, with `report_passthrough_gpus`: `PGPU` total 1 (the whole device, passthrough).
 *
 * Every GPU child carries: `CUSTOM_GPU_<VENDOR>` (NVIDIA, AMD, INTEL, or VENDOR_<id>),
 * `CUSTOM_GPU_PCI_<VENDORID>_<DEVICEID>`, `CUSTOM_GPU_MODEL_<model>` and
 * `CUSTOM_GPU_MEMORY_<n>GB` (memory rounded to whole GiB) when known, and the CUDA compute
 * capability as `HW_GPU_CUDA_COMPUTE_CAPABILITY_V<x>_<y>` when os-traits has it, else the same
 * name with a `CUSTOM_` prefix (os-traits stops at 7.2). Device inventories have
 * `allocation_ratio` 1.0: a device cannot be overcommitted.
 *
 * A GPU whose facts are `incomplete` (nvidia-smi failed) is left as the tree has it.
 */
import { normalizeCustomName, type InventoryRecord } from '../../model/provider-types';
import type { GpuFacts } from '../host/facts';
import { standardOrCustomTrait } from '../traits';
import { gpuProviderName } from './ids';
import type { LayoutOptions } from './options';
import type { ChildPlan } from './plan-types';

export interface GpuPlan {
  readonly children: ChildPlan[];
  /** Device inventory that goes on the root (root vGPU layout), by class. */
  readonly rootTotals: Record<string, number>;
  /** Names of GPU providers to leave untouched (incomplete facts). */
  readonly keep: string[];
}

/** A device inventory record: total, and ratio 1 (never overcommitted). */
export function deviceRecord(total: number): InventoryRecord {
  return { total, reserved: 0, min_unit: 1, max_unit: total, step_size: 1, allocation_ratio: 1.0 };
}

/** The class of a MIG profile. */
export function migClass(profile: string): string {
  return normalizeCustomName(`MIG_${profile}`);
}

/** The traits describing a GPU (vendor, PCI ids, model, memory, compute capability). */
export function gpuTraits(gpu: GpuFacts): string[] {
  const vendor = gpu.vendor === 'other' ? `VENDOR_${gpu.vendorId}` : gpu.vendor;
  const traits = [normalizeCustomName(`GPU_${vendor}`), normalizeCustomName(`GPU_PCI_${gpu.vendorId}_${gpu.deviceId}`)];
  if (gpu.model) traits.push(normalizeCustomName(`GPU_MODEL_${gpu.model}`));
  if (gpu.memoryMb !== undefined && gpu.memoryMb >= 512) traits.push(`CUSTOM_GPU_MEMORY_${Math.round(gpu.memoryMb / 1024)}GB`);
  if (gpu.computeCapability) {
    traits.push(standardOrCustomTrait(`HW_GPU_CUDA_COMPUTE_CAPABILITY_V${gpu.computeCapability.replace('.', '_')}`));
  }
  return traits.sort();
}

function enabledType(gpu: GpuFacts, opts: LayoutOptions): { type: string; total: number } | undefined {
  for (const type of opts.enabledMdevTypes) {
    const t = gpu.mdevTypes.find((m) => m.type === type);
    if (t) return { type, total: t.existing + t.availableInstances };
  }
  return undefined;
}

/** Plans the GPU part of the tree. */
export function planGpus(nodename: string, gpus: readonly GpuFacts[], opts: LayoutOptions): GpuPlan {
  const plan: GpuPlan = { children: [], rootTotals: {}, keep: [] };
  for (const gpu of gpus) {
    if (opts.ignoredDevices.has(gpu.address)) continue;
    const name = gpuProviderName(nodename, gpu.address);
    if (gpu.incomplete) {
      plan.keep.push(name);
      continue;
    }
    const child = (inventories: Record<string, InventoryRecord>, extra: string[] = []): ChildPlan => ({
      kind: 'gpu',
      name,
      key: `gpu:${gpu.address}`,
      lineage: `gpu:${gpu.address}`,
      inventories,
      traits: [...gpuTraits(gpu), ...extra].sort(),
    });
    if (gpu.migEnabled) {
      const inv: Record<string, InventoryRecord> = {};
      for (const p of gpu.migProfiles ?? []) if (p.count > 0) inv[migClass(p.profile)] = deviceRecord(p.count);
      if (Object.keys(inv).length > 0) plan.children.push(child(inv));
      continue;
    }
    const mdev = enabledType(gpu, opts);
    if (mdev) {
      if (mdev.total <= 0) continue;
      const rc = opts.mdevClasses.get(mdev.type) ?? 'VGPU';
      if (opts.vgpuLayout === 'root') plan.rootTotals[rc] = (plan.rootTotals[rc] ?? 0) + mdev.total;
      else plan.children.push(child({ [rc]: deviceRecord(mdev.total) }, [normalizeCustomName(mdev.type)]));
      continue;
    }
    if (opts.reportPassthroughGpus) plan.children.push(child({ PGPU: deviceRecord(1) }));
  }
  return plan;
}
