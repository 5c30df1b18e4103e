// Neutron's placement plugin puts its own providers under this host's root provider (an agent
// provider `<host>:OVN Controller agent` with packet-rate inventory, and a device provider
// `<host>:OVN Controller agent:br-ex` with bandwidth inventory and physnet / vnic-type traits), and
// the scheduler allocates an instance's port across root + that device provider. The tracker must
// leave all of that as Neutron made it: no write to those providers, their inventory not counted
// as the agent's, the driver never seeing them, a claim spanning them accepted, and the audit not
// calling such an instance's allocations orphaned or missing.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { Auditor } from '../../../tracker/audit';
import { ClaimMismatchError, InsufficientResourcesError } from '../../../tracker/claims/errors';
import { NoAuth } from '../../../tracker/placement/auth';
import { PlacementClient } from '../../../tracker/placement/client';
import { PlacementHttp } from '../../../tracker/placement/http';
import { SyncError } from '../../../tracker/sync/context';
import { initialRatiosFrom, ResourceTracker } from '../../../tracker/tracker';
import type { Flavor } from '../../../model/instance';
import { MockPlacement } from '../../helpers/mock-placement';
import { captureLog } from '../../helpers/placement';
import { ScriptedDriver } from '../../helpers/scripted-driver';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 1, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });
const FLAVOR: Flavor = { name: 'm1.small', vcpus: 2, memory_mb: 2048, root_gb: 10, ephemeral_gb: 0, swap: 0, extra_specs: {} };
const FLAVOR_ALLOC = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 10 };
const BW = { NET_BW_EGR_KILOBIT_PER_SEC: 1000, NET_BW_IGR_KILOBIT_PER_SEC: 1000 };
const NEUTRON_TRAITS = ['CUSTOM_PHYSNET_PUBLIC', 'CUSTOM_VNIC_TYPE_NORMAL'];

const full = (total: number) => ({ total, reserved: 0, min_unit: 1, max_unit: total, step_size: 1, allocation_ratio: 1 });

async function setup() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const driver = new ScriptedDriver();
  const root = randomUUID();
  const gpu = randomUUID();
  driver.root = { inventories: { VCPU: { total: 8 }, MEMORY_MB: { total: 8192 }, DISK_GB: { total: 100 } }, traits: ['COMPUTE_NODE'], aggregates: [] };
  driver.children = [{ uuid: gpu, name: 'h1_pci_0000_84_00_0', inventories: { VGPU: { total: 4 } }, traits: [] }];
  const log = captureLog();
  const tracker = new ResourceTracker({ api, driver, nodename: 'h1', rootUuid: root, initialRatios: RATIOS, logger: log.logger });
  await tracker.init();
  await tracker.updateFromDriver();

  // What neutron-server's placement report does once the OVN chassis reports its bandwidths.
  const agent = randomUUID();
  const device = randomUUID();
  await api.createProvider({ uuid: agent, name: 'h1:OVN Controller agent', parent_provider_uuid: root });
  await api.createProvider({ uuid: device, name: 'h1:OVN Controller agent:br-ex', parent_provider_uuid: agent });
  const nic = randomUUID();
  await api.createProvider({ uuid: nic, name: 'h1:Open vSwitch agent', parent_provider_uuid: root });
  for (const t of NEUTRON_TRAITS) await api.ensureTrait(t);
  await api.putInventories(agent, 0, { NET_PACKET_RATE_KILOPACKET_PER_SEC: full(100000) });
  await api.putInventories(device, 0, { NET_BW_EGR_KILOBIT_PER_SEC: full(10000000), NET_BW_IGR_KILOBIT_PER_SEC: full(10000000) });
  await api.putTraits(device, 1, NEUTRON_TRAITS);
  await api.putInventories(nic, 0, { NET_BW_EGR_KILOBIT_PER_SEC: full(1000000) });
  const neutron = [agent, device, nic];
  const before = new Map(neutron.map((u) => [u, JSON.stringify(mock.providers.get(u))]));
  /** The Neutron providers exactly as Neutron left them (generation aside: allocations move it). */
  const untouched = (): void => {
    for (const u of neutron) {
      const { generation: _was, ...was } = JSON.parse(before.get(u) ?? '{}') as Record<string, unknown>;
      const { generation: _now, ...now } = mock.providers.get(u) ?? {};
      expect(now).toEqual(was);
    }
  };
  const neutronWrites = () => mock.writes().filter((w) => neutron.some((u) => w.path.includes(u)));
  return { mock, api, driver, tracker, root, gpu, agent, device, neutron, untouched, neutronWrites, log };
}

