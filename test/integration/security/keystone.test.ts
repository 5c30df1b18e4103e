// The agent against a real Keystone (Debian's, run by scripts/keystone-stack on private ports) and
// the real Placement behind it with keystonemiddleware: password and application-credential auth,
// one token reused until it nears expiry, a revoked token replaced once, the catalog read by
// valid_interfaces and region_name, wrong credentials refused with the options to check, and a
// deleted application credential stopping `sync --once` and `run` with one clear line.
//
// Token requests are counted by an HTTP front between the agent and Keystone (the agent's
// auth_url points at it); keystonemiddleware's own requests go to Keystone directly.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIG_HOST } from '../../../bench/agents';
import { loadConfig } from '../../../config/loader';
import type { AgentConfig } from '../../../config/schema';
import { PlacementAuthError, PlacementUnavailableError } from '../../../tracker/placement/errors';
import { placementFromConfig } from '../../../tracker/placement/factory';
import { RequestCounter } from '../../../tracker/placement/http';
import { CountingFront, PrivateKeystone, SERVICE_PASSWORD, tlsFront } from '../../helpers/keystone';
import { makeTestCa } from '../../helpers/test-ca';
import { TRANSPORT_URL } from '../../helpers/stack';

jest.setTimeout(300000);

const BIN = join(__dirname, '..', '..', '..', 'dist', 'agent', 'cli', 'main.js');
// The agent renews a token 120 s before it expires: 150 s tokens are reused for 30 s.
const TOKEN_SECONDS = 150;
const RENEW_AFTER_MS = (TOKEN_SECONDS - 120) * 1000;

let ks: PrivateKeystone;
let front: CountingFront;

beforeAll(async () => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` first (scripts/test does)`);
  ks = await PrivateKeystone.create(TOKEN_SECONDS);
  await ks.up();
  front = await new CountingFront(ks.port).start();
}, 300000);

afterAll(async () => {
  await front?.close();
  await ks?.down();
});

const short = (): string => randomUUID().slice(0, 8);

function configFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ca-ks-conf-'));
  const file = join(dir, 'agent.conf');
  writeFileSync(file, text, { mode: 0o600 });
  return file;
}

function config(placement: string): AgentConfig {
  return loadConfig({ files: [configFile(`[placement]\n${placement}`)], env: {} }).config;
}

const passwordAuth = (password = SERVICE_PASSWORD, extra = ''): string =>
  `auth_type = password\nauth_url = ${front.url}/v3\nusername = nova\npassword = ${password}\nproject_name = service\n${extra}`;

test('password: one token serves every call until it nears expiry, then exactly one renewal', async () => {
  const api = placementFromConfig(config(passwordAuth()));
  const uuid = randomUUID();
  const before = front.tokenRequests().length;
  const started = Date.now();
  await api.createProvider({ uuid, name: `ks-pw-${short()}`, parent_provider_uuid: null });
  expect(await api.listProviders(uuid)).toHaveLength(1);
  await api.ensureTrait(`CUSTOM_KS_${short().toUpperCase()}`);
  expect(await api.listProviders(uuid)).toHaveLength(1);
  expect(Date.now() - started).toBeLessThan(RENEW_AFTER_MS);
  expect(front.tokenRequests().length - before).toBe(1);
  // Past the renewal point the next call fetches one new token, and the one after reuses it.
  await new Promise((r) => setTimeout(r, Math.max(0, started + RENEW_AFTER_MS + 2000 - Date.now())));
  expect(await api.listProviders(uuid)).toHaveLength(1);
  await api.deleteProvider(uuid);
  expect(front.tokenRequests().length - before).toBe(2);
  expect(front.tokenRequests().every((r) => r.status === 201)).toBe(true);
});

test('a token revoked in Keystone: Placement answers 401, the client re-authenticates once and the call succeeds', async () => {
  const counter = new RequestCounter();
  const api = placementFromConfig(config(passwordAuth()), counter);
  const uuid = randomUUID();
  await api.createProvider({ uuid, name: `ks-revoke-${short()}`, parent_provider_uuid: null });
  const issued = front.tokenRequests();
  const token = issued[issued.length - 1]?.subjectToken;
  expect(token).toBeDefined();
  await ks.revokeToken(token ?? '');
  const before = front.tokenRequests().length;
  expect(await api.listProviders(uuid)).toHaveLength(1);
  expect(front.tokenRequests().length - before).toBe(1);
  expect(counter.snapshot().get('GET /resource_providers 401')).toBe(1);
  expect(counter.snapshot().get('GET /resource_providers 200')).toBe(1);
  await api.deleteProvider(uuid);
});

