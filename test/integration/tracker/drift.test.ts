// Drift repair against the real Placement: someone else changes the agent's own inventory and
// removes one of its traits; the tracker, cycling as the audit does, puts both back within
// `resource_provider_association_refresh` (a short one here, on the real clock), and says what the
// re-reads cost.
import { randomUUID } from 'node:crypto';
import { RequestCounter } from '../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../../../tracker/tracker';
import type { SyncResult } from '../../../tracker/sync/context';
import { captureLog, deleteTree, placementClient, uniqueHost } from '../../helpers/placement';
import { ScriptedDriver } from '../../helpers/scripted-driver';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });
const REFRESH_S = 2;
const CYCLE_MS = 250;

function setup(prefix: string) {
  const host = uniqueHost(prefix);
  const counter = new RequestCounter();
  const driver = new ScriptedDriver();
  driver.root = { inventories: { VCPU: { total: 16 }, MEMORY_MB: { total: 65536, reserved: 512 } }, traits: ['COMPUTE_NODE', 'CUSTOM_AGENT_MANAGED'], aggregates: [] };
  driver.children = [{ uuid: randomUUID(), name: `${host.name}_pci_0000_3b_00_0`, inventories: { VGPU: { total: 4 } }, traits: ['CUSTOM_NVIDIA_A10'] }];
  const tracker = new ResourceTracker({
    api: placementClient(counter),
    driver,
    nodename: host.name,
    rootUuid: host.uuid,
    initialRatios: RATIOS,
    logger: captureLog().logger,
    associationRefreshSeconds: REFRESH_S,
  });
  return { host, counter, tracker };
}

type Cycle = SyncResult & { startedAt: number; at: number };

/**
 * Cycles every CYCLE_MS until `done(last cycle)` holds or `withinMs` is over; the cycles run, each
 * with when it started (epoch ms) and when it ended (ms since the first started).
 */
async function cycleUntil(tracker: ResourceTracker, done: (c: Cycle) => Promise<boolean>, withinMs: number): Promise<Cycle[]> {
  const start = Date.now();
  const cycles: Cycle[] = [];
  while (Date.now() - start <= withinMs) {
    await new Promise((r) => setTimeout(r, CYCLE_MS));
    const startedAt = Date.now();
    const c = { ...(await tracker.updateFromDriver()), startedAt, at: Date.now() - start };
    cycles.push(c);
    if (await done(c)) return cycles;
  }
  return cycles;
}

describe('drift repair (real Placement)', () => {
  const outside = placementClient();
  const roots: string[] = [];
  afterAll(async () => {
    for (const r of roots) await deleteTree(outside, r);
  });

  const rootHolds = async (uuid: string): Promise<boolean> => {
    const [inv, traits] = await Promise.all([outside.getInventories(uuid), outside.getTraits(uuid)]);
    return inv.inventories.MEMORY_MB?.total === 65536 && traits.traits.includes('CUSTOM_AGENT_MANAGED');
  };

  /** An operator shrinks the root's memory and removes the agent's trait, adding one of their own. */
  async function driftRoot(uuid: string): Promise<void> {
    const inv = await outside.getInventories(uuid);
    const mem = inv.inventories.MEMORY_MB;
    if (!mem) throw new Error('no MEMORY_MB on the root');
    const { resource_provider_generation: gen } = await outside.putInventories(uuid, inv.resource_provider_generation, { ...inv.inventories, MEMORY_MB: { ...mem, total: 1024, max_unit: 1024 } });
    await outside.ensureTrait('CUSTOM_OPERATOR_TAG');
    await outside.putTraits(uuid, gen, ['COMPUTE_NODE', 'CUSTOM_OPERATOR_TAG']);
  }

  test('inventory changed and a trait removed from outside: repaired within the refresh interval, at three re-reads', async () => {
    const { host, counter, tracker } = setup('drift-inv-trait');
    roots.push(host.uuid);
    await tracker.updateFromDriver();
    counter.reset();
    expect((await tracker.updateFromDriver()).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });

    await driftRoot(host.uuid);
    const cycles = await cycleUntil(tracker, () => rootHolds(host.uuid), REFRESH_S * 1000 + CYCLE_MS);
    expect(await rootHolds(host.uuid)).toBe(true);
    // Until the interval since the tracker created the tree is over, cycles read only the listing.
    for (const c of cycles.slice(0, -1)) expect(c.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    const last = cycles[cycles.length - 1];
    expect(last?.refreshed).toEqual({ reads: 3, providers: [host.uuid], drifted: { [host.uuid]: ['inventories', 'traits'] } });
    expect(last?.stats).toEqual({ reads: 4, writes: 2, conflicts: 0 });
    // The operator's own trait stays; the next cycle is quiet again.
    expect((await outside.getTraits(host.uuid)).traits.slice().sort()).toEqual(['COMPUTE_NODE', 'CUSTOM_AGENT_MANAGED', 'CUSTOM_OPERATOR_TAG']);
    expect((await tracker.updateFromDriver()).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
  });

  test('a change right after a re-read (claims keep the root moving) waits for the interval, no longer', async () => {
    const { host, tracker } = setup('drift-after-claim');
    roots.push(host.uuid);
    await tracker.updateFromDriver();
    const claim = () =>
      outside.putAllocations(randomUUID(), {
        allocations: { [host.uuid]: { resources: { VCPU: 1 } } },
        project_id: randomUUID(),
        user_id: randomUUID(),
        consumer_generation: null,
      });
    await claim();
    const first = (await cycleUntil(tracker, (c) => Promise.resolve((c.refreshed?.reads ?? 0) > 0), REFRESH_S * 1000 + CYCLE_MS)).at(-1);
    expect(first?.refreshed).toEqual({ reads: 3, providers: [host.uuid], drifted: {} });

    await driftRoot(host.uuid);
    await claim();
    const cycles = await cycleUntil(tracker, () => rootHolds(host.uuid), REFRESH_S * 1000 + 2 * CYCLE_MS);
    expect(await rootHolds(host.uuid)).toBe(true);
    // Cycles before the interval ended read only the listing, claims or not.
    const before = cycles.slice(0, -1);
    expect(before.length).toBeGreaterThan(0);
    for (const c of before) expect(c.stats.reads).toBe(1);
    const sinceReread = Date.now() - (first?.startedAt ?? 0);
    expect(sinceReread).toBeGreaterThanOrEqual(REFRESH_S * 1000);
    expect(cycles[cycles.length - 1]?.refreshed?.reads).toBe(3);
  });
});
