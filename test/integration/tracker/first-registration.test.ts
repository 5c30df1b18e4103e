// A new host's first registration against the real Placement (8 and 13): the 69-provider host of
// the placement-sync benchmark registers in at most 100 requests (its providers, one POST
// /reshaper with every inventory, traits where a provider has them), leaves exactly the tree's
// inventories and traits, and the next cycle is one read; an outside writer racing the reshaper
// makes it fall back to writing each provider, keeping what the writer added.
import { RequestCounter } from '../../../tracker/placement/http';
import type { PlacementClient } from '../../../tracker/placement/client';
import { initialRatiosFrom, ResourceTracker } from '../../../tracker/tracker';
import { ProviderTree } from '../../../model/provider-tree';
import { resolveInventory } from '../../../model/provider-types';
import { nameUuid, SyntheticHost } from '../../../bench/trees';
import { captureLog, deleteTree, placementClient, uniqueHost } from '../../helpers/placement';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });

interface Shape {
  readonly parent: string | null;
  readonly inventories: unknown;
  readonly traits: readonly string[];
}

function setup(prefix: string) {
  const { name } = uniqueHost(prefix);
  const root = nameUuid(name);
  const counter = new RequestCounter();
  const api = placementClient(counter);
  const driver = new SyntheticHost(69);
  const log = captureLog();
  const tracker = new ResourceTracker({ api, driver, nodename: name, rootUuid: root, initialRatios: RATIOS, logger: log.logger });
  return { name, root, counter, api, driver, tracker, log };
}

/** The driver's tree with Placement's defaults and the initial ratios filled in. */
async function desired(driver: SyntheticHost, name: string, root: string): Promise<Map<string, Shape>> {
  const t = new ProviderTree();
  t.newRoot(name, root);
  await driver.updateProviderTree(t, name);
  return new Map(
    t.snapshot(root).map((p) => [
      p.uuid,
      {
        parent: p.parent_provider_uuid,
        inventories: Object.fromEntries(Object.entries(p.inventories).map(([rc, r]) => [rc, resolveInventory(r, undefined, RATIOS[rc] ?? 1)])),
        traits: [...p.traits].sort(),
      },
    ]),
  );
}

/** What Placement holds for the tree (read with a client of its own, not counted). */
async function inPlacement(root: string): Promise<Map<string, Shape>> {
  const api: PlacementClient = placementClient();
  const out = new Map<string, Shape>();
  for (const p of await api.providersInTree(root)) {
    const [inv, traits] = await Promise.all([api.getInventories(p.uuid), api.getTraits(p.uuid)]);
    out.set(p.uuid, { parent: p.parent_provider_uuid, inventories: inv.inventories, traits: [...traits.traits].sort() });
  }
  return out;
}

describe('first registration of a new 69-provider host (real Placement)', () => {
  const roots: string[] = [];
  afterAll(async () => {
    const api = placementClient();
    for (const r of roots) await deleteTree(api, r);
  });

  test('at most 100 requests: the providers, one POST /reshaper, traits where a provider has them; then one read a cycle', async () => {
    const s = setup('first-reg');
    roots.push(s.root);
    const first = await s.tracker.updateFromDriver();
    expect(first.problems).toEqual([]);
    expect(first.created).toHaveLength(69);
    expect(s.counter.total()).toBeLessThanOrEqual(100);
    // Exactly these, whether or not the custom names existed before (an earlier run on this
    // Placement created them): the generations Placement's reshaper left are the ones expected,
    // so no provider is read again.
    const names = (route: string): boolean => route === '/resource_classes/{name}' || route === '/traits/{name}';
    // CUSTOM_MIG_1G_10GB, and the NICs' two custom traits unless an earlier run created them.
    const ensured = s.counter.total((m, route) => m === 'PUT' && names(route));
    expect(ensured).toBeGreaterThanOrEqual(1);
    expect(ensured).toBeLessThanOrEqual(3);
    const rest = new Map([...s.counter.snapshot()].filter(([k]) => !names(k.split(' ')[1] ?? '')));
    expect(rest).toEqual(
      new Map([
        ['GET /resource_providers 200', 2],
        ['GET /traits 200', 1],
        ['POST /resource_providers 200', 69],
        ['POST /reshaper 204', 1],
        ['PUT /resource_providers/{uuid}/traits 200', 5],
      ]),
    );

    expect(await inPlacement(s.root)).toEqual(await desired(s.driver, s.name, s.root));

    s.counter.reset();
    const steady = await s.tracker.updateFromDriver();
    expect(steady.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    expect(s.counter.reads()).toBe(1);
    expect(s.counter.writes()).toBe(0);
  });

  test('an outside writer changes a new provider before the reshaper: 409, then each provider written on its own; theirs kept, then quiet', async () => {
    const s = setup('first-reg-race');
    roots.push(s.root);
    const mig = nameUuid(`${s.name}/${s.name}_pci_0000_10_00_0_mig_3`);
    const realReshape = s.api.reshape.bind(s.api);
    s.api.reshape = async (req, o) => {
      // An operator tags one MIG provider right after the tracker created it.
      const other = placementClient();
      await other.ensureTrait('CUSTOM_FIRST_REG_OPERATOR');
      await other.putTraits(mig, 0, ['CUSTOM_FIRST_REG_OPERATOR']);
      return realReshape(req, o);
    };
    const first = await s.tracker.updateFromDriver();
    s.api.reshape = realReshape;
    expect(first.problems).toEqual([]);
    const snap = s.counter.snapshot();
    expect(snap.get('POST /reshaper 409')).toBe(1);
    expect(snap.get('POST /reshaper 204')).toBeUndefined();
    expect(snap.get('PUT /resource_providers/{uuid}/inventories 200')).toBe(69);
    expect(snap.get('PUT /resource_providers/{uuid}/inventories 409')).toBeUndefined();

    const want = await desired(s.driver, s.name, s.root);
    const tagged = want.get(mig);
    if (!tagged) throw new Error('fixture');
    want.set(mig, { ...tagged, traits: ['CUSTOM_FIRST_REG_OPERATOR'] });
    expect(await inPlacement(s.root)).toEqual(want);

    s.counter.reset();
    expect((await s.tracker.updateFromDriver()).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
  });
});