/** A region of its own holding placement endpoints `urls` (interface -> URL) while `fn` runs. */
async function withRegion(urls: ReadonlyArray<readonly [string, string]>, fn: (region: string) => Promise<void>): Promise<void> {
  const region = `ks-region-${short()}`;
  await ks.must('POST', '/regions', { region: { id: region } });
  const service = (await ks.must<{ services: Array<{ id: string }> }>('GET', '/services?type=placement')).services[0];
  if (!service) throw new Error('keystone-stack registered no placement service');
  const endpoints: string[] = [];
  try {
    for (const [iface, url] of urls) {
      const r = await ks.must<{ endpoint: { id: string } }>('POST', '/endpoints', { endpoint: { service_id: service.id, interface: iface, region_id: region, url } });
      endpoints.push(r.endpoint.id);
    }
    await fn(region);
  } finally {
    for (const id of endpoints) await ks.must('DELETE', `/endpoints/${id}`);
    await ks.must('DELETE', `/regions/${region}`);
  }
}

test('the catalog: valid_interfaces in order, region_name picks the region, a missing one is named', async () => {
  const alt = await new CountingFront(ks.placementPort).start();
  try {
    await withRegion(
      [
        ['public', alt.url],
        ['internal', 'http://127.0.0.1:1'],
      ],
      async (region) => {
        // The region's public endpoint, when only public is valid: every request goes through it.
        const pub = placementFromConfig(config(passwordAuth(SERVICE_PASSWORD, `valid_interfaces = public\nregion_name = ${region}\n`)));
        expect(await pub.http.endpoint()).toBe(alt.url);
        await pub.listProviders(randomUUID());
        expect(alt.seen.map((r) => `${r.method} ${r.status}`)).toEqual(['GET 200']);
        // internal first: the region's internal endpoint (nothing listens there) is the one used.
        const internal = placementFromConfig(config(passwordAuth(SERVICE_PASSWORD, `valid_interfaces = internal,public\nregion_name = ${region}\n`)));
        expect(await internal.http.endpoint()).toBe('http://127.0.0.1:1');
        await expect(internal.listProviders(randomUUID())).rejects.toBeInstanceOf(PlacementUnavailableError);
        // RegionOne's endpoints are the bootstrapped ones, straight to Placement.
        const home = placementFromConfig(config(passwordAuth(SERVICE_PASSWORD, 'valid_interfaces = public\nregion_name = RegionOne\n')));
        expect(await home.http.endpoint()).toBe(ks.placementUrl);
        await home.listProviders(randomUUID());
        expect(alt.seen).toHaveLength(1);
        // A region without Placement: the error names the interfaces, the region and what to set.
        const nowhere = placementFromConfig(config(passwordAuth(SERVICE_PASSWORD, 'region_name = no-such-region\n')));
        const err = (await nowhere.listProviders(randomUUID()).catch((e: unknown) => e)) as Error;
        expect(err).toBeInstanceOf(PlacementAuthError);
        expect(err.message).toContain('no placement endpoint for interfaces internal,public in region no-such-region');
      },
    );
  } finally {
    await alt.close();
  }
});

test('wrong password: PlacementAuthError with Keystone\'s answer and the options to check, no retry storm', async () => {
  const api = placementFromConfig(config(passwordAuth('not-the-password')));
  const before = front.tokenRequests().length;
  const err = (await api.listProviders(randomUUID()).catch((e: unknown) => e)) as Error;
  expect(err).toBeInstanceOf(PlacementAuthError);
  expect(err.message).toMatch(new RegExp(`^keystone ${front.url}/v3/auth/tokens: authentication refused, answered 401 \\(.+\\); check \\[placement\\] username, password`));
  expect(err.message).not.toContain('not-the-password');
  expect(front.tokenRequests().slice(before).map((r) => r.status)).toEqual([401]);
});

interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the built binary; SIGTERM once stdout shows `until`, or after `killAfterMs`. */
function cli(args: string[], stop?: { until?: string; killAfterMs?: number }): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (stop?.until && stdout.includes(stop.until)) child.kill('SIGTERM');
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = stop?.killAfterMs ? setTimeout(() => child.kill('SIGTERM'), stop.killAfterMs) : undefined;
    child.on('exit', (code) => {
      if (timer) clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test('application credential: sync --once and run authenticate with it; once deleted, each stops with one clear line', async () => {
  const user = `ks-ac-${short()}`;
  const password = `pw-${randomUUID()}`;
  const userId = await ks.createServiceUser(user, password);
  const cred = await ks.createApplicationCredential(userId, user, password, `agent-${short()}`);
  const dir = mkdtempSync(join(tmpdir(), 'ca-ks-agent-'));
  const hostFile = join(dir, 'host.json');
  writeFileSync(hostFile, JSON.stringify(BIG_HOST));
  const host = `ks-ac-${short()}`;
  const conf = configFile(
    `[DEFAULT]\nhost = ${host}\ncompute_driver = fake\nstate_path = ${dir}\ntransport_url = ${TRANSPORT_URL}\ncontrol_exchange = ks-${short()}\n` +
      `[placement]\nauth_type = v3applicationcredential\nauth_url = ${front.url}/v3\n` +
      `application_credential_id = ${cred.id}\napplication_credential_secret = ${cred.secret}\n` +
      `[metrics]\nlisten =\n[fake]\nhost_file = ${hostFile}\ninstances_file = ${join(dir, 'fake-instances.json')}\n`,
  );

  const synced = await cli(['sync', '--once', '--config-file', conf]);
  expect(synced.stderr).toBe('');
  expect(synced.code).toBe(0);
  expect(synced.stdout).toMatch(new RegExp(`^synced ${host} \\(`));

  const up = await cli(['run', '--config-file', conf], { until: '"msg":"placement reachable"', killAfterMs: 60000 });
  expect(up.stdout).toContain('"msg":"placement reachable"');

  // Keystone answers a deleted application credential with 404, naming it.
  await ks.must('DELETE', `/users/${userId}/application_credentials/${cred.id}`);
  const refusal = new RegExp(
    `^(compute-agent: )?(placement failed: )?keystone ${front.url}/v3/auth/tokens: authentication refused, answered 404 \\(Could not find Application Credential: ${cred.id}\\.\\); ` +
      'check \\[placement\\] application_credential_id and application_credential_secret \\(a deleted, expired or revoked application credential is refused the same way\\)$',
  );

  const once = await cli(['sync', '--once', '--config-file', conf]);
  expect(once.code).toBe(1);
  const onceLines = once.stderr.trimEnd().split('\n');
  expect(onceLines).toHaveLength(1);
  expect(onceLines[0]).toMatch(refusal);
  expect(once.stdout).toBe('');

  const run = await cli(['run', '--config-file', conf], { killAfterMs: 60000 });
  expect(run.code).toBe(1);
  const runLines = run.stderr.trimEnd().split('\n');
  expect(runLines).toHaveLength(1);
  expect(runLines[0]).toMatch(refusal);
  // stdout is the JSON log: every line parses, no stack trace, the secret never appears.
  for (const line of run.stdout.trim().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
  for (const text of [once.stderr, run.stderr, run.stdout]) {
    expect(text).not.toMatch(/\n\s+at /);
    expect(text).not.toContain(cred.secret);
  }
  // Refused credentials are not retried as an outage.
  expect(run.stdout).not.toContain('placement not ready; retrying');
});

describe('over https, verified with [placement] cafile', () => {
  const ca = makeTestCa();
  const cert = ca.issue('server', 'server');
  let ksTls: Awaited<ReturnType<typeof tlsFront>>;
  let placementTls: Awaited<ReturnType<typeof tlsFront>>;
  beforeAll(async () => {
    ksTls = await tlsFront(ks.port, cert);
    placementTls = await tlsFront(ks.placementPort, cert);
  });
  afterAll(async () => {
    await ksTls?.close();
    await placementTls?.close();
  });

  test('password and application credential: token and catalog over TLS, the https endpoint from the catalog used', async () => {
    await withRegion([['internal', placementTls.url]], async (region) => {
      const tls = `region_name = ${region}\nvalid_interfaces = internal\ncafile = ${ca.caFile}\n`;
      const pw = placementFromConfig(
        config(`auth_type = password\nauth_url = ${ksTls.url}/v3\nusername = nova\npassword = ${SERVICE_PASSWORD}\nproject_name = service\n${tls}`),
      );
      expect(await pw.http.endpoint()).toBe(placementTls.url);
      const uuid = randomUUID();
      await pw.createProvider({ uuid, name: `ks-tls-${short()}`, parent_provider_uuid: null });
      expect(await pw.listProviders(uuid)).toHaveLength(1);

      const user = `ks-tls-${short()}`;
      const password = `pw-${randomUUID()}`;
      const userId = await ks.createServiceUser(user, password);
      const cred = await ks.createApplicationCredential(userId, user, password, `tls-${short()}`);
      const ac = placementFromConfig(
        config(`auth_type = v3applicationcredential\nauth_url = ${ksTls.url}/v3\napplication_credential_id = ${cred.id}\napplication_credential_secret = ${cred.secret}\n${tls}`),
      );
      expect(await ac.listProviders(uuid)).toHaveLength(1);
      await ac.deleteProvider(uuid);
    });
  });

  test('a certificate from another CA is refused, naming [placement] cafile', async () => {
    const other = makeTestCa('some other CA');
    const api = placementFromConfig(config(`auth_type = noauth\nendpoint_override = ${placementTls.url}\ncafile = ${other.caFile}\n`));
    const err = (await api.versions().catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(PlacementUnavailableError);
    expect(err.message).toMatch(/self[- ]signed|unable to verify|certificate/i);
    expect(err.message).toContain('check [placement] cafile');
    const viaKeystone = placementFromConfig(
      config(`auth_type = password\nauth_url = ${ksTls.url}/v3\nusername = nova\npassword = ${SERVICE_PASSWORD}\nproject_name = service\ncafile = ${other.caFile}\n`),
    );
    const ksErr = (await viaKeystone.listProviders(randomUUID()).catch((e: unknown) => e)) as Error;
    expect(ksErr).toBeInstanceOf(PlacementUnavailableError);
    expect(ksErr.message).toContain(`keystone ${ksTls.url}/v3/auth/tokens`);
    expect(ksErr.message).toMatch(/self[- ]signed|unable to verify|certificate/i);
    expect(ksErr.message).toContain('check [placement] cafile');
  });
});
