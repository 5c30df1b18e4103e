// Checked replies at the client: for every Placement route whose 2xx body the agent reads, and for
// keystone's token, a malformed body is one MalformedResponseError naming the route and the field
// (an outage to every caller, never a TypeError), and the next call with a good body succeeds.
import nock from 'nock';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { MalformedResponseError, PlacementUnavailableError, PlacementVersionError } from '../../../../tracker/placement/errors';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { KeystoneAuth } from '../../../../tracker/placement/keystone';
import { OutageRetry } from '../../../../tracker/claims/retry';
import type { Clock } from '../../../../lib/clock';

const BASE = 'http://placement.test:8778';
const KS = 'https://keystone.test:5000';
const RP = '4e8e5957-649f-477b-9e5b-f1f75b21c03c';
const CHILD = 'c4ce8a33-d0bd-4f5e-8a0b-6bd8d1b0e5a1';
const CONSUMER = '9b0c7a54-6d1f-4e0e-8f2a-3a2b0f0d2f11';

const noSleep: Clock = { now: () => 0, sleep: () => Promise.resolve() };
const client = (): PlacementClient => new PlacementClient(new PlacementHttp({ auth: new NoAuth(BASE), clock: noSleep, attempts: 1 }));

const provider = { uuid: RP, name: 'host1', generation: 3, parent_provider_uuid: null, root_provider_uuid: RP, links: [{ rel: 'self', href: `/resource_providers/${RP}` }] };
const child = { uuid: CHILD, name: 'host1_gpu0', generation: 1, parent_provider_uuid: RP, root_provider_uuid: RP };
const vcpu = { total: 8, reserved: 0, min_unit: 1, max_unit: 8, step_size: 1, allocation_ratio: 16.0 };

interface RouteCase {
  /** The route as the error names it. */
  readonly route: string;
  readonly method: 'GET' | 'PUT' | 'POST';
  /** The path nock matches (query included). */
  readonly path: string;
  readonly call: (c: PlacementClient) => Promise<unknown>;
  readonly good: object;
  /** What the call resolves to with `good`. */
  readonly parsed: unknown;
  readonly bad: unknown;
  readonly field: string;
}

const inventories = { resource_provider_generation: 4, inventories: { VCPU: vcpu } };
const inventoryWrite = { VCPU: vcpu };

