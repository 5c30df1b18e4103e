/**
 * The Placement half of the driver conformance suite: every driver's tree goes through the real
 * tracker against Placement mocked on nock (`test/helpers/mock-placement.ts`, answering with the
 * real exchanges' bodies). For each driver setup:
 * - the first sync creates exactly the driver's tree (names, parents, inventories, traits);
 * - a second sync makes no write and one read;
 * - every request carries a microversion and the token; every write carries a generation;
 * - each reshape scenario, with consumers holding resources, becomes at most one POST /reshaper
 *   and leaves Placement equal to the new tree with every consumer's totals preserved.
 */
import nock from 'nock';
import { silentLogger } from '../../lib/logging/logger';
import { NoAuth } from '../../tracker/placement/auth';
import { PlacementClient } from '../../tracker/placement/client';
import { PlacementHttp } from '../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker, type TreeSource } from '../../tracker/tracker';
import type { ProviderTree } from '../../model/provider-tree';
import { resolveInventory, type AllocationsByConsumer, type MoveInstruction, type ProviderSnapshot } from '../../model/provider-types';
import type { VirtDriver } from '../../virt-drivers/driver';
import { MockPlacement } from '../helpers/mock-placement';
import { fillAllocations, rootOnly, ROOT_UUID, type ConformanceSubject } from './conformance';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });

/** A TreeSource whose driver can be swapped (a scenario may restart the driver). */
class Swappable implements TreeSource {
  constructor(public driver: VirtDriver) {}
  updateProviderTree(tree: ProviderTree, nodename: string, allocations?: AllocationsByConsumer): Promise<readonly MoveInstruction[]> {
    return this.driver.updateProviderTree(tree, nodename, allocations);
  }
}

async function setup(subject: ConformanceSubject) {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const driver = await subject.make();
  await driver.init(subject.nodename);
  const source = new Swappable(driver);
  const tracker = new ResourceTracker({ api, driver: source, nodename: subject.nodename, rootUuid: ROOT_UUID, initialRatios: RATIOS, logger: silentLogger() });
  return { mock, api, source, tracker };
}

/** Placement's state of our tree, as snapshots comparable with the driver's. */
function placementTree(mock: MockPlacement): Map<string, { name: string; parent: string | null; inventories: unknown; traits: string[] }> {
  const out = new Map<string, { name: string; parent: string | null; inventories: unknown; traits: string[] }>();
  for (const p of mock.providers.values()) out.set(p.uuid, { name: p.name, parent: p.parent, inventories: p.inventories, traits: [...p.traits].sort() });
  return out;
}

function expected(snaps: readonly ProviderSnapshot[]): Map<string, { name: string; parent: string | null; inventories: unknown; traits: string[] }> {
  const out = new Map<string, { name: string; parent: string | null; inventories: unknown; traits: string[] }>();
  for (const s of snaps) {
    const inventories = Object.fromEntries(Object.entries(s.inventories).map(([rc, r]) => [rc, resolveInventory(r, undefined, RATIOS[rc] ?? 1)]));
    out.set(s.uuid, { name: s.name, parent: s.parent_provider_uuid, inventories, traits: [...s.traits].sort() });
  }
  return out;
}

function totals(a: AllocationsByConsumer): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const [c, byRp] of Object.entries(a)) {
    const t: Record<string, number> = {};
    for (const res of Object.values(byRp)) for (const [rc, n] of Object.entries(res)) t[rc] = (t[rc] ?? 0) + n;
    out[c] = t;
  }
  return out;
}

