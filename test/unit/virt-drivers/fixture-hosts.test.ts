/**
 * The recorded fixture hosts (`test/fixtures/hosts/README.md`), each discovered from scratch by the fake driver on its recorded
 * sysfs/procfs tree and tool outputs, compared with the exact provider tree in
 * test/fixtures/hosts/<name>/expected-tree.json (UPDATE_EXPECTED_TREES=1 rewrites those files;
 * review the diff). Each test also states the facts that matter for that host explicitly.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ProviderJson } from '../../../agent/cli/render-tree';
import { discoverFixture, FIXTURE_ROOT_UUID, FIXTURES } from '../../helpers/fixture-host';

function expectExactTree(name: string, providers: ProviderJson[]): void {
  const file = join(FIXTURES, name, 'expected-tree.json');
  const actual = { providers };
  if (process.env.UPDATE_EXPECTED_TREES === '1' || !existsSync(file)) {
    writeFileSync(file, `${JSON.stringify(actual, null, 2)}\n`);
  }
  expect(actual).toEqual(JSON.parse(readFileSync(file, 'utf8')));
}

const byName = (providers: ProviderJson[], name: string): ProviderJson => {
  const p = providers.find((x) => x.name === name);
  if (!p) throw new Error(`no provider ${name}; have ${providers.map((x) => x.name).join(', ')}`);
  return p;
};
const totals = (p: ProviderJson): Record<string, number> =>
  Object.fromEntries(Object.entries(p.inventories).map(([rc, r]) => [rc, r.total]));

describe('fixture hosts: exact provider trees', () => {
  test('8x NVIDIA H100 with MIG on two GPUs', async () => {
    const { providers, moves, host, driver } = await discoverFixture('h100-mig');
    expectExactTree('h100-mig', providers);
    expect(moves).toEqual([]);
    const root = byName(providers, 'dgx-h100-01');
    expect(root.uuid).toBe(FIXTURE_ROOT_UUID);
    expect(totals(root)).toEqual({ VCPU: 224, MEMORY_MB: 2063879, DISK_GB: 28677 });
    expect(root.inventories.VCPU).toMatchObject({ reserved: 8, allocation_ratio: 1 });
    expect(root.inventories.DISK_GB?.reserved).toBe(100); // 102400 MiB -> 100 GiB
    expect(root.traits).toEqual(expect.arrayContaining(['COMPUTE_NODE', 'HW_CPU_X86_AVX512F', 'HW_CPU_HYPERTHREADING', 'HW_CPU_X86_INTEL_VMX']));
    // GPU 0: seven 1g.10gb instances; GPU 1: 3g.40gb + 2g.20gb + one usable 1g.10gb (the other has no compute instance).
    expect(totals(byName(providers, 'dgx-h100-01_pci_0000_18_00_0'))).toEqual({ CUSTOM_MIG_1G_10GB: 7 });
    expect(totals(byName(providers, 'dgx-h100-01_pci_0000_2a_00_0'))).toEqual({
      CUSTOM_MIG_1G_10GB: 1,
      CUSTOM_MIG_2G_20GB: 1,
      CUSTOM_MIG_3G_40GB: 1,
    });
    for (const bus of ['3a', '5d', '9a', 'ab', 'ba', 'db']) {
      const gpu = byName(providers, `dgx-h100-01_pci_0000_${bus}_00_0`);
      expect(totals(gpu)).toEqual({ PGPU: 1 });
      expect(gpu.parent_provider_uuid).toBe(FIXTURE_ROOT_UUID);
      expect(gpu.traits).toEqual([
        'CUSTOM_GPU_MEMORY_80GB',
        'CUSTOM_GPU_MODEL_NVIDIA_H100_80GB_HBM3',
        'CUSTOM_GPU_NVIDIA',
        'CUSTOM_GPU_PCI_10DE_2330',
        'CUSTOM_HW_GPU_CUDA_COMPUTE_CAPABILITY_V9_0',
      ]);
    }
    // The BMC's console VGA (0000:03:00.0) is not a GPU provider. The 1G port has neither VFs nor
    // a physnet, and its bandwidth is Neutron's to report: no provider, its speed stays a fact.
    expect(providers.some((p) => p.name.endsWith('_pci_0000_03_00_0'))).toBe(false);
    expect(providers.some((p) => p.name === 'dgx-h100-01:eno3')).toBe(false);
    const eno3 = driver.lastHostFacts()?.nic;
    expect(eno3?.status === 'detected' && eno3.data.find((n) => n.name === 'eno3')?.speedMbps).toBe(1000);
    expect(providers).toHaveLength(1 + 8);
    expect(host.exec.calls.map((c) => c.args.join(' '))).toEqual([expect.stringContaining('--query-gpu='), 'mig -lgi', 'mig -lci']);
  });

  test('2x AMD MI250 (four GCDs) through sysfs, no vendor tool', async () => {
    const { providers, host } = await discoverFixture('mi250-amd');
    expectExactTree('mi250-amd', providers);
    const gcds = providers.filter((p) => p.name.includes('_pci_'));
    expect(gcds.map((p) => p.name)).toEqual(['mi250-07_pci_0000_81_00_0', 'mi250-07_pci_0000_86_00_0', 'mi250-07_pci_0000_c1_00_0', 'mi250-07_pci_0000_c6_00_0']);
    for (const g of gcds) {
      expect(totals(g)).toEqual({ PGPU: 1 });
      expect(g.inventories.PGPU).toEqual({ total: 1, reserved: 0, min_unit: 1, max_unit: 1, step_size: 1, allocation_ratio: 1 });
      expect(g.traits).toEqual(['CUSTOM_GPU_AMD', 'CUSTOM_GPU_MEMORY_64GB', 'CUSTOM_GPU_MODEL_AMD_INSTINCT_MI250', 'CUSTOM_GPU_PCI_1002_740C']);
    }
    const root = byName(providers, 'mi250-07');
    expect(root.traits).toEqual(expect.arrayContaining(['HW_CPU_X86_AMD_SEV', 'HW_CPU_X86_AMD_SVM', 'HW_CPU_X86_SVM', 'HW_CPU_X86_AMD_SSBD']));
    expect(root.traits).not.toContain('HW_CPU_X86_INTEL_SSBD');
    expect(root.inventories.VCPU?.allocation_ratio).toBe(4); // unset: the initial ratio is shown
    expect(host.exec.calls).toEqual([]); // no NVIDIA GPU: nvidia-smi is never run
  });

  test('a GPU exposing mdev types (Tesla M60, nvidia-35 enabled)', async () => {
    const { providers } = await discoverFixture('m60-mdev');
    expectExactTree('m60-mdev', providers);
    for (const bus of ['84', '85']) {
      const gpu = byName(providers, `vgpu-m60-03_pci_0000_${bus}_00_0`);
      // existing mdevs + available_instances: 2 + 14 on the first GPU, 0 + 16 on the second
      expect(gpu.inventories.VGPU).toEqual({ total: 16, reserved: 0, min_unit: 1, max_unit: 16, step_size: 1, allocation_ratio: 1 });
      expect(gpu.traits).toEqual([
        'CUSTOM_GPU_MEMORY_8GB',
        'CUSTOM_GPU_MODEL_TESLA_M60',
        'CUSTOM_GPU_NVIDIA',
        'CUSTOM_GPU_PCI_10DE_13F2',
        'CUSTOM_NVIDIA_35',
        'HW_GPU_CUDA_COMPUTE_CAPABILITY_V5_2',
      ]);
    }
    // The Matrox console VGA is skipped; the I350 port has 7 VFs (its 1 Gb/s is Neutron's to report).
    expect(totals(byName(providers, 'vgpu-m60-03:eno1'))).toEqual({ SRIOV_NET_VF: 7 });
    expect(providers).toHaveLength(4);
  });

  test('a dual-port 25G NIC with 64 VFs per port and a physnet mapping, bandwidth reported (report_bandwidth_inventory)', async () => {
    const { providers } = await discoverFixture('nic-sriov-25g');
    expectExactTree('nic-sriov-25g', providers);
    const f0 = byName(providers, 'net-node-12:ens1f0');
    const f1 = byName(providers, 'net-node-12:ens1f1');
    for (const [port, physnet] of [
      [f0, 'CUSTOM_PHYSNET_PHYSNET1'],
      [f1, 'CUSTOM_PHYSNET_PHYSNET2'],
    ] as const) {
      expect(totals(port)).toEqual({ SRIOV_NET_VF: 64, NET_BW_EGR_KILOBIT_PER_SEC: 25000000, NET_BW_IGR_KILOBIT_PER_SEC: 25000000 });
      expect(port.traits).toEqual([physnet, 'HW_NIC_SRIOV']);
    }
    // eno1: egress from resource_provider_bandwidths, ingress from the link; eno2 is down: VFs only.
    expect(totals(byName(providers, 'net-node-12:eno1'))).toEqual({ SRIOV_NET_VF: 7, NET_BW_EGR_KILOBIT_PER_SEC: 500000, NET_BW_IGR_KILOBIT_PER_SEC: 1000000 });
    expect(totals(byName(providers, 'net-node-12:eno2'))).toEqual({ SRIOV_NET_VF: 7 });
    // The four VF netdevs of ens1f0, bond0, ovs-system and lo get no provider.
    expect(providers.map((p) => p.name).sort()).toEqual(['net-node-12', 'net-node-12:eno1', 'net-node-12:eno2', 'net-node-12:ens1f0', 'net-node-12:ens1f1']);
  });

  test('the same NIC host with bandwidth left to Neutron (the default): the same providers and traits, no NET_BW_*, the speeds still facts', async () => {
    const { providers, driver } = await discoverFixture('nic-sriov-25g', { 'network.report_bandwidth_inventory': 'false', 'network.resource_provider_bandwidths': '' });
    expect(providers.map((p) => p.name).sort()).toEqual(['net-node-12', 'net-node-12:eno1', 'net-node-12:eno2', 'net-node-12:ens1f0', 'net-node-12:ens1f1']);
    for (const p of providers) expect(Object.keys(p.inventories).filter((rc) => rc.startsWith('NET_'))).toEqual([]);
    expect(totals(byName(providers, 'net-node-12:ens1f0'))).toEqual({ SRIOV_NET_VF: 64 });
    expect(byName(providers, 'net-node-12:ens1f0').traits).toEqual(['CUSTOM_PHYSNET_PHYSNET1', 'HW_NIC_SRIOV']);
    const nics = driver.lastHostFacts()?.nic;
    expect(nics?.status === 'detected' && nics.data.filter((n) => n.role === 'port').map((n) => [n.name, n.speedMbps])).toEqual(
      expect.arrayContaining([
        ['ens1f0', 25000],
        ['eno1', 1000],
      ]),
    );
  });

  test('a two-NUMA host with 1G huge pages', async () => {
    const { providers, driver } = await discoverFixture('numa-hugepages');
    expectExactTree('numa-hugepages', providers);
    const root = byName(providers, 'numa-node-05');
    expect(totals(root)).toEqual({ VCPU: 128, MEMORY_MB: 515431, DISK_GB: 1787 });
    expect(root.inventories.VCPU?.allocation_ratio).toBe(2); // initial_cpu_allocation_ratio = 2.0
    expect(root.inventories.DISK_GB?.reserved).toBe(1); // 1 MiB rounds up to 1 GiB
    expect(root.traits).toContain('CUSTOM_HUGEPAGES_1G');
    expect(root.traits).not.toContain('CUSTOM_HUGEPAGES_2M');
    const facts = driver.lastHostFacts();
    expect(facts?.memory.status === 'detected' && facts.memory.data.numaNodes).toEqual([
      { id: 0, memoryMb: 257716, hugepages: [{ sizeKb: 2048, total: 0, free: 0 }, { sizeKb: 1048576, total: 224, free: 224 }] },
      { id: 1, memoryMb: 257715, hugepages: [{ sizeKb: 2048, total: 0, free: 0 }, { sizeKb: 1048576, total: 224, free: 224 }] },
    ]);
    expect(facts?.cpu.status === 'detected' && facts.cpu.data).toMatchObject({ online: 128, sockets: 2, cores: 64, threadsPerCore: 2 });
    expect(facts?.cpu.status === 'detected' && facts.cpu.data.numaNodes.map((n) => n.cpus.length)).toEqual([64, 64]);
  });
});
