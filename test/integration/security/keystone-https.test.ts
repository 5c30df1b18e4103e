// Keystone v3 end to end over https, with a CA bundle: a keystone-like token endpoint (password and
// application-credential methods, a service catalog), and the real Placement behind a TLS front
// that accepts only tokens that endpoint issued (as keystonemiddleware would). The agent's client,
// built from config, authenticates, finds Placement in the catalog, renews a revoked token, and
// refuses a server whose certificate its CA bundle does not trust.
import { createServer as createHttps, type Server } from 'node:https';
import { request as httpRequest } from 'node:http';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../../config/loader';
import { placementFromConfig } from '../../../tracker/placement/factory';
import { PlacementAuthError, PlacementUnavailableError } from '../../../tracker/placement/errors';
import { makeTestCa, read } from '../../helpers/test-ca';
import { PLACEMENT_URL } from '../../helpers/stack';

interface Fixture {
  keystone: Server;
  front: Server;
  ksUrl: string;
  frontUrl: string;
  issued: Set<string>;
  authBodies: unknown[];
  revoke(): void;
}

function listen(s: Server): Promise<number> {
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve((s.address() as { port: number }).port)));
}

async function start(serverCert: { cert: string; key: string }): Promise<Fixture> {
  const issued = new Set<string>();
  const authBodies: unknown[] = [];
  const tls = { cert: read(serverCert.cert), key: read(serverCert.key) };
  let frontUrl = '';
  const keystone = createHttps(tls, (req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const parsed = JSON.parse(body || '{}') as { auth?: { identity?: { methods?: string[]; password?: { user?: { password?: string } }; application_credential?: { secret?: string } } } };
      authBodies.push(parsed);
      const id = parsed.auth?.identity;
      const ok = (id?.methods?.[0] === 'password' && id.password?.user?.password === 'p;a#ss word') || (id?.methods?.[0] === 'application_credential' && id.application_credential?.secret === 'appcred-secret');
      if (req.url !== '/v3/auth/tokens' || !ok) {
        res.writeHead(401, { 'Content-Type': 'application/json' });
        res.end('{"error": {"code": 401}}');
        return;
      }
      const token = `gAAAA${randomUUID()}`;
      issued.add(token);
      res.writeHead(201, { 'Content-Type': 'application/json', 'X-Subject-Token': token });
      res.end(JSON.stringify({ token: { expires_at: new Date(Date.now() + 3600e3).toISOString(), catalog: [{ type: 'placement', endpoints: [{ interface: 'internal', region: 'RegionOne', url: frontUrl }] }] } }));
    });
  });
  const upstream = new URL(PLACEMENT_URL);
  const front = createHttps(tls, (req, res) => {
    const token = String(req.headers['x-auth-token'] ?? '');
    if (req.url !== '/' && !issued.has(token)) {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      res.end('{"error": {"code": 401, "title": "Unauthorized"}}');
      return;
    }
    const headers = { ...req.headers, host: upstream.host, 'x-auth-token': 'admin' };
    const p = httpRequest({ hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    req.pipe(p);
  });
  const ks = await listen(keystone);
  const fr = await listen(front);
  frontUrl = `https://127.0.0.1:${fr}`;
  return { keystone, front, ksUrl: `https://127.0.0.1:${ks}/v3`, frontUrl, issued, authBodies, revoke: () => issued.clear() };
}

function config(text: string): ReturnType<typeof loadConfig>['config'] {
  const dir = mkdtempSync(join(tmpdir(), 'ca-ks-'));
  writeFileSync(join(dir, 'a.conf'), text, { mode: 0o600 });
  return loadConfig({ files: [join(dir, 'a.conf')], env: {} }).config;
}

describe('keystone v3 and Placement over https', () => {
  const ca = makeTestCa();
  const server = ca.issue('server', 'server');
  let fx: Fixture;
  beforeAll(async () => {
    fx = await start(server);
  });
  afterAll(() => {
    fx.keystone.close();
    fx.front.close();
  });

  test('password auth: token from keystone, endpoint from the catalog, CA bundle verifies both', async () => {
    const cfg = config(
      `[placement]\nauth_type = password\nauth_url = ${fx.ksUrl}\nusername = placement\npassword = p;a#ss word\nproject_name = service\n` +
        `region_name = RegionOne\nvalid_interfaces = internal\ncafile = ${ca.caFile}\n`,
    );
    const client = placementFromConfig(cfg);
    expect(Array.isArray(await client.listProviders())).toBe(true);
    expect(await client.endpoint()).toBe(fx.frontUrl);
    expect(fx.authBodies).toHaveLength(1);
    // A revoked token: one 401, a new token, the request succeeds.
    fx.revoke();
    expect(Array.isArray(await client.listProviders())).toBe(true);
    expect(fx.authBodies).toHaveLength(2);
  });

  test('application credential auth', async () => {
    const cfg = config(
      `[placement]\nauth_type = v3applicationcredential\nauth_url = ${fx.ksUrl}\napplication_credential_id = ac1\napplication_credential_secret = appcred-secret\n` +
        `valid_interfaces = internal\ncafile = ${ca.caFile}\n`,
    );
    expect(Array.isArray(await placementFromConfig(cfg).listProviders())).toBe(true);
  });

  test('wrong credentials: a clear auth error', async () => {
    const cfg = config(`[placement]\nauth_type = password\nauth_url = ${fx.ksUrl}\nusername = u\npassword = wrong\nproject_name = p\ncafile = ${ca.caFile}\n`);
    await expect(placementFromConfig(cfg).listProviders()).rejects.toBeInstanceOf(PlacementAuthError);
  });

  test('a server certificate from another CA is refused', async () => {
    const other = makeTestCa('some other CA');
    const cfg = config(`[placement]\nauth_type = noauth\nendpoint_override = ${fx.frontUrl}\ncafile = ${other.caFile}\n`);
    const err = await placementFromConfig(cfg).versions().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlacementUnavailableError);
    expect((err as Error).message).toMatch(/self[- ]signed|unable to verify|certificate/i);
    expect((err as Error).message).toContain("check [placement] cafile");
  });
});