export function describePlacementConformance(label: string, subject: ConformanceSubject): void {
  describe(`driver conformance with Placement: ${label}`, () => {
    afterEach(() => nock.cleanAll());

    test('the first sync creates exactly the driver tree; the second writes nothing and reads once', async () => {
      const { mock, tracker } = await setup(subject);
      const first = await tracker.updateFromDriver();
      expect(first.problems).toEqual([]);
      // What the driver would show `discover --json` (a fresh pass over a root-only tree).
      const d = await subject.make();
      await d.init(subject.nodename);
      const t = rootOnly(subject.nodename);
      await d.updateProviderTree(t, subject.nodename);
      expect(placementTree(mock)).toEqual(expected(t.snapshot(ROOT_UUID)));

      mock.requests.length = 0;
      const second = await tracker.updateFromDriver();
      expect(second.stats.writes).toBe(0);
      expect(mock.writes()).toEqual([]);
      expect(mock.requests).toHaveLength(1);
    });

    test('every request carries a microversion and the token; every write a generation', async () => {
      const { mock, tracker } = await setup(subject);
      await tracker.updateFromDriver();
      for (const r of mock.requests) expect(r.microversion).toMatch(/^1\.\d+$/);
      for (const w of mock.writes()) {
        if (/\/(inventories|traits|aggregates)$/.test(w.path)) expect(w.body).toHaveProperty('resource_provider_generation');
      }
    });

    for (const scenario of subject.scenarios ?? []) {
      test(`reshape through Placement: ${scenario.name}`, async () => {
        const { mock, api, source, tracker } = await setup(subject);
        await tracker.updateFromDriver();
        // A storage service would have created a sharing provider the driver points at.
        const allocations = fillAllocations(
          [...mock.providers.values()].map((p) => ({
            uuid: p.uuid,
            name: p.name,
            parent_provider_uuid: p.parent,
            root_provider_uuid: ROOT_UUID,
            generation: p.generation,
            inventories: p.inventories,
            traits: p.traits,
            aggregates: p.aggregates,
          })),
          ROOT_UUID,
        );
        for (const [c, byRp] of Object.entries(allocations)) {
          await api.putAllocations(c, {
            allocations: Object.fromEntries(Object.entries(byRp).map(([rp, resources]) => [rp, { resources }])),
            project_id: 'p',
            user_id: 'u',
            consumer_generation: null,
          });
        }
        source.driver = await scenario.change(source.driver);
        // A sharing provider the driver now names must exist in Placement (its owner creates it).
        const probe = rootOnly(subject.nodename);
        await source.driver.updateProviderTree(probe, subject.nodename);
        for (const r of probe.rootUuids().filter((u) => u !== ROOT_UUID)) {
          const s = probe.data(r);
          if (mock.providers.has(s.uuid)) continue;
          await api.createProvider({ uuid: s.uuid, name: s.name, parent_provider_uuid: null });
          const inv = Object.fromEntries(Object.entries(s.inventories).map(([rc, rec]) => [rc, resolveInventory(rec)] as const));
          await api.putInventories(s.uuid, 0, inv);
          await api.putTraits(s.uuid, 1, s.traits);
          await api.putAggregates(s.uuid, 2, s.aggregates);
        }
        mock.requests.length = 0;
        const r = await tracker.updateFromDriver();
        expect(r.problems).toEqual([]);
        const reshapes = mock.writes().filter((w) => w.path === '/reshaper');
        expect(reshapes.length).toBeLessThanOrEqual(1);
        if (scenario.expectMoves && Object.keys(allocations).length > 0) expect(reshapes).toHaveLength(1);
        // Every consumer holds the same totals, on providers that have the inventory for them.
        const now: Record<string, Record<string, Record<string, number>>> = {};
        for (const [c, v] of mock.consumers) now[c] = v.allocations;
        expect(totals(now)).toEqual(totals(allocations));
        for (const v of mock.consumers.values()) {
          for (const [rp, res] of Object.entries(v.allocations)) for (const rc of Object.keys(res)) expect(mock.providers.get(rp)?.inventories[rc]).toBeDefined();
        }
        // And a further sync is quiet.
        mock.requests.length = 0;
        expect((await tracker.updateFromDriver()).stats.writes).toBe(0);
      });
    }
  });
}
