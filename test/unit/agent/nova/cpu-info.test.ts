// The ComputeNode's cpu_info and hypervisor_version from the driver's host facts, in the shapes
// nova's libvirt driver writes (what os-hypervisors shows and ComputeCapabilitiesFilter reads).
import { cpuInfo, cpuInfoJson } from '../../../../agent/nova/cpu-info';
import { computeNodeFacts } from '../../../../agent/nova/wiring';
import type { CpuFacts } from '../../../../virt-drivers/host/facts';
import type { HostFacts } from '../../../../virt-drivers/host/discover';
import type { VirtDriver } from '../../../../virt-drivers/driver';
import type { ResourceTracker } from '../../../../tracker/tracker';
import { loadConfig } from '../../../../config/loader';

const TWO_SOCKETS: CpuFacts = {
  online: 32,
  sockets: 2,
  cores: 16,
  threadsPerCore: 2,
  vendor: 'GenuineIntel',
  model: 'Intel(R) Xeon(R) Gold 6142 CPU @ 2.60GHz',
  arch: 'x86_64',
  flags: ['sse4_2', 'avx2', 'pclmulqdq', 'sse4_1', 'tsc_deadline_timer', 'aes', 'avx2'],
  numaNodes: [
    { id: 0, cpus: [0, 1] },
    { id: 1, cpus: [2, 3] },
  ],
};

test('two sockets on two NUMA cells: libvirt topology (sockets per cell, cores per socket), vendor and feature names as libvirt spells them', () => {
  expect(cpuInfo(TWO_SOCKETS)).toEqual({
    arch: 'x86_64',
    model: 'Intel(R) Xeon(R) Gold 6142 CPU @ 2.60GHz',
    vendor: 'Intel',
    topology: { cells: 2, sockets: 1, cores: 8, threads: 2 },
    features: ['aes', 'avx2', 'pclmuldq', 'sse4.1', 'sse4.2', 'tsc-deadline'],
  });
});

test('a host without NUMA or topology files: one cell, the arch from the fallback, an unknown vendor kept as the kernel names it', () => {
  const bare: CpuFacts = { online: 2, sockets: 1, cores: 2, threadsPerCore: 1, vendor: 'SomeVendor', flags: [], numaNodes: [] };
  expect(cpuInfo(bare, 'aarch64')).toEqual({ arch: 'aarch64', model: '', vendor: 'SomeVendor', topology: { cells: 1, sockets: 1, cores: 2, threads: 1 }, features: [] });
  expect(cpuInfoJson(undefined)).toBe('{}');
  expect(JSON.parse(cpuInfoJson(TWO_SOCKETS))).toEqual(cpuInfo(TWO_SOCKETS));
});

describe('computeNodeFacts', () => {
  const { config } = loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__STATE_PATH: '/nonexistent/state' }, defaultFile: '/nonexistent/compute-agent.conf' });
  const tracker = { rootUuid: 'r', ourProviders: () => [{ uuid: 'r', inventories: { VCPU: { total: 32, allocation_ratio: 2 }, MEMORY_MB: { total: 65536 }, DISK_GB: { total: 500 } } }] } as unknown as ResourceTracker;
  const facts = (cpu: HostFacts['cpu'] | undefined, version?: number): ReturnType<typeof computeNodeFacts> => {
    const driver = { name: 'fake', ...(version === undefined ? {} : { hypervisorVersion: () => version }), lastHostFacts: () => (cpu ? ({ cpu } as HostFacts) : undefined) } as unknown as VirtDriver;
    return computeNodeFacts(config, tracker, driver);
  };

  test("the driver's hypervisor version and the CPU of its last facts", () => {
    const f = facts({ status: 'detected', data: TWO_SOCKETS, warnings: [], ms: 1 }, 1000);
    expect(f).toMatchObject({ vcpus: 32, memory_mb: 65536, local_gb: 500, cpu_allocation_ratio: 2, hypervisor_type: 'fake', hypervisor_version: 1000 });
    expect(JSON.parse(f.cpu_info)).toMatchObject({ vendor: 'Intel', topology: { cells: 2 } });
  });

  test('a CPU probe that failed, and a driver without a version: {} and 0', () => {
    const f = facts({ status: 'absent', reason: 'disabled', ms: 0 });
    expect([f.cpu_info, f.hypervisor_version]).toEqual(['{}', 0]);
  });
});