const ROUTES: RouteCase[] = [
  {
    route: 'GET /resource_providers?in_tree=...',
    method: 'GET',
    path: `/resource_providers?in_tree=${RP}`,
    call: (c) => c.providersInTree(RP),
    good: { resource_providers: [provider, child] },
    parsed: [{ uuid: RP, name: 'host1', generation: 3, parent_provider_uuid: null, root_provider_uuid: RP }, child],
    bad: { resource_providers: [provider, { ...child, generation: '1' }] },
    field: 'resource_providers[1].generation',
  },
  {
    route: 'GET /resource_providers?member_of=...&required=...',
    method: 'GET',
    path: '/resource_providers?member_of=in:agg1&required=MISC_SHARES_VIA_AGGREGATE',
    call: (c) => c.sharingProviders(['agg1']),
    good: { resource_providers: [child] },
    parsed: [child],
    bad: { resource_providers: [{ ...child, root_provider_uuid: undefined }] },
    field: 'resource_providers[0].root_provider_uuid',
  },
  {
    route: 'POST /resource_providers',
    method: 'POST',
    path: '/resource_providers',
    call: (c) => c.createProvider({ uuid: CHILD, name: 'host1_gpu0', parent_provider_uuid: RP }),
    good: child,
    parsed: child,
    bad: '<html><body>502 Bad Gateway</body></html>',
    field: '(body)',
  },
  {
    route: 'GET /resource_providers/{uuid}/inventories',
    method: 'GET',
    path: `/resource_providers/${RP}/inventories`,
    call: (c) => c.getInventories(RP),
    good: inventories,
    parsed: inventories,
    bad: { resource_provider_generation: 4, inventories: { VCPU: { ...vcpu, total: '8' } } },
    field: 'inventories.VCPU.total',
  },
  {
    route: 'PUT /resource_providers/{uuid}/inventories',
    method: 'PUT',
    path: `/resource_providers/${RP}/inventories`,
    call: (c) => c.putInventories(RP, 3, inventoryWrite),
    good: inventories,
    parsed: inventories,
    bad: { inventories: inventoryWrite },
    field: 'resource_provider_generation',
  },
  {
    route: 'GET /resource_providers/{uuid}/traits',
    method: 'GET',
    path: `/resource_providers/${RP}/traits`,
    call: (c) => c.getTraits(RP),
    good: { resource_provider_generation: 4, traits: ['COMPUTE_NODE'] },
    parsed: { resource_provider_generation: 4, traits: ['COMPUTE_NODE'] },
    bad: { resource_provider_generation: 4, traits: 'COMPUTE_NODE' },
    field: 'traits',
  },
  {
    route: 'PUT /resource_providers/{uuid}/traits',
    method: 'PUT',
    path: `/resource_providers/${RP}/traits`,
    call: (c) => c.putTraits(RP, 3, ['COMPUTE_NODE']),
    good: { resource_provider_generation: 4, traits: ['COMPUTE_NODE'] },
    parsed: { resource_provider_generation: 4, traits: ['COMPUTE_NODE'] },
    bad: { resource_provider_generation: -1, traits: ['COMPUTE_NODE'] },
    field: 'resource_provider_generation',
  },
  {
    route: 'GET /resource_providers/{uuid}/aggregates',
    method: 'GET',
    path: `/resource_providers/${RP}/aggregates`,
    call: (c) => c.getAggregates(RP),
    good: { resource_provider_generation: 4, aggregates: ['agg1'] },
    parsed: { resource_provider_generation: 4, aggregates: ['agg1'] },
    bad: { resource_provider_generation: 4, aggregates: ['agg1', 7] },
    field: 'aggregates[1]',
  },
  {
    route: 'PUT /resource_providers/{uuid}/aggregates',
    method: 'PUT',
    path: `/resource_providers/${RP}/aggregates`,
    call: (c) => c.putAggregates(RP, 3, ['agg1']),
    good: { resource_provider_generation: 4, aggregates: ['agg1'] },
    parsed: { resource_provider_generation: 4, aggregates: ['agg1'] },
    bad: { resource_provider_generation: 4 },
    field: 'aggregates',
  },
  {
    route: 'GET /traits?name=...',
    method: 'GET',
    path: '/traits?name=in:COMPUTE_NODE,CUSTOM_X',
    call: (c) => c.existingTraits(['COMPUTE_NODE', 'CUSTOM_X']),
    good: { traits: ['COMPUTE_NODE'] },
    parsed: new Set(['COMPUTE_NODE']),
    bad: { traits: null },
    field: 'traits',
  },
  {
    route: 'GET /resource_providers/{uuid}/allocations',
    method: 'GET',
    path: `/resource_providers/${RP}/allocations`,
    call: (c) => c.providerAllocations(RP),
    good: { resource_provider_generation: 5, allocations: { [CONSUMER]: { resources: { VCPU: 2 } } } },
    parsed: { resource_provider_generation: 5, allocations: { [CONSUMER]: { resources: { VCPU: 2 } } } },
    bad: { resource_provider_generation: 5, allocations: { [CONSUMER]: { resources: { VCPU: '2' } } } },
    field: `allocations.${CONSUMER}.resources.VCPU`,
  },
  {
    route: 'GET /allocations/{uuid}',
    method: 'GET',
    path: `/allocations/${CONSUMER}`,
    call: (c) => c.consumerAllocations(CONSUMER),
    good: { allocations: { [RP]: { resources: { VCPU: 2 }, generation: 5 } }, consumer_generation: 1, project_id: 'p', user_id: 'u' },
    parsed: { allocations: { [RP]: { resources: { VCPU: 2 }, generation: 5 } }, consumer_generation: 1, project_id: 'p', user_id: 'u' },
    bad: { allocations: { [RP]: { resources: { VCPU: 2 } } }, consumer_generation: '1', project_id: 'p', user_id: 'u' },
    field: 'consumer_generation',
  },
];

afterEach(() => nock.cleanAll());
afterAll(() => nock.restore());

