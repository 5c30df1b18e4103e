// A new host's first registration against the nock Placement stand-in: the providers, one POST
// /reshaper carrying every inventory, traits only where a provider has them; an outside writer
// racing it; hosts whose providers partly exist keep the per-provider path.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementAuthError, PlacementUnavailableError } from '../../../../tracker/placement/errors';
import { PlacementHttp, RequestCounter } from '../../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker, type TreeSource } from '../../../../tracker/tracker';
import { ProviderTree } from '../../../../model/provider-tree';
import { resolveInventory } from '../../../../model/provider-types';
import { nameUuid, SyntheticHost } from '../../../../bench/trees';
import { MockPlacement } from '../../../helpers/mock-placement';
import { captureLog } from '../../../helpers/placement';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });

/** The placement-sync benchmark's host: 69 providers (root, 4 NICs, 8 GPUs with 7 MIG children each). */
function setup(driver: TreeSource = new SyntheticHost(69)) {
  const mock = new MockPlacement().install();
  const counter = new RequestCounter();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base), counter }));
  const name = `h-${randomUUID().slice(0, 8)}`;
  const root = nameUuid(name);
  const log = captureLog('debug');
  const tracker = new ResourceTracker({ api, driver, nodename: name, rootUuid: root, initialRatios: RATIOS, logger: log.logger });
  const sync = async () => {
    counter.reset();
    mock.requests.length = 0;
    return tracker.updateFromDriver();
  };
  return { mock, counter, api, driver, tracker, name, root, log, sync };
}
type Setup = ReturnType<typeof setup>;

/** What the driver describes, with Placement's defaults and the initial ratios filled in. */
async function desired(s: Setup): Promise<Map<string, { parent: string | null; inventories: unknown; traits: string[] }>> {
  const t = new ProviderTree();
  t.newRoot(s.name, s.root);
  await s.driver.updateProviderTree(t, s.name);
  return new Map(
    t.snapshot(s.root).map((p) => [
      p.uuid,
      {
        parent: p.parent_provider_uuid,
        inventories: Object.fromEntries(Object.entries(p.inventories).map(([rc, r]) => [rc, resolveInventory(r, undefined, RATIOS[rc] ?? 1)])),
        traits: [...p.traits].sort(),
      },
    ]),
  );
}

function inPlacement(mock: MockPlacement): Map<string, { parent: string | null; inventories: unknown; traits: string[] }> {
  return new Map([...mock.providers.values()].map((p) => [p.uuid, { parent: p.parent, inventories: p.inventories, traits: [...p.traits].sort() }]));
}

const requestsOf = (c: RequestCounter): Record<string, number> => Object.fromEntries(c.snapshot());

afterEach(() => nock.cleanAll());

