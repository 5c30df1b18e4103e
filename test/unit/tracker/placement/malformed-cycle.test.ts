// Checked replies in the audit: a malformed 2xx answer from any Placement route a cycle reads ends
// that run with ONE log line naming the route and the field (no TypeError, no crash), and the next
// run converges Placement to what the driver describes.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { Auditor } from '../../../../tracker/audit';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { NodeHttpTransport, type HttpTransport, type TransportRequest, type TransportResponse } from '../../../../tracker/placement/transport';
import { initialRatiosFrom, ResourceTracker } from '../../../../tracker/tracker';
import { MockPlacement } from '../../../helpers/mock-placement';
import { captureLog } from '../../../helpers/placement';
import { ScriptedDriver } from '../../../helpers/scripted-driver';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1.5, initial_disk_allocation_ratio: 1 });
const AGG = '1b2c3d4e-0000-4000-8000-00000000a661';

/** Passes requests to the real transport (nock answers) and spoils the next answer that matches. */
class SpoilingTransport implements HttpTransport {
  private readonly inner = new NodeHttpTransport();
  private spoil: { method: string; path: RegExp; body: (good: unknown) => unknown } | undefined;
  spoiled = 0;

  spoilNext(method: string, path: RegExp, body: (good: unknown) => unknown): void {
    this.spoil = { method, path, body };
  }

  async send(req: TransportRequest): Promise<TransportResponse> {
    const res = await this.inner.send(req);
    const s = this.spoil;
    if (!s || s.method !== req.method || !s.path.test(new URL(req.url).pathname + new URL(req.url).search) || res.status >= 300) return res;
    this.spoil = undefined;
    this.spoiled++;
    return { ...res, data: s.body(res.data) };
  }
}

function setup() {
  const mock = new MockPlacement().install();
  const transport = new SpoilingTransport();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base), transport }));
  const root = randomUUID();
  const gpu = randomUUID();
  const share = randomUUID();
  const driver = new ScriptedDriver();
  driver.root = { inventories: { VCPU: { total: 8 }, MEMORY_MB: { total: 8192, reserved: 512 } }, traits: ['COMPUTE_NODE', 'CUSTOM_GOLD'], aggregates: [AGG] };
  driver.children = [{ uuid: gpu, name: 'h1_pci_0000_01_00_0', inventories: { CUSTOM_MIG_1G_10GB: { total: 7 } }, traits: ['CUSTOM_GPU_H100'] }];
  mock.providers.set(share, {
    uuid: share,
    name: 'pool',
    parent: null,
    generation: 1,
    inventories: { DISK_GB: { total: 1000, reserved: 0, min_unit: 1, max_unit: 1000, step_size: 1, allocation_ratio: 1 } },
    traits: ['MISC_SHARES_VIA_AGGREGATE'],
    aggregates: [AGG],
  });
  const log = captureLog();
  const tracker = new ResourceTracker({ api, driver, nodename: 'h1', rootUuid: root, initialRatios: RATIOS, logger: log.logger });
  const auditor = new Auditor({ tracker, api, instances: { listInstances: () => Promise.resolve([]) }, logger: log.logger, heal: 'heal', healGraceMs: 0 });
  return { mock, transport, tracker, auditor, log, root, gpu, share };
}
type Setup = ReturnType<typeof setup>;

/**
 * Placement holds exactly what the driver describes; the run after that writes nothing and sees
 * the sharing pool (looked up once the root's aggregates are known).
 */
async function converged({ mock, tracker, auditor, root, gpu, share }: Setup): Promise<void> {
  expect(mock.providers.get(root)?.inventories.VCPU).toEqual({ total: 8, reserved: 0, min_unit: 1, max_unit: 8, step_size: 1, allocation_ratio: 4 });
  expect(mock.providers.get(root)?.inventories.MEMORY_MB?.reserved).toBe(512);
  expect([...(mock.providers.get(root)?.traits ?? [])].sort()).toEqual(['COMPUTE_NODE', 'CUSTOM_GOLD']);
  expect(mock.providers.get(root)?.aggregates).toEqual([AGG]);
  expect(mock.providers.get(gpu)?.parent).toBe(root);
  expect(mock.providers.get(gpu)?.inventories.CUSTOM_MIG_1G_10GB?.total).toBe(7);
  expect(mock.providers.get(gpu)?.traits).toEqual(['CUSTOM_GPU_H100']);
  const steady = await auditor.runLogged();
  expect(steady?.sync.stats.writes).toBe(0);
  expect(tracker.sharingProviders().map((p) => p.uuid)).toEqual([share]);
}

const typeErrors = (s: Setup): unknown[] => s.log.lines().filter((l) => JSON.stringify(l).includes('TypeError'));

interface CycleCase {
  readonly route: string;
  /** What happens before the spoiled run: nothing (a first run), or one good run and then... */
  readonly before: 'none' | 'one run' | 'one run, cache cleared' | 'one run, root inventory changed outside, cache cleared';
  readonly method: string;
  readonly path: RegExp;
  readonly body: (good: unknown) => unknown;
  readonly field: string;
}

