import nock from 'nock';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import {
  CannotDeleteParentError,
  ConsumerGenerationConflictError,
  DuplicateNameError,
  InventoryInUseError,
  PlacementAuthError,
  PlacementBadRequestError,
  PlacementConflictError,
  PlacementUnavailableError,
  PlacementVersionError,
  ProviderGenerationConflictError,
} from '../../../../tracker/placement/errors';
import { PlacementHttp, routeOf } from '../../../../tracker/placement/http';
import type { Clock } from '../../../../lib/clock';

const BASE = 'http://placement.test:8778';
const FIXTURES = join(__dirname, '..', '..', '..', 'fixtures', 'placement');

interface Exchange {
  method: string;
  path: string;
  status: number;
  response_body: unknown;
  request_body: unknown;
  microversion: string | null;
}
const fixture = (name: string): Exchange => JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8')) as Exchange;

const noSleep: Clock = { now: () => 0, sleep: () => Promise.resolve() };
const http = (attempts = 3): PlacementHttp => new PlacementHttp({ auth: new NoAuth(BASE), clock: noSleep, attempts });

afterEach(() => nock.cleanAll());
afterAll(() => nock.restore());

describe('PlacementHttp', () => {
  test('sends the microversion, the token and a request id; GET / is anonymous', async () => {
    const scope = nock(BASE, { badheaders: ['x-auth-token'] })
      .get('/')
      .reply(200, fixture('01-version-root').response_body as nock.Body);
    const v = await new PlacementClient(http()).assertUsable();
    expect(v.max).toEqual({ major: 1, minor: 39 });
    scope.done();

    const listed = nock(BASE)
      .matchHeader('openstack-api-version', 'placement 1.14')
      .matchHeader('x-auth-token', 'admin')
      .matchHeader('x-openstack-request-id', /^req-[0-9a-f-]{36}$/)
      .get('/resource_providers')
      .reply(200, { resource_providers: [] });
    expect(await new PlacementClient(http()).listProviders()).toEqual([]);
    listed.done();
  });

  test('a Placement older than 1.30 is refused with a clear message', async () => {
    nock(BASE).get('/').reply(200, { versions: [{ id: 'v1.0', min_version: '1.0', max_version: '1.29', status: 'CURRENT' }] });
    await expect(new PlacementClient(http()).assertUsable()).rejects.toThrow(
      /supports microversions up to 1\.29; compute-agent needs 1\.30 or later/,
    );
  });

  test('something that is not Placement answering GET / is a version error', async () => {
    nock(BASE).get('/').reply(200, '<html>hello</html>');
    await expect(new PlacementClient(http()).versions()).rejects.toBeInstanceOf(PlacementVersionError);
  });

  test.each([
    ['11-put-root-inventories-stale-generation-409', ProviderGenerationConflictError],
    ['23-put-allocations-stale-generation-409', ConsumerGenerationConflictError],
    ['22-put-allocations-null-generation-existing-consumer-409', ConsumerGenerationConflictError],
    ['30-put-root-inventories-remove-inuse-409', InventoryInUseError],
    ['31-delete-root-with-child-409', CannotDeleteParentError],
    ['07-create-duplicate-name-409', DuplicateNameError],
    ['15-put-inventory-bad-rc-400', PlacementBadRequestError],
    ['08-create-child-unknown-parent-400', PlacementBadRequestError],
    ['02-no-token-401', PlacementAuthError],
    ['03-non-admin-token-403', PlacementAuthError],
    ['04-bad-microversion-406', PlacementVersionError],
    ['33-post-reshaper-stale-provider-generation-409', ProviderGenerationConflictError],
    ['34-post-reshaper-stale-consumer-generation-409', ConsumerGenerationConflictError],
  ])('real answer %s becomes %p', async (name, cls) => {
    const ex = fixture(name);
    // Twice: a 401 is retried once with a fresh token before it counts.
    nock(BASE).intercept(ex.path, ex.method).times(2).reply(ex.status, ex.response_body as nock.Body);
    const err = await http()
      .request({ method: ex.method as 'PUT', path: ex.path, microversion: ex.microversion ?? '1.39', body: ex.request_body ?? undefined, retry: 'refused-only' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(cls);
    expect((err as Error).message).toContain(`${ex.method} ${ex.path}: ${ex.status}`);
  });

  test('a 409 with undefined_code (capacity exceeded) is a generic conflict', async () => {
    nock(BASE)
      .put('/allocations/x')
      .reply(409, { errors: [{ status: 409, code: 'placement.undefined_code', detail: 'Unable to allocate inventory' }] });
    await expect(http().request({ method: 'PUT', path: '/allocations/x', microversion: '1.28', retry: 'refused-only' })).rejects.toBeInstanceOf(
      PlacementConflictError,
    );
  });

  test('5xx is retried for safe requests, then succeeds', async () => {
    const scope = nock(BASE).get('/resource_providers').reply(503, 'busy').get('/resource_providers').reply(200, { resource_providers: [] });
    const h = http();
    await h.request({ method: 'GET', path: '/resource_providers', microversion: '1.14' });
    scope.done();
    expect(h.counter.total()).toBe(2);
    expect(h.counter.snapshot().get('GET /resource_providers 503')).toBe(1);
  });

  test('5xx is not retried for refused-only requests (a replayed allocation write could have landed)', async () => {
    const scope = nock(BASE).put('/allocations/c').reply(500, 'boom');
    await expect(
      http().request({ method: 'PUT', path: '/allocations/c', microversion: '1.28', body: {}, retry: 'refused-only' }),
    ).rejects.toBeInstanceOf(PlacementUnavailableError);
    scope.done();
  });

  test('connection refused is retried even for refused-only, then reported with the endpoint and cause', async () => {
    const h = new PlacementHttp({ auth: new NoAuth('http://127.0.0.1:1'), clock: noSleep, attempts: 3 });
    nock.enableNetConnect('127.0.0.1');
    const err = await h.request({ method: 'POST', path: '/allocations', microversion: '1.28', body: {}, retry: 'refused-only' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlacementUnavailableError);
    expect((err as Error).message).toMatch(/POST http:\/\/127\.0\.0\.1:1\/allocations: .*ECONNREFUSED/);
    expect(h.counter.snapshot().get('POST /allocations error')).toBe(3);
  });

  test('a 401 invalidates the token once and retries', async () => {
    let invalidated = 0;
    let n = 0;
    const auth = {
      token: () => Promise.resolve(`tok-${++n}`),
      endpoint: () => Promise.resolve(BASE),
      invalidate: () => {
        invalidated++;
      },
    };
    nock(BASE).matchHeader('x-auth-token', 'tok-1').get('/traits').reply(401, {});
    nock(BASE).matchHeader('x-auth-token', 'tok-2').get('/traits').reply(200, { traits: [] });
    const h = new PlacementHttp({ auth, clock: noSleep });
    await expect(h.request({ method: 'GET', path: '/traits', microversion: '1.6' })).resolves.toMatchObject({ status: 200 });
    expect(invalidated).toBe(1);
  });

  test('the global request id of the caller is propagated', async () => {
    const scope = nock(BASE).matchHeader('x-openstack-request-id', 'req-abc').get('/traits').reply(200, {});
    await http().request({ method: 'GET', path: '/traits', microversion: '1.6', globalRequestId: 'req-abc' });
    scope.done();
  });

  test('routes are counted without uuids or names', () => {
    expect(routeOf('/resource_providers/4e8e5957-649f-477b-9e5b-f1f75b21c03c/inventories?x=1')).toBe('/resource_providers/{uuid}/inventories');
    expect(routeOf('/resource_providers/4e8e5957-649f-477b-9e5b-f1f75b21c03c/inventories/VCPU')).toBe('/resource_providers/{uuid}/inventories/{rc}');
    expect(routeOf('/traits/CUSTOM_FOO')).toBe('/traits/{name}');
    expect(routeOf('/allocations/4e8e5957649f477b9e5bf1f75b21c03c')).toBe('/allocations/{uuid}');
  });
});
