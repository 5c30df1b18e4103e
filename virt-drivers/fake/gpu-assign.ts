/**
 * Which GPU a fake instance's vGPUs are on, decided at spawn the way libvirt would place its
 * mdevs: the GPU provider its allocation names, or, when vGPUs were allocated on the root (the
 * pre-Stein layout), the first GPU (by PCI address) with room. The answer feeds the reshape: a
 * consumer's vGPUs move to the child of the GPU they really are on.
 */
import type { HostFacts } from '../host/discover';
import type { LayoutOptions } from '../layout/options';
import type { InstanceSpec } from '../types';
import type { FakeHypervisor } from './hypervisor';

const ROOT_CLASSES = new Set(['VCPU', 'MEMORY_MB', 'DISK_GB']);

function deviceUnits(resources: Readonly<Record<string, number>>, classes: ReadonlySet<string>): number {
  return Object.entries(resources).reduce((n, [rc, amount]) => (classes.has(rc) ? n + amount : n), 0);
}

/** The PCI address of the GPU `instance` uses, if it has vGPUs. */
export function assignGpu(
  instance: InstanceSpec,
  facts: HostFacts | undefined,
  lineages: ReadonlyMap<string, string>,
  hypervisor: FakeHypervisor,
  layout: LayoutOptions,
): string | undefined {
  for (const [provider, resources] of Object.entries(instance.allocations)) {
    const lineage = lineages.get(provider);
    if (lineage?.startsWith('gpu:') && Object.keys(resources).some((rc) => !ROOT_CLASSES.has(rc))) return lineage.slice(4);
  }
  const vgpuClasses = new Set(['VGPU', ...layout.mdevClasses.values()]);
  const wanted = Object.values(instance.allocations).reduce((n, r) => n + deviceUnits(r, vgpuClasses), 0);
  if (wanted === 0 || facts?.gpu.status !== 'detected') return undefined;
  for (const gpu of [...facts.gpu.data].sort((a, b) => a.address.localeCompare(b.address))) {
    const type = layout.enabledMdevTypes.map((t) => gpu.mdevTypes.find((m) => m.type === t)).find((m) => m !== undefined);
    if (!type || gpu.migEnabled) continue;
    const used = hypervisor
      .list()
      .map((i) => hypervisor.find(i.uuid))
      .filter((i) => i?.gpu === gpu.address)
      .reduce((n, i) => n + Object.values(i?.allocations ?? {}).reduce((m, r) => m + deviceUnits(r, vgpuClasses), 0), 0);
    if (type.existing + type.availableInstances - used >= wanted) return gpu.address;
  }
  return undefined;
}
