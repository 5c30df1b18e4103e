import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import nock from 'nock';
import type { Clock } from '../../../../lib/clock';
import { StaticGlanceAuth, type GlanceAuth } from '../../../../virt-drivers/glance/api';
import { GlanceAuthError, GlanceNoDataError, GlanceNotFoundError, GlanceResponseError, GlanceUnavailableError } from '../../../../virt-drivers/glance/errors';
import { GlanceHttpClient } from '../../../../virt-drivers/glance/http';

const URL_ = 'http://glance.test:9292';
const ID = '11111111-2222-3333-4444-555555555555';
const noSleep: Clock = { now: () => 0, sleep: () => Promise.resolve() };

const imageBody = {
  id: ID,
  name: 'tick',
  status: 'active',
  disk_format: 'qcow2',
  container_format: 'bare',
  size: 3,
  checksum: 'abc',
  os_hash_algo: 'sha512',
  os_hash_value: 'def',
  visibility: 'public',
};

/** A keystone-like auth: a token that changes after invalidate. */
class CountingAuth implements GlanceAuth {
  n = 1;
  invalidated = 0;
  token(): Promise<string> {
    return Promise.resolve(`tok${this.n}`);
  }
  endpoint(): Promise<string> {
    return Promise.resolve(URL_ + '/');
  }
  invalidate(): void {
    this.invalidated++;
    this.n++;
  }
}

