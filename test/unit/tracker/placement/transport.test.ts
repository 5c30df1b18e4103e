import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeHttpTransport, TransportError } from '../../../../tracker/placement/transport';

let server: Server;
let base: string;
let lastBody = '';
let lastHeaders: Record<string, unknown> = {};

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      lastBody = body;
      lastHeaders = req.headers;
      if (req.url === '/json') {
        res.writeHead(409, { 'content-type': 'application/json', 'openstack-request-id': 'req-1' });
        res.end(JSON.stringify({ errors: [{ code: 'placement.concurrent_update' }] }));
      } else if (req.url === '/text') {
        res.end('not json');
      } else if (req.url === '/empty') {
        res.writeHead(204).end();
      } else if (req.url === '/big') {
        res.end('x'.repeat(4096));
      } else if (req.url === '/redirect') {
        res.writeHead(302, { location: '/json' }).end();
      }
      // /hang never answers
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('NodeHttpTransport', () => {
  const t = new NodeHttpTransport({ timeoutMs: 300, maxBodyBytes: 1024 });

  it('sends the body and headers and parses a JSON answer whatever its status', async () => {
    const res = await t.send({ method: 'PUT', url: `${base}/json`, headers: { 'Content-Type': 'application/json', 'X-Auth-Token': 'tok' }, body: '{"a":1}' });
    expect(res.status).toBe(409);
    expect(res.headers['openstack-request-id']).toBe('req-1');
    expect(res.data).toEqual({ errors: [{ code: 'placement.concurrent_update' }] });
    expect(lastBody).toBe('{"a":1}');
    expect(lastHeaders['x-auth-token']).toBe('tok');
    expect(lastHeaders['content-length']).toBe('7');
  });

  it('returns text that is not JSON as text, and no body as an empty string', async () => {
    expect((await t.send({ method: 'GET', url: `${base}/text`, headers: {} })).data).toBe('not json');
    const empty = await t.send({ method: 'DELETE', url: `${base}/empty`, headers: {} });
    expect(empty).toMatchObject({ status: 204, data: '' });
  });

  it('does not follow redirects', async () => {
    expect((await t.send({ method: 'GET', url: `${base}/redirect`, headers: {} })).status).toBe(302);
  });

  it('rejects with ETIMEDOUT when the server does not answer in time', async () => {
    await expect(t.send({ method: 'GET', url: `${base}/hang`, headers: {} })).rejects.toMatchObject({ name: 'TransportError', code: 'ETIMEDOUT' });
  });

  it('rejects with ECONNREFUSED when nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const err = await t.send({ method: 'GET', url: `http://127.0.0.1:${port}/`, headers: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect((err as TransportError).code).toBe('ECONNREFUSED');
  });

  it('refuses a body over the cap instead of buffering it', async () => {
    await expect(t.send({ method: 'GET', url: `${base}/big`, headers: {} })).rejects.toMatchObject({ code: 'ERR_BODY_TOO_LARGE' });
  });

  it('rejects URLs it cannot send to with a clear error', async () => {
    await expect(t.send({ method: 'GET', url: 'not a url', headers: {} })).rejects.toMatchObject({ code: 'ERR_INVALID_URL' });
    await expect(t.send({ method: 'GET', url: 'ftp://127.0.0.1/', headers: {} })).rejects.toThrow(/unsupported protocol ftp:/);
  });
});