describe('first registration of a new host', () => {
  test('69 providers: the creations, one POST /reshaper with every inventory, traits where a provider has them; 81 requests', async () => {
    const s = setup();
    const first = await s.sync();
    expect(first.problems).toEqual([]);
    expect(first.created).toHaveLength(69);
    expect(requestsOf(s.counter)).toEqual({
      'GET /resource_providers 200': 2, // the cycle's listing, and the one after the reshaper
      'GET /traits 200': 1,
      'PUT /resource_classes/{name} 201': 1, // CUSTOM_MIG_1G_10GB
      'PUT /traits/{name} 201': 2, // the NICs' two custom traits
      'POST /resource_providers 200': 69,
      'POST /reshaper 204': 1,
      'PUT /resource_providers/{uuid}/traits 200': 5, // the root and the 4 NICs
    });
    expect(s.counter.total()).toBeLessThanOrEqual(100);
    expect(first.stats).toEqual({ reads: 3, writes: 78, conflicts: 0 });

    // One request carried every provider's inventory at the generation it was created with, and no allocation.
    const reshape = s.mock.requests.find((r) => r.path === '/reshaper');
    expect(reshape?.microversion).toBe('1.30');
    const body = reshape?.body as { inventories: Record<string, { resource_provider_generation: number }>; allocations: unknown };
    expect(Object.keys(body.inventories)).toHaveLength(69);
    for (const v of Object.values(body.inventories)) expect(v.resource_provider_generation).toBe(0);
    expect(body.allocations).toEqual({});
    // Creations come parents first, and all of them before the reshaper.
    const order = s.mock.requests.filter((r) => r.method !== 'GET').map((r) => r.path);
    expect(order.indexOf('/reshaper')).toBe(order.lastIndexOf('/resource_providers') + 1);

    expect(inPlacement(s.mock)).toEqual(await desired(s));
    expect(s.log.lines().some((l) => l.msg === 'first registration: every inventory written in one transaction' && l.providers === 69)).toBe(true);

    // The tracker knows the generations the reshaper left: the next cycle is one read, no write.
    const steady = await s.sync();
    expect(steady.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    expect(requestsOf(s.counter)).toEqual({ 'GET /resource_providers 200': 1 });
    // And claims see the new inventories from the cache.
    expect(s.tracker.ourProviders().find((p) => p.uuid === s.root)?.inventories.VCPU?.total).toBe(64);
  });

  test('a one-provider host: listing, creation, reshaper, listing, traits', async () => {
    const s = setup(new SyntheticHost(1));
    await s.sync();
    expect(s.mock.requests.map((r) => `${r.method} ${r.path.split('?')[0]?.replace(s.root, 'ROOT')}`)).toEqual([
      'GET /resource_providers',
      'GET /traits',
      'POST /resource_providers',
      'POST /reshaper',
      'GET /resource_providers',
      'PUT /resource_providers/ROOT/traits',
    ]);
    expect((await s.sync()).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
  });

  test('an outside writer changes a new provider before the reshaper: refused with 409, each provider written on its own, theirs kept', async () => {
    const s = setup();
    const mig = nameUuid(`${s.name}/${s.name}_pci_0000_10_00_0_mig_3`);
    const realReshape = s.api.reshape.bind(s.api);
    s.api.reshape = async (req, o) => {
      // An operator tags one MIG provider right after the tracker created it.
      await s.api.ensureTrait('CUSTOM_OPERATOR');
      await s.api.putTraits(mig, 0, ['CUSTOM_OPERATOR']);
      return realReshape(req, o);
    };
    const first = await s.sync();
    expect(first.problems).toEqual([]);
    const snap = requestsOf(s.counter);
    expect(snap['POST /reshaper 409']).toBe(1);
    expect(snap['POST /reshaper 204']).toBeUndefined();
    // Every provider's inventory written on its own, each at the generation it has: no further 409.
    expect(snap['PUT /resource_providers/{uuid}/inventories 200']).toBe(69);
    expect(snap['PUT /resource_providers/{uuid}/inventories 409']).toBeUndefined();
    // Only the provider someone else touched was re-read.
    expect(snap['GET /resource_providers/{uuid}/inventories 200']).toBe(1);
    expect(s.log.lines().some((l) => l.msg === 'first registration in one request refused; writing each provider on its own')).toBe(true);

    const want = await desired(s);
    const tagged = want.get(mig);
    if (!tagged) throw new Error('fixture');
    want.set(mig, { ...tagged, traits: ['CUSTOM_OPERATOR'] });
    expect(inPlacement(s.mock)).toEqual(want);
    s.api.reshape = realReshape;
    expect((await s.sync()).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
  });

  test('an outside writer changes new providers between the reshaper and the listing: those are re-read, theirs kept, the rest trusted', async () => {
    const s = setup();
    const nic = nameUuid(`${s.name}/${s.name}:ens0f0`);
    const realList = s.api.providersInTree.bind(s.api);
    let listings = 0;
    s.api.providersInTree = async (u, o) => {
      if (++listings === 2) {
        // Right after the reshaper: an operator adds a trait to the root and halves a NIC's VFs.
        await s.api.ensureTrait('CUSTOM_OPERATOR');
        const root = s.mock.providers.get(s.root);
        const n = s.mock.providers.get(nic);
        const vf = n?.inventories.SRIOV_NET_VF;
        if (!root || !n || !vf) throw new Error('fixture');
        await s.api.putTraits(s.root, root.generation, ['CUSTOM_OPERATOR']);
        await s.api.putInventories(nic, n.generation, { ...n.inventories, SRIOV_NET_VF: { ...vf, total: 32, max_unit: 32 } });
      }
      return realList(u, o);
    };
    const first = await s.sync();
    expect(first.problems).toEqual([]);
    const snap = requestsOf(s.counter);
    expect(snap['POST /reshaper 204']).toBe(1);
    // The two changed providers' aspects are read before anything is decided about them; nothing
    // else is read.
    for (const aspect of ['inventories', 'traits', 'aggregates']) expect(snap[`GET /resource_providers/{uuid}/${aspect} 200`]).toBe(2);
    // The NIC's inventory is the driver's again (the operator's PUT, then the repair); the root has
    // the driver's traits and the operator's.
    expect(snap['PUT /resource_providers/{uuid}/inventories 200']).toBe(1 + 1);
    expect(snap['PUT /resource_providers/{uuid}/inventories 409']).toBeUndefined();
    const want = await desired(s);
    const root = want.get(s.root);
    if (!root) throw new Error('fixture');
    want.set(s.root, { ...root, traits: [...root.traits, 'CUSTOM_OPERATOR'].sort() });
    expect(inPlacement(s.mock)).toEqual(want);
    s.api.providersInTree = realList;
    expect((await s.sync()).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
  });

  test('a resource class Placement refuses: the reshaper is refused with 400, the others are written, the one provider reported', async () => {
    const host = new SyntheticHost(3);
    const nic = { uuid: '' };
    const driver: TreeSource = {
      async updateProviderTree(tree, nodename) {
        const moves = await host.updateProviderTree(tree, nodename);
        nic.uuid = tree.snapshot().find((p) => p.name.endsWith(':ens0f0'))?.uuid ?? '';
        tree.updateInventory(nic.uuid, { NOT_A_CLASS: { total: 1 } });
        return moves;
      },
    };
    const s = setup(driver);
    const first = await s.sync();
    expect(s.counter.snapshot().get('POST /reshaper 400')).toBe(1);
    expect(first.problems).toEqual([{ provider: nic.uuid, message: expect.stringContaining('NOT_A_CLASS') as string }]);
    expect(s.mock.providers.get(s.root)?.inventories.VCPU?.total).toBe(64);
    expect(s.mock.providers.size).toBe(3);
  });

  test('a policy that refuses this user the reshaper (403): each provider written on its own', async () => {
    const s = setup(new SyntheticHost(13));
    s.api.reshape = () => Promise.reject(new PlacementAuthError('POST /reshaper: 403 Forbidden', { method: 'POST', path: '/reshaper', status: 403 }));
    const first = await s.sync();
    expect(first.problems).toEqual([]);
    expect(s.counter.snapshot().get('PUT /resource_providers/{uuid}/inventories 200')).toBe(13);
    expect(inPlacement(s.mock)).toEqual(await desired(s));
    expect((await s.sync()).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
  });

  test('Placement unreachable at the reshaper ends the cycle; the next one finds the providers and writes each on its own', async () => {
    const s = setup(new SyntheticHost(13));
    const realReshape = s.api.reshape.bind(s.api);
    s.api.reshape = () => Promise.reject(new PlacementUnavailableError('POST /reshaper: connection reset', { method: 'POST', path: '/reshaper' }));
    await expect(s.sync()).rejects.toThrow(/connection reset/);
    s.api.reshape = realReshape;
    const second = await s.sync();
    expect(second.problems).toEqual([]);
    expect(s.counter.snapshot().get('POST /reshaper 204')).toBeUndefined();
    expect(s.counter.snapshot().get('PUT /resource_providers/{uuid}/inventories 200')).toBe(13);
    expect(inPlacement(s.mock)).toEqual(await desired(s));
  });

  test('providers that partly exist keep the per-provider path: a restart, and a device added', async () => {
    const s = setup(new SyntheticHost(5));
    await s.sync();
    // A restarted agent (nothing cached) on its existing tree reads and writes nothing more.
    const restarted = new ResourceTracker({ api: s.api, driver: s.driver, nodename: s.name, rootUuid: s.root, initialRatios: RATIOS, logger: captureLog().logger });
    s.counter.reset();
    const r = await restarted.updateFromDriver();
    expect(r.stats.writes).toBe(0);
    expect(s.counter.snapshot().get('POST /reshaper 204')).toBeUndefined();
    // A new device: its provider is created and its inventory written with a PUT.
    const grown = new ResourceTracker({ api: s.api, driver: new SyntheticHost(7), nodename: s.name, rootUuid: s.root, initialRatios: RATIOS, logger: captureLog().logger });
    s.counter.reset();
    const g = await grown.updateFromDriver();
    expect(g.created).toHaveLength(2);
    expect(s.counter.snapshot().get('POST /reshaper 204')).toBeUndefined();
    expect(s.counter.snapshot().get('PUT /resource_providers/{uuid}/inventories 200')).toBe(2);
  });

  test('plan on a new host lists the reshaper; the sync then makes exactly those writes', async () => {
    const s = setup(new SyntheticHost(13));
    const plan = await s.tracker.updateFromDriver({ dryRun: true });
    expect(s.mock.writes()).toEqual([]);
    const shown = plan.writes.map((w) => `${w.method} ${w.path.split('/').slice(0, 2).join('/')}`);
    expect(shown.filter((w) => w === 'POST /reshaper')).toHaveLength(1);
    expect(shown.filter((w) => w === 'PUT /resource_providers')).toHaveLength(5); // traits of the root and the 4 NICs
    const real = await s.sync();
    expect(s.mock.writes().map((w) => `${w.method} ${w.path}`)).toEqual(plan.writes.map((w) => `${w.method} ${w.path}`));
    expect(real.stats.writes).toBe(plan.writes.length);
  });
});