function client(auth: GlanceAuth = new StaticGlanceAuth(URL_), numRetries = 2): GlanceHttpClient {
  return new GlanceHttpClient({ auth, numRetries, timeoutMs: 2000, clock: noSleep });
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('GlanceHttpClient', () => {
  beforeAll(() => nock.disableNetConnect());
  afterEach(() => nock.cleanAll());
  afterAll(() => nock.enableNetConnect());

  test('getImage reads the fields the cache uses; without keystone no token is sent', async () => {
    const scope = nock(URL_, { badheaders: ['x-auth-token'] }).get(`/v2/images/${ID}`).reply(200, imageBody);
    expect(await client().getImage(ID)).toEqual({ id: ID, status: 'active', diskFormat: 'qcow2', size: 3, checksum: 'abc', osHashAlgo: 'sha512', osHashValue: 'def' });
    scope.done();
  });

  test('an image without data yet has null size and hashes', async () => {
    nock(URL_).get(`/v2/images/${ID}`).reply(200, { id: ID, status: 'queued', disk_format: null, size: null, checksum: null, os_hash_algo: null, os_hash_value: null });
    expect(await client().getImage(ID)).toEqual({ id: ID, status: 'queued', diskFormat: null, size: null, checksum: null, osHashAlgo: null, osHashValue: null });
  });

  test('a body that does not fit names the field', async () => {
    nock(URL_).get(`/v2/images/${ID}`).reply(200, { ...imageBody, size: 'big' });
    const err = await client().getImage(ID).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GlanceResponseError);
    expect((err as Error).message).toMatch(new RegExp(`^GET /v2/images/${ID}: the answer does not fit: size: `));
  });

  test('404 is GlanceNotFoundError, 403 GlanceAuthError, another 4xx GlanceResponseError with Glance\'s words', async () => {
    nock(URL_).get(`/v2/images/${ID}`).reply(404, '<html><body><h1>404 Not Found</h1>No image found with ID x</body></html>');
    await expect(client().getImage(ID)).rejects.toThrow(new GlanceNotFoundError(`GET /v2/images/${ID}`));
    nock(URL_).get(`/v2/images/${ID}/file`).reply(403, 'Forbidden');
    await expect(client().openImageData(ID)).rejects.toThrow(GlanceAuthError);
    nock(URL_).get(`/v2/images/${ID}`).reply(400, 'Bad thing');
    await expect(client().getImage(ID)).rejects.toThrow(`GET /v2/images/${ID}: unexpected status 400: Bad thing`);
  });

  test('5xx and refused connections are retried num_retries times, then GlanceUnavailableError', async () => {
    const scope = nock(URL_).get(`/v2/images/${ID}`).reply(503, 'busy').get(`/v2/images/${ID}`).reply(502).get(`/v2/images/${ID}`).reply(200, imageBody);
    await expect(client().getImage(ID)).resolves.toMatchObject({ id: ID });
    scope.done();
    nock(URL_).get(`/v2/images/${ID}`).times(3).reply(500, 'broken');
    await expect(client().getImage(ID)).rejects.toThrow(`GET /v2/images/${ID}: Glance unavailable: status 500 after 3 attempt(s): broken`);
    expect(nock.pendingMocks()).toEqual([]);
    // A port nothing listens on: refused at every attempt.
    const port = await closedPort();
    nock.enableNetConnect('127.0.0.1');
    const err = await client(new StaticGlanceAuth(`http://127.0.0.1:${port}`)).openImageData(ID).catch((e: unknown) => e);
    nock.disableNetConnect();
    expect(err).toBeInstanceOf(GlanceUnavailableError);
    expect((err as Error).message).toBe(`GET /v2/images/${ID}/file: Glance unavailable: http://127.0.0.1:${port}: ECONNREFUSED`);
  });

  test('a 401 gets one fresh token and one more try', async () => {
    const auth = new CountingAuth();
    const scope = nock(URL_)
      .get(`/v2/images/${ID}`)
      .matchHeader('x-auth-token', 'tok1')
      .reply(401)
      .get(`/v2/images/${ID}`)
      .matchHeader('x-auth-token', 'tok2')
      .reply(200, imageBody);
    await expect(client(auth).getImage(ID)).resolves.toMatchObject({ id: ID });
    expect(auth.invalidated).toBe(1);
    scope.done();
    nock(URL_).get(`/v2/images/${ID}`).times(2).reply(401);
    await expect(client(auth).getImage(ID)).rejects.toThrow(`GET /v2/images/${ID}: Glance refused the token (401)`);
  });

  test('an auth port that fails is a GlanceAuthError naming the request', async () => {
    const auth: GlanceAuth = { token: () => Promise.reject(new Error('keystone: authentication failed with status 401')), endpoint: () => Promise.resolve(URL_), invalidate: () => undefined };
    const err = await client(auth).getImage(ID).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GlanceAuthError);
    expect((err as Error).message).toBe(`GET /v2/images/${ID}: no Glance endpoint or token: keystone: authentication failed with status 401`);
  });

  test('openImageData streams the data with its length; 204 is GlanceNoDataError', async () => {
    const data = Buffer.alloc(300_000, 9);
    nock(URL_).get(`/v2/images/${ID}/file`).reply(200, data, { 'Content-Length': String(data.length), 'Content-Type': 'application/octet-stream' });
    const open = await client().openImageData(ID);
    expect(open.length).toBe(data.length);
    expect((await readAll(open.stream)).equals(data)).toBe(true);
    nock(URL_).get(`/v2/images/${ID}/file`).reply(204);
    await expect(client().openImageData(ID)).rejects.toThrow(GlanceNoDataError);
  });

  test('an id that is not one is refused before any request', async () => {
    await expect(client().getImage('../../v2/secrets')).rejects.toThrow(GlanceResponseError);
  });

  test('a download that stalls breaks with GlanceUnavailableError after timeout without a byte', async () => {
    const server = createHttpServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': '1000' });
      res.write(Buffer.alloc(100));
      // ...and nothing more.
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    nock.enableNetConnect('127.0.0.1');
    try {
      const c = new GlanceHttpClient({ auth: new StaticGlanceAuth(`http://127.0.0.1:${port}`), numRetries: 0, timeoutMs: 300, clock: noSleep });
      const open = await c.openImageData(ID);
      const t0 = Date.now();
      const err = await readAll(open.stream).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GlanceUnavailableError);
      expect((err as Error).message).toBe(`GET /v2/images/${ID}/file: Glance unavailable: no data for 300 ms`);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    } finally {
      nock.disableNetConnect();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
