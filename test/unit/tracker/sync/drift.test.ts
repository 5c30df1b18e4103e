// The association refresh against the nock Placement stand-in: each kind of outside change to what
// the agent owns is repaired within `resource_provider_association_refresh`, at a counted cost.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../../../../tracker/tracker';
import { MockPlacement } from '../../../helpers/mock-placement';
import { captureLog } from '../../../helpers/placement';
import { ScriptedDriver } from '../../../helpers/scripted-driver';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1.5, initial_disk_allocation_ratio: 1 });
const REFRESH_S = 300;
const AGG = randomUUID();

function setup(refreshSeconds = REFRESH_S) {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const driver = new ScriptedDriver();
  const root = randomUUID();
  driver.root = { inventories: { VCPU: { total: 8 }, MEMORY_MB: { total: 8192, reserved: 512 } }, traits: ['COMPUTE_NODE'], aggregates: [] };
  driver.children = Array.from({ length: 3 }, (_, i) => ({
    uuid: randomUUID(),
    name: `h1_pci_0000_0${i}_00_0`,
    inventories: { CUSTOM_MIG_1G_10GB: { total: 7 } },
    traits: ['CUSTOM_GPU_H100'],
    aggregates: [AGG],
  }));
  const log = captureLog();
  let t = 1_000_000;
  const clock = { now: () => t, sleep: () => Promise.resolve() };
  const tracker = new ResourceTracker({
    api,
    driver,
    nodename: 'h1',
    rootUuid: root,
    initialRatios: RATIOS,
    logger: log.logger,
    clock,
    associationRefreshSeconds: refreshSeconds,
  });
  const child = driver.children[0]?.uuid ?? '';
  /** Someone else edits a provider in Placement (the generation moves, as Placement moves it). */
  const outside = (uuid: string, edit: (rp: NonNullable<ReturnType<typeof mock.providers.get>>) => void): void => {
    const rp = mock.providers.get(uuid);
    if (!rp) throw new Error(`no provider ${uuid}`);
    edit(rp);
    rp.generation++;
  };
  /** One cycle `seconds` after the previous one. */
  const cycleAfter = async (seconds: number) => {
    t += seconds * 1000;
    mock.requests.length = 0;
    const r = await tracker.updateFromDriver();
    return { ...r, gets: mock.requests.filter((q) => q.method === 'GET').map((q) => q.path.split('?')[0]) };
  };
  /**
   * The first cycle made (and so held) the providers: a cycle before the interval is over reads
   * only the listing; the one when it is over re-reads what moved.
   */
  const cycleWhenDue = async () => {
    const early = await cycleAfter(60);
    expect(early.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    return cycleAfter(REFRESH_S - 60);
  };
  return { mock, api, driver, tracker, root, child, log, outside, cycleAfter, cycleWhenDue };
}

afterEach(() => nock.cleanAll());

describe('association refresh: outside changes to what the agent owns are repaired', () => {
  test('quiet tree: between and at refreshes one read, zero writes', async () => {
    const h = setup();
    await h.cycleAfter(0);
    for (const s of [60, REFRESH_S, REFRESH_S + 1]) {
      const r = await h.cycleAfter(s);
      expect(r.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
      expect(r.refreshed).toEqual({ reads: 0, providers: [], drifted: {} });
    }
  });

  test("an inventory total changed outside: re-read (3 reads, that provider only) and put back", async () => {
    const h = setup();
    await h.cycleAfter(0);
    h.outside(h.child, (rp) => {
      const inv = rp.inventories.CUSTOM_MIG_1G_10GB;
      if (inv) inv.total = 3;
    });
    const r = await h.cycleWhenDue();
    expect(r.refreshed).toEqual({ reads: 3, providers: [h.child], drifted: { [h.child]: ['inventories'] } });
    expect(r.gets).toEqual(['/resource_providers', ...['inventories', 'traits', 'aggregates'].map((a) => `/resource_providers/${h.child}/${a}`)]);
    expect(r.stats).toEqual({ reads: 4, writes: 1, conflicts: 0 });
    expect(h.mock.providers.get(h.child)?.inventories.CUSTOM_MIG_1G_10GB?.total).toBe(7);
    expect(h.log.lines().some((l) => l.provider === h.child && l.level === 'info')).toBe(true);
    expect((await h.cycleAfter(60)).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
  });

  test('an allocation ratio the operator set is kept: it is not drift', async () => {
    const h = setup();
    await h.cycleAfter(0);
    h.outside(h.root, (rp) => {
      const inv = rp.inventories.VCPU;
      if (inv) inv.allocation_ratio = 16;
    });
    const r = await h.cycleWhenDue();
    expect(r.refreshed?.drifted).toEqual({ [h.root]: ['inventories'] });
    expect(r.stats.writes).toBe(0);
    expect(h.mock.providers.get(h.root)?.inventories.VCPU?.allocation_ratio).toBe(16);
  });

  test('one of its traits removed outside: put back; an operator trait added beside it stays', async () => {
    const h = setup();
    await h.cycleAfter(0);
    await h.api.ensureTrait('CUSTOM_OPERATOR');
    h.outside(h.root, (rp) => {
      rp.traits = ['CUSTOM_OPERATOR'];
    });
    const r = await h.cycleWhenDue();
    expect(r.refreshed).toEqual({ reads: 3, providers: [h.root], drifted: { [h.root]: ['traits'] } });
    expect(r.stats).toEqual({ reads: 4, writes: 1, conflicts: 0 });
    expect(h.mock.providers.get(h.root)?.traits.sort()).toEqual(['COMPUTE_NODE', 'CUSTOM_OPERATOR']);
    expect((await h.cycleAfter(REFRESH_S)).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    expect(h.mock.providers.get(h.root)?.traits.sort()).toEqual(['COMPUTE_NODE', 'CUSTOM_OPERATOR']);
  });

  test('an operator trait and aggregate added to our provider are never removed', async () => {
    const h = setup();
    await h.cycleAfter(0);
    await h.api.ensureTrait('CUSTOM_OPERATOR');
    const theirs = randomUUID();
    h.outside(h.child, (rp) => {
      rp.traits = [...rp.traits, 'CUSTOM_OPERATOR'];
      rp.aggregates = [...rp.aggregates, theirs];
    });
    const r = await h.cycleWhenDue();
    expect(r.refreshed).toEqual({ reads: 3, providers: [h.child], drifted: { [h.child]: ['traits', 'aggregates'] } });
    expect(r.stats).toEqual({ reads: 4, writes: 0, conflicts: 0 });
    expect(h.mock.providers.get(h.child)?.traits.sort()).toEqual(['CUSTOM_GPU_H100', 'CUSTOM_OPERATOR']);
    expect(h.mock.providers.get(h.child)?.aggregates.sort()).toEqual([AGG, theirs].sort());
  });

  test('one of its aggregates removed outside: put back', async () => {
    const h = setup();
    await h.cycleAfter(0);
    h.outside(h.child, (rp) => {
      rp.aggregates = [];
    });
    const r = await h.cycleWhenDue();
    expect(r.refreshed).toEqual({ reads: 3, providers: [h.child], drifted: { [h.child]: ['aggregates'] } });
    expect(r.stats).toEqual({ reads: 4, writes: 1, conflicts: 0 });
    expect(h.mock.providers.get(h.child)?.aggregates).toEqual([AGG]);
  });

  test('a child provider deleted outside: created again at the next cycle, with no extra read', async () => {
    const h = setup();
    await h.cycleAfter(0);
    h.mock.providers.delete(h.child);
    const r = await h.cycleAfter(60);
    expect(r.refreshed).toEqual({ reads: 0, providers: [], drifted: {} });
    expect(r.stats).toEqual({ reads: 1, writes: 4, conflicts: 0 });
    expect(r.created).toEqual([h.child]);
    const rp = h.mock.providers.get(h.child);
    expect([rp?.inventories.CUSTOM_MIG_1G_10GB?.total, rp?.traits, rp?.aggregates]).toEqual([7, ['CUSTOM_GPU_H100'], [AGG]]);
    expect((await h.cycleAfter(60)).stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
  });

  test('claims move the root generation every cycle: it is re-read once per interval, and a change is repaired within it', async () => {
    const h = setup();
    await h.cycleAfter(0);
    const claim = async () => {
      await h.api.putAllocations(randomUUID(), {
        allocations: { [h.root]: { resources: { VCPU: 1 } } },
        project_id: randomUUID(),
        user_id: randomUUID(),
        consumer_generation: null,
      });
    };
    /** Cycles every 60 s for `seconds`, a claim before each; the cycles' results. */
    const claimsFor = async (seconds: number) => {
      const out = [];
      for (let s = 60; s <= seconds; s += 60) {
        await claim();
        out.push(await h.cycleAfter(60));
      }
      return out;
    };
    const firstInterval = await claimsFor(REFRESH_S);
    for (const r of firstInterval.slice(0, -1)) expect(r.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    expect(firstInterval.at(-1)?.refreshed).toEqual({ reads: 3, providers: [h.root], drifted: {} });
    // An outside change right after that re-read, among claims: found when the interval is over.
    h.outside(h.root, (rp) => {
      const inv = rp.inventories.MEMORY_MB;
      if (inv) inv.total = 1024;
    });
    const second = await claimsFor(REFRESH_S);
    for (const r of second.slice(0, -1)) expect(r.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    expect(second.at(-1)?.refreshed).toEqual({ reads: 3, providers: [h.root], drifted: { [h.root]: ['inventories'] } });
    expect(second.at(-1)?.stats).toEqual({ reads: 4, writes: 1, conflicts: 0 });
    expect(h.mock.providers.get(h.root)?.inventories.MEMORY_MB?.total).toBe(8192);
  });

  test('a provider quiet through its interval is re-read at the first cycle its generation moves', async () => {
    const h = setup();
    await h.cycleAfter(0);
    expect((await h.cycleAfter(2 * REFRESH_S)).stats.reads).toBe(1);
    h.outside(h.child, (rp) => {
      rp.traits = [];
    });
    const r = await h.cycleAfter(1);
    expect(r.refreshed).toEqual({ reads: 3, providers: [h.child], drifted: { [h.child]: ['traits'] } });
    expect(h.mock.providers.get(h.child)?.traits).toEqual(['CUSTOM_GPU_H100']);
  });

  test('0 turns the refresh off: an outside change stays until the cache is cleared (SIGHUP)', async () => {
    const h = setup(0);
    await h.cycleAfter(0);
    h.outside(h.child, (rp) => {
      rp.traits = [];
    });
    for (const s of [60, REFRESH_S, 10 * REFRESH_S]) {
      const r = await h.cycleAfter(s);
      expect(r.stats).toEqual({ reads: 1, writes: 0, conflicts: 0 });
    }
    expect(h.mock.providers.get(h.child)?.traits).toEqual([]);
    h.tracker.clearCache();
    await h.cycleAfter(60);
    expect(h.mock.providers.get(h.child)?.traits).toEqual(['CUSTOM_GPU_H100']);
  });
});
