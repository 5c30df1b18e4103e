// The tracker against the real Placement: first sync creates the tree, steady state costs one read
// and no write, others' traits and aggregates survive, a scheduler claim costs one refresh.
import { randomUUID } from 'node:crypto';
import { RequestCounter } from '../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../../../tracker/tracker';
import { captureLog, deleteTree, placementClient, uniqueHost } from '../../helpers/placement';
import { ScriptedDriver } from '../../helpers/scripted-driver';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });

function setup(prefix: string) {
  const host = uniqueHost(prefix);
  const counter = new RequestCounter();
  const api = placementClient(counter);
  const driver = new ScriptedDriver();
  driver.root = {
    inventories: { VCPU: { total: 16, reserved: 2 }, MEMORY_MB: { total: 65536, reserved: 512 }, DISK_GB: { total: 400 } },
    traits: ['COMPUTE_NODE', 'HW_CPU_X86_AVX2', 'CUSTOM_AGENT_MANAGED'],
    aggregates: [],
  };
  driver.children = [
    { uuid: randomUUID(), name: `${host.name}_pci_0000_3b_00_0`, inventories: { VGPU: { total: 4 } }, traits: ['CUSTOM_NVIDIA_A10'] },
    { uuid: randomUUID(), name: `${host.name}:eth1`, inventories: { NET_BW_EGR_KILOBIT_PER_SEC: { total: 25000000 }, CUSTOM_VF_SLOTS: { total: 8 } } },
  ];
  const log = captureLog('debug');
  const tracker = new ResourceTracker({ api, driver, nodename: host.name, rootUuid: host.uuid, initialRatios: RATIOS, logger: log.logger });
  return { host, counter, api, driver, tracker, log };
}