/** The scheduler's claim for an instance with one minimum-bandwidth port: root + Neutron's device provider. */
async function schedulerClaim(api: PlacementClient, consumer: string, root: string, device: string): Promise<void> {
  await api.putAllocations(consumer, {
    allocations: { [root]: { resources: FLAVOR_ALLOC }, [device]: { resources: BW } },
    project_id: 'p',
    user_id: 'u',
    consumer_generation: null,
  });
}

afterEach(() => nock.cleanAll());

describe('providers Neutron created under this host', () => {
  test('sync cycles write nothing to them, the driver never sees them, and their inventory is not the agent\'s', async () => {
    const { mock, driver, tracker, root, neutron, untouched, neutronWrites } = await setup();
    let seen: string[] = [];
    const inner = driver.updateProviderTree.bind(driver);
    driver.updateProviderTree = (tree, nodename, allocations) => {
      seen = tree.snapshot().map((p) => p.name);
      return inner(tree, nodename, allocations);
    };
    mock.requests.length = 0;
    const r = await tracker.updateFromDriver();
    expect(r.problems).toEqual([]);
    expect(r.deleted).toEqual([]);
    expect(seen.sort()).toEqual(['h1', 'h1_pci_0000_84_00_0']);
    expect(neutronWrites()).toEqual([]);
    untouched();
    expect(tracker.ourProviders().map((p) => p.uuid)).not.toEqual(expect.arrayContaining([neutron[1]]));
    expect(tracker.ourProviders().flatMap((p) => Object.keys(p.inventories))).not.toContain('NET_BW_EGR_KILOBIT_PER_SEC');
    // The driver drops its GPU: the agent deletes its own child, never Neutron's.
    driver.children = [];
    const r2 = await tracker.updateFromDriver();
    expect(r2.deleted).toHaveLength(1);
    for (const u of neutron) expect(mock.providers.has(u)).toBe(true);
    expect(neutronWrites()).toEqual([]);
    untouched();
    expect(mock.providers.get(root)?.parent).toBeNull();
  });

  test('an agent that lost its ownership record still leaves them alone', async () => {
    const { mock, api, driver, root, neutron, untouched, neutronWrites } = await setup();
    const log = captureLog();
    const again = new ResourceTracker({ api, driver, nodename: 'h1', rootUuid: root, initialRatios: RATIOS, logger: log.logger });
    mock.requests.length = 0;
    const r = await again.updateFromDriver();
    expect(r.deleted).toEqual([]);
    for (const u of neutron) expect(mock.providers.has(u)).toBe(true);
    expect(neutronWrites()).toEqual([]);
    untouched();
  });

  test('a local claim never lands on them: bandwidth in a flavor finds no provider of the agent', async () => {
    const { tracker, untouched } = await setup();
    await tracker.updateFromDriver();
    const inst = { uuid: randomUUID(), project_id: 'p', user_id: 'u', flavor: { ...FLAVOR, extra_specs: { 'resources1:NET_BW_EGR_KILOBIT_PER_SEC': '1000' } } };
    await expect(tracker.claims.claimForBuild(inst, { schedulerClaimed: false })).rejects.toBeInstanceOf(InsufficientResourcesError);
    untouched();
  });

  test("a scheduler's claim spanning root and Neutron's bandwidth provider is accepted as the instance's", async () => {
    const { api, tracker, root, device, untouched } = await setup();
    const vm = randomUUID();
    await schedulerClaim(api, vm, root, device);
    const got = await tracker.claims.claimForBuild({ uuid: vm, project_id: 'p', user_id: 'u', flavor: FLAVOR }, { schedulerClaimed: true });
    expect(got).toEqual({ [root]: FLAVOR_ALLOC, [device]: BW });
    untouched();
  });

  test('a claim on a Neutron provider the last listing did not show is checked against a fresh listing', async () => {
    const { api, tracker, root, agent } = await setup();
    // Neutron adds a provider for a second bridge after the tracker's last cycle.
    const late = randomUUID();
    await api.createProvider({ uuid: late, name: 'h1:OVN Controller agent:br-phys2', parent_provider_uuid: agent });
    await api.putInventories(late, 0, { NET_BW_EGR_KILOBIT_PER_SEC: full(1000000) });
    const vm = randomUUID();
    await api.putAllocations(vm, {
      allocations: { [root]: { resources: FLAVOR_ALLOC }, [late]: { resources: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 } } },
      project_id: 'p',
      user_id: 'u',
      consumer_generation: null,
    });
    await expect(tracker.claims.claimForBuild({ uuid: vm, project_id: 'p', user_id: 'u', flavor: FLAVOR }, { schedulerClaimed: true })).resolves.toMatchObject({ [late]: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 } });
  });

  test("a claim on another host's provider, or one not of the flavor's size on the agent's, is still refused", async () => {
    const { api, tracker, root, device } = await setup();
    const elsewhere = randomUUID();
    await api.createProvider({ uuid: elsewhere, name: 'other-host', parent_provider_uuid: null });
    await api.putInventories(elsewhere, 0, { NET_BW_EGR_KILOBIT_PER_SEC: full(1000000) });
    const vm = randomUUID();
    await api.putAllocations(vm, {
      allocations: { [root]: { resources: FLAVOR_ALLOC }, [elsewhere]: { resources: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 } } },
      project_id: 'p',
      user_id: 'u',
      consumer_generation: null,
    });
    await expect(tracker.claims.claimForBuild({ uuid: vm, project_id: 'p', user_id: 'u', flavor: FLAVOR }, { schedulerClaimed: true })).rejects.toThrow(/not this host's: .*/);
    const small = randomUUID();
    await api.putAllocations(small, {
      allocations: { [root]: { resources: { ...FLAVOR_ALLOC, VCPU: 1 } }, [device]: { resources: BW } },
      project_id: 'p',
      user_id: 'u',
      consumer_generation: null,
    });
    await expect(tracker.claims.claimForBuild({ uuid: small, project_id: 'p', user_id: 'u', flavor: FLAVOR }, { schedulerClaimed: true })).rejects.toBeInstanceOf(ClaimMismatchError);
  });

  test('a reshape keeps the instance\'s Neutron entries and writes no inventory of Neutron\'s', async () => {
    const { mock, api, driver, tracker, root, gpu, device, untouched, neutronWrites } = await setup();
    const vm = randomUUID();
    await api.putAllocations(vm, {
      allocations: { [root]: { resources: FLAVOR_ALLOC }, [gpu]: { resources: { VGPU: 1 } }, [device]: { resources: BW } },
      project_id: 'p',
      user_id: 'u',
      consumer_generation: null,
    });
    // The driver moves its vGPUs to the root (the pre-Stein layout).
    driver.root.inventories = { ...driver.root.inventories, VGPU: { total: 4 } };
    driver.children = [];
    driver.moves = [{ from: gpu, to: root, resources: { VGPU: 4 } }];
    mock.requests.length = 0;
    const r = await tracker.updateFromDriver();
    expect(r.reshaped).toBe(true);
    const reshape = mock.writes().find((w) => w.path === '/reshaper')?.body as { inventories: Record<string, unknown> };
    expect(Object.keys(reshape.inventories).sort()).toEqual([gpu, root].sort());
    expect(mock.consumers.get(vm)?.allocations).toEqual({ [root]: { ...FLAVOR_ALLOC, VGPU: 1 }, [device]: BW });
    expect(neutronWrites()).toEqual([]);
    untouched();
  });

  test("a driver's move naming a Neutron provider is refused before anything is written", async () => {
    const { mock, driver, tracker, root, device, untouched, neutronWrites } = await setup();
    driver.moves = [{ from: device, to: root, resources: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 } }];
    mock.requests.length = 0;
    await expect(tracker.updateFromDriver()).rejects.toThrow(SyncError);
    await expect(tracker.updateFromDriver()).rejects.toThrow(/not created by this agent/);
    expect(mock.writes().filter((w) => w.path === '/reshaper')).toEqual([]);
    expect(neutronWrites()).toEqual([]);
    untouched();
  });

  test('the audit finds an instance spanning root and Neutron neither orphaned nor missing, and heals nothing', async () => {
    const { mock, api, tracker, root, device, untouched } = await setup();
    const vm = randomUUID();
    await schedulerClaim(api, vm, root, device);
    const log = captureLog();
    const auditor = new Auditor({ tracker, api, instances: { listInstances: () => Promise.resolve([{ uuid: vm }]) }, logger: log.logger, heal: 'heal', healGraceMs: 0 });
    mock.requests.length = 0;
    const r = await auditor.run();
    expect(r).toMatchObject({ orphaned: [], missing: [], healed: [] });
    expect(mock.writes().filter((w) => w.path.startsWith('/allocations'))).toEqual([]);
    expect(mock.consumers.get(vm)?.allocations).toEqual({ [root]: FLAVOR_ALLOC, [device]: BW });
    untouched();
  });

  test("healing an orphan removes it from the agent's providers only, and names what it left on Neutron's", async () => {
    const { mock, api, tracker, root, device } = await setup();
    const gone = randomUUID();
    await schedulerClaim(api, gone, root, device);
    const log = captureLog();
    const auditor = new Auditor({ tracker, api, instances: { listInstances: () => Promise.resolve([]) }, logger: log.logger, heal: 'heal', healGraceMs: 0 });
    const r = await auditor.run();
    expect(r).toMatchObject({ orphaned: [gone], healed: [gone] });
    expect(mock.consumers.get(gone)?.allocations).toEqual({ [device]: BW });
    expect(log.lines().some((l) => l.consumer === gone && Array.isArray(l.left_on) && (l.left_on as string[]).includes(device))).toBe(true);
  });
});
