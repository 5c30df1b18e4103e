/** planHost + applyPlan + computeMoves on hand-made facts: ownership, failures, renames, moves. */
import { loadConfig } from '../../../../config/loader';
import { ProviderTree } from '../../../../model/provider-tree';
import type { HostFacts } from '../../../../virt-drivers/host/discover';
import type { GpuFacts, NicFacts } from '../../../../virt-drivers/host/facts';
import { ProbeError, type ProbeOutcome } from '../../../../virt-drivers/host/probe';
import { applyPlan, RootProviderMissingError } from '../../../../virt-drivers/layout/apply';
import { deviceProviderUuid, uuidV5 } from '../../../../virt-drivers/layout/ids';
import { layoutOptionsFromConfig } from '../../../../virt-drivers/layout/options';
import { hugepageTrait, planHost } from '../../../../virt-drivers/layout/plan';
import { checkMoves } from '../../../../virt-drivers/tree-checks';

const ROOT = '11111111-2222-4333-8444-555555555555';
const NODE = 'n1';
const ok = <T>(data: T): ProbeOutcome<T> => ({ status: 'detected', data, warnings: [], ms: 0 });
const failed = <T>(): ProbeOutcome<T> => ({ status: 'failed', error: new ProbeError('x', 'broken'), ms: 0 });
const absent = <T>(): ProbeOutcome<T> => ({ status: 'absent', reason: 'none', ms: 0 });

function options(env: Record<string, string> = {}) {
  const { config } = loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__HOST: NODE, ...env }, defaultFile: '/nonexistent' });
  return layoutOptionsFromConfig(config, { COMPUTE_NET_ATTACH_INTERFACE: true, COMPUTE_TRUSTED_CERTS: false });
}

const gpu = (address: string, extra: Partial<GpuFacts> = {}): GpuFacts => ({
  address,
  vendorId: '10de',
  deviceId: '13f2',
  vendor: 'nvidia',
  mdevTypes: [{ type: 'nvidia-35', availableInstances: 4, existing: 0 }],
  ...extra,
});
const nic = (name: string, address: string, extra: Partial<NicFacts> = {}): NicFacts => ({ name, address, role: 'port', speedMbps: 25000, sriovTotalVfs: 8, ...extra });

function facts(over: Partial<HostFacts> = {}): HostFacts {
  return {
    cpu: ok({ online: 16, sockets: 1, cores: 8, threadsPerCore: 2, vendor: 'GenuineIntel', flags: ['avx2', 'vmx'], numaNodes: [] }),
    memory: ok({ totalMb: 65536, hugepages: [{ sizeKb: 2048, total: 512 }], numaNodes: [] }),
    disk: ok({ path: '/i', measuredPath: '/i', totalGb: 100, availableGb: 90 }),
    gpu: ok([gpu('0000:84:00.0'), gpu('0000:85:00.0')]),
    nic: ok([nic('ens1f0', '0000:3b:00.0')]),
    ...over,
  };
}

function run(tree: ProviderTree, f: HostFacts, env: Record<string, string> = {}, extra: Partial<Parameters<typeof applyPlan>[0]> = {}) {
  const plan = planHost({ nodename: NODE, facts: f, options: options(env), tree });
  return { plan, ...applyPlan({ tree, nodename: NODE, plan, lineages: new Map(), ...extra }) };
}

/** `[network] report_bandwidth_inventory = true`: a cloud without Neutron's placement plugin. */
const BANDWIDTH = { COMPUTE_AGENT__NETWORK__REPORT_BANDWIDTH_INVENTORY: 'true' };

function fresh(): ProviderTree {
  const t = new ProviderTree();
  t.newRoot(NODE, ROOT);
  return t;
}