describe('tracker sync (real Placement)', () => {
  const roots: string[] = [];
  afterAll(async () => {
    const api = placementClient();
    for (const r of roots) await deleteTree(api, r);
  });

  test('first sync creates the whole tree; a second sync makes zero writes and one read', async () => {
    const { host, counter, api, driver, tracker } = setup('sync-first');
    roots.push(host.uuid);
    const first = await tracker.updateFromDriver();
    expect(first.created).toHaveLength(3);
    expect(first.problems).toEqual([]);

    const tree = await api.providersInTree(host.uuid);
    expect(tree.map((p) => p.name).sort()).toEqual([host.name, ...driver.children.map((c) => c.name)].sort());
    const rootInv = await api.getInventories(host.uuid);
    expect(rootInv.inventories.VCPU).toEqual({ total: 16, reserved: 2, min_unit: 1, max_unit: 16, step_size: 1, allocation_ratio: 4 });
    expect(rootInv.inventories.MEMORY_MB?.allocation_ratio).toBe(1);
    expect((await api.getTraits(host.uuid)).traits.slice().sort()).toEqual(['COMPUTE_NODE', 'CUSTOM_AGENT_MANAGED', 'HW_CPU_X86_AVX2']);
    const child = driver.children[1];
    expect(Object.keys((await api.getInventories(child?.uuid ?? '')).inventories).sort()).toEqual(['CUSTOM_VF_SLOTS', 'NET_BW_EGR_KILOBIT_PER_SEC']);

    counter.reset();
    const second = await tracker.updateFromDriver();
    expect(second.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    expect(counter.writes()).toBe(0);
    expect(counter.reads()).toBe(1);
  });

  test('an operator allocation ratio survives: the agent keeps it when its config sets none', async () => {
    const { host, api, tracker } = setup('sync-ratio');
    roots.push(host.uuid);
    await tracker.updateFromDriver();
    const inv = await api.getInventories(host.uuid);
    const vcpu = inv.inventories.VCPU;
    if (!vcpu) throw new Error('no VCPU');
    await api.putInventories(host.uuid, inv.resource_provider_generation, { ...inv.inventories, VCPU: { ...vcpu, allocation_ratio: 8 } });
    const r = await tracker.updateFromDriver();
    expect(r.stats.writes).toBe(0);
    expect((await api.getInventories(host.uuid)).inventories.VCPU?.allocation_ratio).toBe(8);
  });

  test('an outside writer adds a trait and an aggregate concurrently: the agent converges and both survive', async () => {
    const { host, api, driver, tracker } = setup('sync-outside');
    roots.push(host.uuid);
    await tracker.updateFromDriver();
    const agg = randomUUID();
    await api.ensureTrait('CUSTOM_OPERATOR_TAG');
    // The outside writer and the agent's next cycle race; the agent also changes its own traits.
    driver.root = { ...driver.root, traits: ['COMPUTE_NODE', 'HW_CPU_X86_AVX2'] }; // drops CUSTOM_AGENT_MANAGED
    driver.root.inventories = { ...driver.root.inventories, VCPU: { total: 16, reserved: 4 } };
    const outside = (async () => {
      for (let i = 0; i < 5; i++) {
        const t = await api.getTraits(host.uuid);
        try {
          await api.putTraits(host.uuid, t.resource_provider_generation, [...new Set([...t.traits, 'CUSTOM_OPERATOR_TAG'])]);
          const a = await api.getAggregates(host.uuid);
          await api.putAggregates(host.uuid, a.resource_provider_generation, [...new Set([...a.aggregates, agg])]);
          return;
        } catch {
          /* lost a race with the agent; try again, as any client would */
        }
      }
    })();
    await Promise.all([tracker.updateFromDriver(), outside]);
    await tracker.updateFromDriver(); // converge
    const traits = (await api.getTraits(host.uuid)).traits.slice().sort();
    expect(traits).toEqual(['COMPUTE_NODE', 'CUSTOM_OPERATOR_TAG', 'HW_CPU_X86_AVX2']);
    expect((await api.getAggregates(host.uuid)).aggregates).toEqual([agg]);
    expect((await api.getInventories(host.uuid)).inventories.VCPU?.reserved).toBe(4);
    // And the steady state after that is quiet again.
    const quiet = await tracker.updateFromDriver();
    expect(quiet.stats.writes).toBe(0);
  });

  test('a scheduler claim between syncs: the next inventory change is written after one refresh, no error logged', async () => {
    const { host, counter, api, driver, tracker, log } = setup('sync-claim');
    roots.push(host.uuid);
    await tracker.updateFromDriver();
    const consumer = randomUUID();
    await api.putAllocations(consumer, {
      allocations: { [host.uuid]: { resources: { VCPU: 2, MEMORY_MB: 2048 } } },
      project_id: randomUUID(),
      user_id: randomUUID(),
      consumer_generation: null,
    });
    driver.root.inventories = { ...driver.root.inventories, MEMORY_MB: { total: 65536, reserved: 1024 } };
    counter.reset();
    const r = await tracker.updateFromDriver();
    expect(r.problems).toEqual([]);
    expect(r.stats.writes).toBe(1);
    // One listing, one re-read of the root's inventories (its generation moved), one PUT.
    expect(counter.snapshot()).toEqual(
      new Map([
        ['GET /resource_providers 200', 1],
        ['GET /resource_providers/{uuid}/inventories 200', 1],
        ['PUT /resource_providers/{uuid}/inventories 200', 1],
      ]),
    );
    expect((await api.getInventories(host.uuid)).inventories.MEMORY_MB?.reserved).toBe(1024);
    expect(log.lines().filter((l) => l.level === 'error' || l.level === 'warn')).toEqual([]);
    await api.deleteAllocations(consumer);
  });

  test('a 409 from a write racing another writer is absorbed: one re-read, the write redone, theirs kept', async () => {
    const { host, api, driver, tracker } = setup('sync-409');
    roots.push(host.uuid);
    await tracker.updateFromDriver();
    driver.root.inventories = { ...driver.root.inventories, DISK_GB: { total: 500 } };
    // Another writer changes the root right after the tracker listed it (a real change: Placement
    // does not bump the generation for a no-op write), so the tracker's PUT meets a real 409.
    const realList = api.providersInTree.bind(api);
    api.providersInTree = async (u, o) => {
      const r = await realList(u, o);
      const a = await api.getAggregates(host.uuid);
      await api.putAggregates(host.uuid, a.resource_provider_generation, [...a.aggregates, randomUUID()]);
      return r;
    };
    const r = await tracker.updateFromDriver();
    api.providersInTree = realList;
    expect(r.stats.conflicts).toBe(1);
    expect((await api.getInventories(host.uuid)).inventories.DISK_GB?.total).toBe(500);
    expect((await api.getAggregates(host.uuid)).aggregates).toHaveLength(1);
  });

  test('removed children are deleted bottom-up; one still holding allocations is kept and reported', async () => {
    const { host, api, driver, tracker } = setup('sync-remove');
    roots.push(host.uuid);
    await tracker.updateFromDriver();
    const [gpu, nic] = driver.children;
    if (!gpu || !nic) throw new Error('fixture');
    const consumer = randomUUID();
    await api.putAllocations(consumer, {
      allocations: { [gpu.uuid]: { resources: { VGPU: 1 } } },
      project_id: randomUUID(),
      user_id: randomUUID(),
      consumer_generation: null,
    });
    driver.children = [];
    const r = await tracker.updateFromDriver();
    expect(r.deleted).toEqual([nic.uuid]);
    expect(r.problems.map((p) => p.message)).toEqual([expect.stringContaining('still holds allocations')]);
    expect((await api.providersInTree(host.uuid)).map((p) => p.uuid).sort()).toEqual([host.uuid, gpu.uuid].sort());
    await api.deleteAllocations(consumer);
    const again = await tracker.updateFromDriver();
    expect(again.deleted).toEqual([gpu.uuid]);
  });

  test('a provider someone else created inside our tree is never deleted', async () => {
    const { host, api, tracker } = setup('sync-foreign');
    roots.push(host.uuid);
    await tracker.updateFromDriver();
    const foreign = await api.createProvider({ uuid: randomUUID(), name: `${host.name}-cyborg-fpga`, parent_provider_uuid: host.uuid });
    const r = await tracker.updateFromDriver();
    expect(r.deleted).toEqual([]);
    expect((await api.providersInTree(host.uuid)).some((p) => p.uuid === foreign.uuid)).toBe(true);
  });

  test('dry run lists the writes a sync would make and makes none', async () => {
    const { host, counter, api, driver, tracker } = setup('sync-plan');
    roots.push(host.uuid);
    // Names no earlier run created, so the plan must include creating them.
    const tag = host.uuid.slice(0, 8).toUpperCase();
    driver.root.traits = ['COMPUTE_NODE', `CUSTOM_PLAN_${tag}`];
    const [gpu, nic] = driver.children;
    if (!gpu || !nic) throw new Error('fixture');
    gpu.traits = [`CUSTOM_GPU_${tag}`];
    nic.inventories = { [`CUSTOM_SLOTS_${tag}`]: { total: 8 } };
    const plan = await tracker.updateFromDriver({ dryRun: true });
    const shown = plan.writes.map((w) => `${w.method} ${w.path.replace(host.uuid, 'ROOT').replace(gpu.uuid, 'GPU').replace(nic.uuid, 'NIC')}`);
    expect(shown).toEqual([
      `PUT /resource_classes/CUSTOM_SLOTS_${tag}`,
      `PUT /traits/CUSTOM_GPU_${tag}`,
      `PUT /traits/CUSTOM_PLAN_${tag}`,
      'POST /resource_providers',
      'POST /resource_providers',
      'POST /resource_providers',
      // A new host: every inventory in one request (tracker/sync/first-registration.ts).
      'POST /reshaper',
      'PUT /resource_providers/GPU/traits',
      'PUT /resource_providers/ROOT/traits',
    ]);
    expect(counter.writes()).toBe(0);
    expect(await api.providersInTree(host.uuid)).toEqual([]);
    // The real sync then makes exactly those writes.
    counter.reset();
    const real = await tracker.updateFromDriver();
    expect(real.stats.writes).toBe(plan.writes.length);
    expect(counter.writes()).toBe(plan.writes.length);
  });
});