describe('a malformed 2xx answer from each Placement route the agent reads', () => {
  test.each(ROUTES.map((r) => [r.route, r] as const))('%s: a MalformedResponseError naming route and field, then a good answer heals', async (_name, r) => {
    const scope = nock(BASE)
      .intercept(r.path, r.method)
      .reply(200, r.bad as nock.Body)
      .intercept(r.path, r.method)
      .reply(200, r.good as nock.Body);
    const c = client();
    const err = await r.call(c).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MalformedResponseError);
    expect(err).toBeInstanceOf(PlacementUnavailableError);
    expect(err).not.toBeInstanceOf(TypeError);
    const m = err as MalformedResponseError;
    expect(m.route).toBe(r.route);
    expect(m.field).toBe(r.field);
    expect(m.status).toBe(200);
    expect(m.message).toContain(r.route);
    expect(m.message).toContain(r.field);
    expect(await r.call(c)).toEqual(r.parsed);
    scope.done();
  });

  test('fields the agent does not read are dropped, not kept in the cache', async () => {
    nock(BASE).get(`/resource_providers?in_tree=${RP}`).reply(200, { resource_providers: [provider] });
    const [listed] = await client().providersInTree(RP);
    expect(listed).not.toHaveProperty('links');
  });

  test('GET / with a malformed version document: a version error whose cause names the field; a good one then parses', async () => {
    nock(BASE)
      .get('/')
      .reply(200, { versions: [{ id: 'v1.0', min_version: '1.0', max_version: 'latest' }] })
      .get('/')
      .reply(200, { versions: [{ id: 'v1.0', min_version: '1.0', max_version: '1.39' }] });
    const c = client();
    const err = await c.versions().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlacementVersionError);
    const cause = (err as Error).cause as MalformedResponseError;
    expect(cause).toBeInstanceOf(MalformedResponseError);
    expect(cause.route).toBe('GET /');
    expect(cause.field).toBe('versions[0].max_version');
    expect((err as Error).message).toContain('versions[0].max_version');
    expect(await c.versions()).toEqual({ min: { major: 1, minor: 0 }, max: { major: 1, minor: 39 } });
  });

  test('answers the agent does not read are not checked: a rename or an allocation write with an odd body succeeds', async () => {
    nock(BASE).put(`/resource_providers/${RP}`).reply(200, 'ok').put(`/allocations/${CONSUMER}`).reply(204, 'x');
    const c = client();
    await expect(c.renameProvider(RP, 'host2', null)).resolves.toBeUndefined();
    await expect(c.putAllocations(CONSUMER, { allocations: {}, project_id: 'p', user_id: 'u', consumer_generation: 1 })).resolves.toBeUndefined();
  });

  test('an operation under the outage policy retries a malformed answer as it retries a 5xx', async () => {
    nock(BASE)
      .get(`/allocations/${CONSUMER}`)
      .reply(200, { allocations: [] })
      .get(`/allocations/${CONSUMER}`)
      .reply(200, { allocations: {} });
    const retries: string[] = [];
    const policy = new OutageRetry({ deadlineMs: 60000, clock: noSleep, onRetry: (_what, _n, _ms, cause) => retries.push(cause.message) });
    const c = client();
    await expect(policy.run('read', () => c.consumerAllocations(CONSUMER))).resolves.toEqual({ allocations: {} });
    expect(retries).toEqual([expect.stringContaining('GET /allocations/{uuid} answered 200 with a malformed body at allocations')]);
  });
});

describe("a malformed 201 from keystone's token request", () => {
  const auth = (): KeystoneAuth => new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'a', secret: 'b' }, clock: noSleep });
  const catalog = [{ type: 'placement', endpoints: [{ interface: 'internal', region: 'R1', region_id: 'R1', url: 'http://placement.internal:8778/' }] }];

  test.each([
    ['no expiry', 'token.expires_at', { token: { catalog } }],
    ['an expiry that is no time', 'token.expires_at', { token: { expires_at: 'tomorrow', catalog } }],
    ['a catalog entry without endpoints', 'token.catalog[0].endpoints', { token: { expires_at: '2099-01-01T00:00:00.000000Z', catalog: [{ type: 'placement' }] } }],
    ['an endpoint without url', 'token.catalog[0].endpoints[0].url', { token: { expires_at: '2099-01-01T00:00:00Z', catalog: [{ type: 'placement', endpoints: [{ interface: 'public' }] }] } }],
    ['not JSON', '(body)', 'Service Unavailable'],
  ])('%s: the error names the route and %s; nothing is cached; the next token heals', async (_name, field, body) => {
    const scope = nock(KS)
      .post('/v3/auth/tokens')
      .reply(201, body as nock.Body, { 'X-Subject-Token': 'bad' })
      .post('/v3/auth/tokens')
      .reply(201, { token: { expires_at: '2099-01-01T00:00:00.000000Z', catalog } }, { 'X-Subject-Token': 'good' });
    const a = auth();
    const err = await a.token().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MalformedResponseError);
    expect(err).toBeInstanceOf(PlacementUnavailableError);
    expect((err as MalformedResponseError).route).toBe('POST /v3/auth/tokens');
    expect((err as MalformedResponseError).field).toBe(field);
    expect((err as Error).message).toContain(`POST /v3/auth/tokens answered 201 with a malformed body at ${field}`);
    expect(await a.token()).toBe('good');
    expect(await a.endpoint()).toBe('http://placement.internal:8778');
    scope.done();
  });

  test('an unscoped token (no catalog) is well formed: the endpoint comes from endpoint_override', async () => {
    nock(KS).post('/v3/auth/tokens').reply(201, { token: { expires_at: '2099-01-01T00:00:00Z' } }, { 'X-Subject-Token': 't' });
    const a = new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'a', secret: 'b' }, endpointOverride: 'http://pl:1' });
    expect(await a.token()).toBe('t');
    expect(await a.endpoint()).toBe('http://pl:1');
  });
});
