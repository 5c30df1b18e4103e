/**
 * Synthetic host shapes for benchmarks, built as a TreeSource. `new SyntheticHost(69)` is the
 * 69-provider tree the tracker and nova's report client both register in the placement-sync
 * scenario (`nova-report-client.ts` hands nova the same tree): a root with VCPU 64, MEMORY_MB
 * 512000, DISK_GB 2000 and 5 traits; 4 NICs with bandwidth, 64 VFs and two custom traits; 8 GPUs
 * with VGPU 8, each with 7 MIG children (CUSTOM_MIG_1G_10GB 1). Other sizes keep that order (NICs
 * first, then GPUs with their MIG children) until n providers.
 */
import { createHash } from 'node:crypto';
import type { TreeSource } from '../tracker/tracker';
import type { ProviderTree } from '../model/provider-tree';
import type { MoveInstruction } from '../model/provider-types';

/** A uuid derived from a name, so repeated cycles describe the same providers. */
export function nameUuid(name: string): string {
  const h = createHash('sha1').update(name).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export class SyntheticHost implements TreeSource {
  memoryReserved = 512;
  constructor(readonly providers: number) {}

  updateProviderTree(tree: ProviderTree, nodename: string): Promise<readonly MoveInstruction[]> {
    tree.updateInventory(nodename, {
      VCPU: { total: 64 },
      MEMORY_MB: { total: 512000, reserved: this.memoryReserved },
      DISK_GB: { total: 2000 },
    });
    tree.updateTraits(nodename, ['COMPUTE_NODE', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42', 'COMPUTE_VOLUME_MULTI_ATTACH', 'COMPUTE_NET_ATTACH_INTERFACE']);
    let left = this.providers - 1;
    const child = (name: string, parent: string): string | undefined => {
      if (left <= 0) return undefined;
      left--;
      const uuid = nameUuid(`${nodename}/${name}`);
      if (!tree.exists(uuid)) tree.newChild(name, parent, uuid);
      return uuid;
    };
    for (let n = 0; n < 4; n++) {
      const nic = child(`${nodename}:ens${n}f0`, nodename);
      if (!nic) break;
      tree.updateInventory(nic, { NET_BW_EGR_KILOBIT_PER_SEC: { total: 25000000 }, NET_BW_IGR_KILOBIT_PER_SEC: { total: 25000000 }, SRIOV_NET_VF: { total: 64 } });
      tree.updateTraits(nic, ['CUSTOM_PHYSNET_DATA', 'CUSTOM_VNIC_TYPE_DIRECT']);
    }
    for (let g = 0; left > 0; g++) {
      const gpu = child(`${nodename}_pci_0000_${(0x10 + g).toString(16)}_00_0`, nodename);
      if (!gpu) break;
      tree.updateInventory(gpu, { VGPU: { total: 8 } });
      for (let m = 0; m < 7; m++) {
        const mig = child(`${nodename}_pci_0000_${(0x10 + g).toString(16)}_00_0_mig_${m}`, gpu);
        if (!mig) break;
        tree.updateInventory(mig, { CUSTOM_MIG_1G_10GB: { total: 1 } });
      }
    }
    return Promise.resolve([]);
  }
}