const obj = (v: unknown): Record<string, unknown> => v as Record<string, unknown>;
const CASES: CycleCase[] = [
  { route: 'GET /resource_providers?in_tree=...', before: 'none', method: 'GET', path: /in_tree=/, body: () => ({ resource_providers: 'none' }), field: 'resource_providers' },
  { route: 'POST /resource_providers', before: 'none', method: 'POST', path: /^\/resource_providers$/, body: () => '<html>proxy</html>', field: '(body)' },
  { route: 'GET /traits?name=...', before: 'none', method: 'GET', path: /^\/traits\?/, body: () => ({}), field: 'traits' },
  // A first run writes every inventory in one POST /reshaper (answered without a body); a PUT
  // comes from repairing a change made outside.
  { route: 'PUT /resource_providers/{uuid}/inventories', before: 'one run, root inventory changed outside, cache cleared', method: 'PUT', path: /\/inventories$/, body: (g) => ({ ...obj(g), resource_provider_generation: null }), field: 'resource_provider_generation' },
  { route: 'PUT /resource_providers/{uuid}/traits', before: 'none', method: 'PUT', path: /\/traits$/, body: (g) => ({ ...obj(g), traits: [1] }), field: 'traits[0]' },
  { route: 'PUT /resource_providers/{uuid}/aggregates', before: 'none', method: 'PUT', path: /\/aggregates$/, body: (g) => ({ ...obj(g), aggregates: {} }), field: 'aggregates' },
  { route: 'GET /resource_providers?member_of=...&required=...', before: 'one run', method: 'GET', path: /member_of=/, body: () => ({ resource_providers: [{ uuid: 1 }] }), field: 'resource_providers[0].uuid' },
  {
    route: 'GET /resource_providers/{uuid}/inventories',
    before: 'one run, cache cleared',
    method: 'GET',
    path: /\/inventories$/,
    body: (g) => ({ ...obj(g), inventories: { VCPU: { total: 8 } } }),
    field: 'inventories.VCPU.reserved',
  },
  { route: 'GET /resource_providers/{uuid}/traits', before: 'one run, cache cleared', method: 'GET', path: /\/traits$/, body: () => null, field: '(body)' },
  { route: 'GET /resource_providers/{uuid}/aggregates', before: 'one run, cache cleared', method: 'GET', path: /\/aggregates$/, body: (g) => ({ ...obj(g), resource_provider_generation: '3' }), field: 'resource_provider_generation' },
  {
    route: 'GET /resource_providers/{uuid}/allocations',
    before: 'one run, cache cleared',
    method: 'GET',
    path: /\/allocations$/,
    body: (g) => ({ ...obj(g), allocations: { c1: { resources: { VCPU: 1.5 } } } }),
    field: 'allocations.c1.resources.VCPU',
  },
];

afterEach(() => nock.cleanAll());

describe('a malformed Placement answer during an audit', () => {
  test.each(CASES.map((c) => [c.route, c] as const))('%s: one error line naming route and field; the next run heals', async (_name, c) => {
    const s = setup();
    if (c.before !== 'none') expect(await s.auditor.runLogged()).toBeDefined();
    if (c.before === 'one run, root inventory changed outside, cache cleared') {
      const rp = s.mock.providers.get(s.root);
      const mem = rp?.inventories.MEMORY_MB;
      if (!rp || !mem) throw new Error('fixture');
      rp.inventories = { ...rp.inventories, MEMORY_MB: { ...mem, reserved: 0 } };
      rp.generation++;
    }
    if (c.before.endsWith('cache cleared')) s.tracker.clearCache();
    s.transport.spoilNext(c.method, c.path, c.body);

    expect(await s.auditor.runLogged()).toBeUndefined();
    expect(s.transport.spoiled).toBe(1);
    const errors = s.log.lines().filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ msg: 'audit failed; the next run retries', route: c.route, field: c.field });
    expect(String(errors[0]?.reason)).toContain(`${c.route} answered 200 with a malformed body at ${c.field}`);
    expect(typeErrors(s)).toEqual([]);

    const healed = await s.auditor.runLogged();
    expect(healed).toBeDefined();
    expect(healed?.sync.problems).toEqual([]);
    expect(s.log.lines().filter((l) => l.level === 'error')).toHaveLength(1);
    await converged(s);
  });

  test('GET /allocations/{uuid} while healing an orphan: one warning naming route and field, the next run removes it', async () => {
    const s = setup();
    expect(await s.auditor.runLogged()).toBeDefined();
    const orphan = randomUUID();
    s.mock.consumers.set(orphan, { generation: 1, project_id: 'p', user_id: 'u', allocations: { [s.root]: { VCPU: 1 } } });
    const rootRp = s.mock.providers.get(s.root);
    if (rootRp) rootRp.generation++; // as Placement does when an allocation is written
    s.transport.spoilNext('GET', /^\/allocations\//, (g) => ({ ...obj(g), project_id: 7 }));

    const first = await s.auditor.runLogged();
    expect(first?.orphaned).toEqual([orphan]);
    expect(first?.healed).toEqual([]);
    const warned = s.log.lines().filter((l) => l.msg === 'not healed');
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ consumer: orphan, route: 'GET /allocations/{uuid}', field: 'project_id' });
    expect(s.mock.consumers.has(orphan)).toBe(true);
    expect(typeErrors(s)).toEqual([]);

    const second = await s.auditor.runLogged();
    expect(second?.healed).toEqual([orphan]);
    expect(s.mock.consumers.has(orphan)).toBe(false);
    await converged(s);
  });
});
