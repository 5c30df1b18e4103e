// Keystone not answering while a request is authenticated is an outage (PlacementUnavailableError,
// which the claim service rides out); keystone refusing the credentials stays PlacementAuthError.
import type { AuthProvider } from '../../../../tracker/placement/auth';
import { PlacementAuthError, PlacementUnavailableError } from '../../../../tracker/placement/errors';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { TransportError, type HttpTransport } from '../../../../tracker/placement/transport';

const info = { method: 'POST', path: '/v3/auth/tokens' };

/** Keystone as the HTTP layer sees it: the token step fails with `failure`. */
function authFailingWith(failure: Error): AuthProvider {
  return { token: () => Promise.reject(failure), endpoint: () => Promise.resolve('http://placement.test'), invalidate: () => undefined };
}

const neverCalled: HttpTransport = { send: () => Promise.reject(new Error('Placement must not be asked without a token')) };

test.each([
  ['refused', new PlacementAuthError('keystone: connect ECONNREFUSED', info, { cause: new TransportError('connect ECONNREFUSED', 'ECONNREFUSED') })],
  ['503', new PlacementAuthError('keystone: authentication failed with status 503', { ...info, status: 503 })],
])('keystone %s: PlacementUnavailableError with the keystone failure as its cause', async (_name, failure) => {
  const http = new PlacementHttp({ auth: authFailingWith(failure), transport: neverCalled });
  const err = await http.request({ method: 'GET', path: '/allocations/x', microversion: '1.28' }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(PlacementUnavailableError);
  expect((err as Error).cause).toBe(failure);
  expect((err as Error).message).toBe(failure.message);
});

test('keystone refusing the credentials (401) stays PlacementAuthError', async () => {
  const failure = new PlacementAuthError('keystone: authentication failed with status 401', { ...info, status: 401 });
  const http = new PlacementHttp({ auth: authFailingWith(failure), transport: neverCalled });
  await expect(http.request({ method: 'GET', path: '/allocations/x', microversion: '1.28' })).rejects.toBe(failure);
});