describe('root inventory and traits', () => {
  test('totals, reserved (disk rounded up to GiB), ratios only when configured, owned traits', () => {
    const tree = fresh();
    run(tree, facts(), { COMPUTE_AGENT__DEFAULT__RESERVED_HOST_DISK_MB: '1025', COMPUTE_AGENT__DEFAULT__CPU_ALLOCATION_RATIO: '2.5' });
    const root = tree.data(NODE);
    expect(root.inventories).toEqual({
      VCPU: { total: 16, reserved: 0, min_unit: 1, max_unit: 16, step_size: 1, allocation_ratio: 2.5 },
      MEMORY_MB: { total: 65536, reserved: 512, min_unit: 1, max_unit: 65536, step_size: 1 },
      DISK_GB: { total: 100, reserved: 2, min_unit: 1, max_unit: 100, step_size: 1 },
    });
    expect(root.traits).toEqual(['COMPUTE_NET_ATTACH_INTERFACE', 'COMPUTE_NODE', 'CUSTOM_HUGEPAGES_2M', 'HW_CPU_HYPERTHREADING', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_INTEL_VMX', 'HW_CPU_X86_VMX']);
  });

  test('reserved above the total is clamped, with a note', () => {
    const { plan } = run(fresh(), facts(), { COMPUTE_AGENT__DEFAULT__RESERVED_HOST_CPUS: '64' });
    expect(plan.rootInventories.VCPU).toMatchObject({ total: 16, reserved: 16 });
    expect(plan.notes).toEqual(['reserved VCPU 64 exceeds the total 16; reporting 16 reserved']);
  });

  test('traits the driver does not own survive; owned ones that no longer apply go', () => {
    const tree = fresh();
    tree.updateTraits(NODE, ['COMPUTE_STATUS_DISABLED', 'CUSTOM_RACK_A', 'HW_CPU_X86_AVX512F', 'COMPUTE_TRUSTED_CERTS', 'CUSTOM_HUGEPAGES_1G']);
    run(tree, facts());
    const traits = tree.data(NODE).traits;
    expect(traits).toEqual(expect.arrayContaining(['COMPUTE_STATUS_DISABLED', 'CUSTOM_RACK_A', 'CUSTOM_HUGEPAGES_2M']));
    for (const gone of ['HW_CPU_X86_AVX512F', 'COMPUTE_TRUSTED_CERTS', 'CUSTOM_HUGEPAGES_1G']) expect(traits).not.toContain(gone);
  });

  test('a failed probe leaves its classes, traits and children as they were; an absent one removes them', () => {
    const tree = fresh();
    run(tree, facts());
    const before = tree.snapshot();
    run(tree, facts({ cpu: failed(), memory: failed(), gpu: failed(), nic: failed() }));
    expect(tree.snapshot()).toEqual(before);

    run(tree, facts({ cpu: absent(), gpu: absent(), nic: absent() }));
    expect(Object.keys(tree.data(NODE).inventories).sort()).toEqual(['DISK_GB', 'MEMORY_MB']);
    expect(tree.data(NODE).traits.some((t) => t.startsWith('HW_CPU'))).toBe(false);
    expect(tree.snapshot().map((p) => p.name)).toEqual([NODE]);
  });

  test('hugepage traits by size', () => {
    expect([2048, 1048576, 64].map(hugepageTrait)).toEqual(['CUSTOM_HUGEPAGES_2M', 'CUSTOM_HUGEPAGES_1G', 'CUSTOM_HUGEPAGES_64K']);
  });
});

describe('DISK_GB and sharing providers', () => {
  function withSharing(): { tree: ProviderTree; pool: string } {
    const tree = fresh();
    tree.updateAggregates(NODE, ['aaaaaaaa-0000-4000-8000-000000000001']);
    const pool = tree.newRoot('pool', 'bbbbbbbb-0000-4000-8000-000000000002');
    tree.updateInventory(pool, { DISK_GB: { total: 5000 } });
    tree.updateTraits(pool, ['MISC_SHARES_VIA_AGGREGATE']);
    tree.updateAggregates(pool, ['aaaaaaaa-0000-4000-8000-000000000001']);
    return { tree, pool };
  }

  test('auto: left off the root when a sharing provider in its aggregate serves DISK_GB', () => {
    const { tree, pool } = withSharing();
    const { plan } = run(tree, facts());
    expect(plan.diskGbProvider).toBe(pool);
    expect(tree.data(NODE).inventories.DISK_GB).toBeUndefined();
  });

  test('true: always on the root; false: never', () => {
    const a = withSharing().tree;
    run(a, facts(), { COMPUTE_AGENT__COMPUTE__DISK_GB_ON_ROOT: 'true' });
    expect(a.data(NODE).inventories.DISK_GB?.total).toBe(100);
    const b = fresh();
    run(b, facts(), { COMPUTE_AGENT__COMPUTE__DISK_GB_ON_ROOT: 'false' });
    expect(b.data(NODE).inventories.DISK_GB).toBeUndefined();
  });

  test('root DISK_GB moving to the sharing provider carries the disk allocations', () => {
    const { tree, pool } = withSharing();
    run(tree, facts(), { COMPUTE_AGENT__COMPUTE__DISK_GB_ON_ROOT: 'true' });
    const t0 = tree.snapshot();
    const allocations = { c1: { [ROOT]: { DISK_GB: 40, VCPU: 2 } } };
    const { moves } = run(tree, facts(), {}, { allocations });
    expect(moves).toEqual([{ from: ROOT, to: pool, resources: { DISK_GB: 100 }, consumers: { c1: { DISK_GB: 40 } } }]);
    expect(checkMoves(t0, tree.snapshot(), moves, allocations)).toEqual([]);
  });
});

describe('children: identity, renames, ownership', () => {
  test('device providers get uuids derived from the root and the PCI address', () => {
    const tree = fresh();
    run(tree, facts(), { COMPUTE_AGENT__DEVICES__ENABLED_MDEV_TYPES: 'nvidia-35' });
    expect(tree.uuidOf('n1_pci_0000_84_00_0')).toBe(uuidV5(ROOT, 'gpu:0000:84:00.0'));
    expect(tree.uuidOf('n1:ens1f0')).toBe(deviceProviderUuid(ROOT, 'nic:0000:3b:00.0'));
  });

  test('a renamed interface keeps its provider (and its allocations): renamed, not replaced', () => {
    const tree = fresh();
    run(tree, facts());
    const uuid = tree.uuidOf('n1:ens1f0');
    const t0 = tree.snapshot();
    const allocations = { c1: { [uuid]: { SRIOV_NET_VF: 2 } } };
    const { moves, warnings } = run(tree, facts({ nic: ok([nic('enp59s0f0', '0000:3b:00.0')]) }), {}, { allocations });
    expect(moves).toEqual([]);
    expect(warnings).toEqual([]);
    expect(tree.uuidOf('n1:enp59s0f0')).toBe(uuid);
    expect(tree.exists('n1:ens1f0')).toBe(false);
    expect(checkMoves(t0, tree.snapshot(), moves, allocations)).toEqual([]);
  });

  test('two interfaces that swap names swap providers cleanly', () => {
    const tree = fresh();
    run(tree, facts({ nic: ok([nic('eth0', '0000:3b:00.0'), nic('eth1', '0000:5e:00.0')]) }));
    const a = tree.uuidOf('n1:eth0');
    const b = tree.uuidOf('n1:eth1');
    run(tree, facts({ nic: ok([nic('eth1', '0000:3b:00.0'), nic('eth0', '0000:5e:00.0')]) }));
    expect([tree.uuidOf('n1:eth1'), tree.uuidOf('n1:eth0')]).toEqual([a, b]);
  });

  test('a provider an older agent created with a random uuid is adopted by name', () => {
    const tree = fresh();
    const legacy = tree.newChild('n1:ens1f0', NODE, 'cccccccc-0000-4000-8000-000000000003');
    run(tree, facts());
    expect(tree.uuidOf('n1:ens1f0')).toBe(legacy);
    expect(tree.data(legacy).inventories.SRIOV_NET_VF?.total).toBe(8);
  });

  test('children of other owners are left alone, owned ones that vanished are removed', () => {
    const tree = fresh();
    tree.newChild('cyborg-fpga', NODE);
    tree.newChild('n1:gone0', NODE);
    run(tree, facts());
    expect(tree.exists('cyborg-fpga')).toBe(true);
    expect(tree.exists('n1:gone0')).toBe(false);
  });

  test("Neutron's providers, named <node>:<agent type>[:<bridge>] under the same root, are not taken for NICs, nor moved", () => {
    const tree = fresh();
    const agent = tree.newChild('n1:OVN Controller agent', NODE);
    tree.updateInventory(agent, { NET_PACKET_RATE_KILOPACKET_PER_SEC: { total: 100000 } });
    const ovs = tree.newChild('n1:Open vSwitch agent', NODE);
    tree.updateInventory(ovs, { NET_BW_EGR_KILOBIT_PER_SEC: { total: 10000000 } });
    tree.newChild('n1:OVN Controller agent:br-ex', agent);
    const { moves } = run(tree, facts());
    expect(tree.exists('n1:OVN Controller agent')).toBe(true);
    expect(tree.exists('n1:Open vSwitch agent')).toBe(true);
    expect(tree.exists('n1:OVN Controller agent:br-ex')).toBe(true);
    expect(tree.data(ovs).inventories).toEqual({ NET_BW_EGR_KILOBIT_PER_SEC: { total: 10000000 } });
    expect(moves).toEqual([]);
  });

  test('a provider that vanished with allocations and no related provider is reported', () => {
    const tree = fresh();
    run(tree, facts());
    const uuid = tree.uuidOf('n1:ens1f0');
    const { warnings } = run(tree, facts({ nic: ok([]) }), {}, { allocations: { c9: { [uuid]: { SRIOV_NET_VF: 1 } } } });
    expect(warnings).toEqual([expect.stringMatching(/SRIOV_NET_VF on n1:ens1f0 is gone with allocations of c9/)]);
  });

  test('a tree without the root is refused', () => {
    const tree = new ProviderTree();
    tree.newRoot('other');
    expect(() => run(tree, facts())).toThrow(RootProviderMissingError);
  });
});

describe('NIC bandwidth (report_bandwidth_inventory)', () => {
  const bw = (tree: ProviderTree, name: string): string[] => Object.keys(tree.data(name).inventories).filter((rc) => rc.startsWith('NET_'));

  test('off (the default, Neutron reports bandwidth): VFs and traits only; a port with only a physnet keeps its trait on a provider', () => {
    const tree = fresh();
    const { plan } = run(tree, facts({ nic: ok([nic('ens1f0', '0000:3b:00.0'), nic('eno1', '0000:01:00.0', { sriovTotalVfs: undefined, speedMbps: 1000 }), nic('eno2', '0000:01:00.1', { sriovTotalVfs: undefined })]) }), {
      COMPUTE_AGENT__NETWORK__PHYSICAL_DEVICE_MAPPINGS: 'physnet1:eno1',
      COMPUTE_AGENT__NETWORK__RESOURCE_PROVIDER_BANDWIDTHS: 'eno2:1000:1000',
    });
    expect(tree.data('n1:ens1f0').inventories).toEqual({ SRIOV_NET_VF: expect.objectContaining({ total: 8 }) as unknown });
    expect(tree.data('n1:ens1f0').traits).toEqual(['HW_NIC_SRIOV']);
    expect(tree.data('n1:eno1').inventories).toEqual({});
    expect(tree.data('n1:eno1').traits).toEqual(['CUSTOM_PHYSNET_PHYSNET1']);
    // Neither VFs nor a physnet: nothing to say; resource_provider_bandwidths is not read.
    expect(tree.exists('n1:eno2')).toBe(false);
    expect(plan.children.flatMap((c) => Object.keys(c.inventories)).filter((rc) => rc.startsWith('NET_'))).toEqual([]);
  });

  test('on: link speed x 1000, or the configured kbit/s', () => {
    const tree = fresh();
    run(tree, facts({ nic: ok([nic('ens1f0', '0000:3b:00.0'), nic('eno2', '0000:01:00.1', { sriovTotalVfs: undefined })]) }), {
      ...BANDWIDTH,
      COMPUTE_AGENT__NETWORK__RESOURCE_PROVIDER_BANDWIDTHS: 'eno2:1000:',
    });
    expect(tree.data('n1:ens1f0').inventories.NET_BW_EGR_KILOBIT_PER_SEC?.total).toBe(25000000);
    expect(tree.data('n1:eno2').inventories.NET_BW_EGR_KILOBIT_PER_SEC?.total).toBe(1000);
    expect(tree.data('n1:eno2').inventories.NET_BW_IGR_KILOBIT_PER_SEC?.total).toBe(25000000);
  });

  test('turned off: the classes leave the NIC provider, which stays for its VFs; nothing moves', () => {
    const tree = fresh();
    run(tree, facts(), BANDWIDTH);
    const uuid = tree.uuidOf('n1:ens1f0');
    expect(bw(tree, 'n1:ens1f0')).toEqual(['NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC']);
    const { moves } = run(tree, facts());
    expect(tree.uuidOf('n1:ens1f0')).toBe(uuid);
    expect(bw(tree, 'n1:ens1f0')).toEqual([]);
    expect(moves).toEqual([]);
  });
});

describe('move instructions', () => {
  const MDEV = { COMPUTE_AGENT__DEVICES__ENABLED_MDEV_TYPES: 'nvidia-35' };

  test('vGPUs from the root to one child per GPU: consumers follow the GPU the driver says they are on', () => {
    const tree = fresh();
    run(tree, facts(), { ...MDEV, COMPUTE_AGENT__DEVICES__VGPU_PROVIDER_LAYOUT: 'root' });
    expect(tree.data(NODE).inventories.VGPU?.total).toBe(8);
    const t0 = tree.snapshot();
    const g84 = uuidV5(ROOT, 'gpu:0000:84:00.0');
    const g85 = uuidV5(ROOT, 'gpu:0000:85:00.0');
    const allocations = { a: { [ROOT]: { VGPU: 1, VCPU: 1 } }, b: { [ROOT]: { VGPU: 2 } } };
    const locate = (consumer: string): string | undefined => (consumer === 'a' ? g85 : undefined);
    const { moves } = run(tree, facts(), MDEV, { allocations, locate });
    expect(moves).toEqual([
      { from: ROOT, to: g84, resources: { VGPU: 4 }, consumers: { b: { VGPU: 2 } } },
      { from: ROOT, to: g85, resources: { VGPU: 4 }, consumers: { a: { VGPU: 1 } } },
    ]);
    expect(tree.data(NODE).inventories.VGPU).toBeUndefined();
    expect(checkMoves(t0, tree.snapshot(), moves, allocations)).toEqual([]);
  });

  test('and back: per-GPU children to the root', () => {
    const tree = fresh();
    run(tree, facts(), MDEV);
    const g84 = tree.uuidOf('n1_pci_0000_84_00_0');
    const t0 = tree.snapshot();
    const allocations = { a: { [g84]: { VGPU: 3 } } };
    const { moves } = run(tree, facts(), { ...MDEV, COMPUTE_AGENT__DEVICES__VGPU_PROVIDER_LAYOUT: 'root' }, { allocations });
    expect(moves.map((m) => [m.from === g84 ? '84' : '85', m.resources, m.consumers])).toEqual([
      ['84', { VGPU: 4 }, { a: { VGPU: 3 } }],
      ['85', { VGPU: 4 }, {}],
    ]);
    expect(checkMoves(t0, tree.snapshot(), moves, allocations)).toEqual([]);
  });

  test('a NIC split into ports (bandwidth reported): the new port gets what the old one lost; consumers stay where they fit', () => {
    const tree = fresh();
    run(tree, facts({ nic: ok([nic('ens1', '0000:3b:00.0', { sriovTotalVfs: 16, speedMbps: 50000 })]) }), BANDWIDTH);
    const old = tree.uuidOf('n1:ens1');
    const t0 = tree.snapshot();
    const allocations = { x: { [old]: { SRIOV_NET_VF: 6 } }, y: { [old]: { SRIOV_NET_VF: 5 } } };
    const split = facts({ nic: ok([nic('ens1f0', '0000:3b:00.0'), nic('ens1f1', '0000:3b:00.1')]) });
    const { moves } = run(tree, split, BANDWIDTH, { allocations });
    const f1 = tree.uuidOf('n1:ens1f1');
    expect(tree.uuidOf('n1:ens1f0')).toBe(old);
    expect(moves).toEqual([
      { from: old, to: f1, resources: { NET_BW_EGR_KILOBIT_PER_SEC: 25000000, NET_BW_IGR_KILOBIT_PER_SEC: 25000000, SRIOV_NET_VF: 8 }, consumers: { y: { SRIOV_NET_VF: 5 } } },
    ]);
    expect(checkMoves(t0, tree.snapshot(), moves, allocations)).toEqual([]);
  });

  test('unrelated devices never exchange inventory (a NIC shrinking while another card appears)', () => {
    const tree = fresh();
    run(tree, facts({ nic: ok([nic('a', '0000:3b:00.0', { sriovTotalVfs: 16 })]) }));
    const { moves } = run(tree, facts({ nic: ok([nic('a', '0000:3b:00.0', { sriovTotalVfs: 8 }), nic('b', '0000:5e:00.0')]) }));
    expect(moves).toEqual([]);
  });
});
