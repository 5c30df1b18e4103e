// The tracker against the nock Placement stand-in: fast checks of request shapes and counts.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { Auditor } from '../../../tracker/audit';
import { NoAuth } from '../../../tracker/placement/auth';
import { PlacementClient } from '../../../tracker/placement/client';
import { PlacementHttp } from '../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../../../tracker/tracker';
import { MockPlacement } from '../../helpers/mock-placement';
import { captureLog } from '../../helpers/placement';
import { ScriptedDriver } from '../../helpers/scripted-driver';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1.5, initial_disk_allocation_ratio: 1 });

function setup() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const driver = new ScriptedDriver();
  const root = randomUUID();
  driver.root = { inventories: { VCPU: { total: 8 }, MEMORY_MB: { total: 8192, reserved: 512 } }, traits: ['COMPUTE_NODE'], aggregates: [] };
  driver.children = Array.from({ length: 4 }, (_, i) => ({
    uuid: randomUUID(),
    name: `h1_pci_0000_0${i}_00_0`,
    inventories: { CUSTOM_MIG_1G_10GB: { total: 7 } },
    traits: ['CUSTOM_GPU_H100'],
  }));
  const log = captureLog();
  const tracker = new ResourceTracker({ api, driver, nodename: 'h1', rootUuid: root, initialRatios: RATIOS, logger: log.logger });
  return { mock, api, driver, tracker, root, log };
}

afterEach(() => nock.cleanAll());

describe('ResourceTracker (mocked Placement)', () => {
  test('every call carries a microversion >= 1.26 or its feature version, and the token', async () => {
    const { mock, tracker } = setup();
    await tracker.updateFromDriver();
    for (const r of mock.requests) {
      expect(r.microversion).toBeDefined();
      if (r.method !== 'GET' || r.path.includes('/inventories') || r.path.includes('/traits')) {
        expect(Number(r.microversion?.split('.')[1])).toBeGreaterThanOrEqual(26);
      }
    }
  });

  test('a custom class and trait used by many providers are ensured once per process', async () => {
    const { mock, tracker } = setup();
    await tracker.updateFromDriver();
    const writes = mock.writes().map((w) => `${w.method} ${w.path}`);
    expect(writes.filter((w) => w === 'PUT /resource_classes/CUSTOM_MIG_1G_10GB')).toHaveLength(1);
    expect(writes.filter((w) => w === 'PUT /traits/CUSTOM_GPU_H100')).toHaveLength(1);
    mock.requests.length = 0;
    await tracker.updateFromDriver();
    expect(mock.writes()).toEqual([]);
    expect(mock.requests.map((r) => r.path.split('?')[0])).toEqual(['/resource_providers']);
  });

  test('ratios: the initial ratio on creation; an explicit one overrides', async () => {
    const { mock, driver, tracker, root } = setup();
    await tracker.updateFromDriver();
    expect(mock.providers.get(root)?.inventories.VCPU?.allocation_ratio).toBe(4);
    expect(mock.providers.get(root)?.inventories.MEMORY_MB?.allocation_ratio).toBe(1.5);
    driver.root.inventories = { ...driver.root.inventories, VCPU: { total: 8, allocation_ratio: 2 } };
    await tracker.updateFromDriver();
    expect(mock.providers.get(root)?.inventories.VCPU?.allocation_ratio).toBe(2);
  });

  test('a standard trait this Placement does not know is left out, with a warning, and the rest is written', async () => {
    const { mock, driver, tracker, root, log } = setup();
    mock.unknownStandardTraits.add('HW_CPU_X86_FUTURE_EXT');
    driver.root.traits = ['COMPUTE_NODE', 'HW_CPU_X86_FUTURE_EXT'];
    const r = await tracker.updateFromDriver();
    expect(r.problems).toEqual([]);
    expect(mock.providers.get(root)?.traits).toEqual(['COMPUTE_NODE']);
    expect(log.lines().some((l) => l.trait === 'HW_CPU_X86_FUTURE_EXT' && l.level === 'warn')).toBe(true);
  });

  test('an unknown resource class on one provider is reported; the others still sync', async () => {
    const { mock, driver, tracker } = setup();
    const first = driver.children[0];
    if (!first) throw new Error('fixture');
    first.inventories = { NOT_A_CLASS: { total: 1 } };
    const r = await tracker.updateFromDriver();
    // The mock, like Placement, refuses an unknown class with 400 (fixture 15); only that provider fails.
    expect(r.problems).toEqual([{ provider: first.uuid, message: expect.stringContaining('PUT /resource_providers/') as string }]);
    expect(mock.providers.size).toBe(5);
    for (const c of driver.children.slice(1)) expect(mock.providers.get(c.uuid)?.inventories.CUSTOM_MIG_1G_10GB?.total).toBe(7);
  });

  test('the tree given to the driver holds only what the agent owns', async () => {
    const { mock, api, driver, tracker, root } = setup();
    await tracker.updateFromDriver();
    await api.ensureTrait('CUSTOM_OPERATOR');
    const rp = mock.providers.get(root);
    if (!rp) throw new Error('no root');
    await api.putTraits(root, rp.generation, [...rp.traits, 'CUSTOM_OPERATOR']);
    let seen: string[] = [];
    const inner = driver.updateProviderTree.bind(driver);
    driver.updateProviderTree = (tree, nodename, allocations) => {
      seen = [...tree.data(nodename).traits];
      return inner(tree, nodename, allocations);
    };
    await tracker.updateFromDriver();
    expect(seen).toEqual(['COMPUTE_NODE']);
    expect(mock.providers.get(root)?.traits.sort()).toEqual(['COMPUTE_NODE', 'CUSTOM_OPERATOR']);
  });

  // Placement moves no provider generation when allocations only leave it (DELETE, or a write that
  // no longer names the provider): the agent's own removals must not leave the consumer cached.
  test('a consumer the agent removed is not reported orphaned by the next audit', async () => {
    const { api, tracker, root, log } = setup();
    await tracker.updateFromDriver();
    const gone = randomUUID();
    await api.putAllocations(gone, { allocations: { [root]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    const auditor = new Auditor({ tracker, api, instances: { listInstances: () => Promise.resolve([]) }, logger: log.logger, heal: 'report' });
    expect((await auditor.run()).orphaned).toEqual([gone]);
    await tracker.claims.forceDeleteOnce(gone);
    expect((await auditor.run()).orphaned).toEqual([]);
  });

  test('an orphan the audit healed off this host is not reported again', async () => {
    const { api, tracker, root, log } = setup();
    await tracker.updateFromDriver();
    const elsewhere = randomUUID();
    await api.createProvider({ uuid: elsewhere, name: 'shared-disk', parent_provider_uuid: null });
    await api.putInventories(elsewhere, 0, { DISK_GB: { total: 100, reserved: 0, min_unit: 1, max_unit: 100, step_size: 1, allocation_ratio: 1 } });
    const orphan = randomUUID();
    const allocations: Record<string, { resources: Record<string, number> }> = { [root]: { resources: { VCPU: 1 } }, [elsewhere]: { resources: { DISK_GB: 10 } } };
    await api.putAllocations(orphan, { allocations, project_id: 'p', user_id: 'u', consumer_generation: null });
    const auditor = new Auditor({ tracker, api, instances: { listInstances: () => Promise.resolve([]) }, logger: log.logger, heal: 'heal', healGraceMs: 0 });
    expect((await auditor.run()).healed).toEqual([orphan]);
    expect(await auditor.run()).toMatchObject({ orphaned: [], healed: [] });
  });
});
