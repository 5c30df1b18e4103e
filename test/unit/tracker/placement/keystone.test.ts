import nock from 'nock';
import { KeystoneAuth } from '../../../../tracker/placement/keystone';
import { PlacementAuthError } from '../../../../tracker/placement/errors';
import type { Clock } from '../../../../lib/clock';

const KS = 'https://keystone.test:5000';

function clockAt(start: number): Clock & { t: number } {
  const c = { t: start, now: () => c.t, sleep: () => Promise.resolve() };
  return c;
}

function tokenReply(token: string, expiresAt: string, catalog: unknown[] = CATALOG): nock.ReplyFnResult {
  return [201, { token: { expires_at: expiresAt, catalog } }, { 'X-Subject-Token': token }];
}

const CATALOG = [
  { type: 'compute', endpoints: [{ interface: 'internal', region: 'R1', url: 'http://nova' }] },
  {
    type: 'placement',
    endpoints: [
      { interface: 'public', region: 'R1', url: 'https://placement.public/' },
      { interface: 'internal', region: 'R1', url: 'http://placement.internal:8778' },
      { interface: 'internal', region: 'R2', url: 'http://placement.r2:8778' },
    ],
  },
];

afterEach(() => nock.cleanAll());

describe('KeystoneAuth', () => {
  test('password auth: scoped body, token cached until shortly before expiry, endpoint from the catalog', async () => {
    const clock = clockAt(Date.parse('2026-01-01T00:00:00Z'));
    const bodies: unknown[] = [];
    const scope = nock(KS)
      .post('/v3/auth/tokens', (b: unknown) => {
        bodies.push(b);
        return true;
      })
      .times(2)
      .reply(() => tokenReply(`tok${bodies.length}`, '2026-01-01T01:00:00Z'));
    const auth = new KeystoneAuth({
      authUrl: `${KS}/v3`,
      method: { kind: 'password', username: 'placement', password: 'p;a#ss', userDomainName: 'Default', projectName: 'service', projectDomainName: 'Default' },
      interfaces: ['internal', 'public'],
      regionName: 'R1',
      clock,
    });
    expect(await auth.token()).toBe('tok1');
    expect(await auth.endpoint()).toBe('http://placement.internal:8778');
    clock.t += 50 * 60 * 1000; // 10 minutes left: still cached
    expect(await auth.token()).toBe('tok1');
    clock.t += 9 * 60 * 1000; // 1 minute left: renewed
    expect(await auth.token()).toBe('tok2');
    scope.done();
    expect(bodies[0]).toEqual({
      auth: {
        identity: { methods: ['password'], password: { user: { name: 'placement', domain: { name: 'Default' }, password: 'p;a#ss' } } },
        scope: { project: { name: 'service', domain: { name: 'Default' } } },
      },
    });
  });

  test('application credential auth, /v3 appended, invalidate forces a new token', async () => {
    let n = 0;
    const scope = nock(KS)
      .post('/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: 'id1', secret: 's1' } } } })
      .times(2)
      .reply(() => tokenReply(`t${++n}`, '2099-01-01T00:00:00Z'));
    const auth = new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'id1', secret: 's1' } });
    expect(await auth.token()).toBe('t1');
    auth.invalidate();
    expect(await auth.token()).toBe('t2');
    scope.done();
  });

  test('concurrent callers share one token request', async () => {
    const scope = nock(KS).post('/v3/auth/tokens').once().delay(20).reply(() => tokenReply('shared', '2099-01-01T00:00:00Z'));
    const auth = new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'a', secret: 'b' } });
    expect(await Promise.all([auth.token(), auth.token(), auth.token()])).toEqual(['shared', 'shared', 'shared']);
    scope.done();
  });

  test('endpoint_override wins over the catalog; falls back to the next interface', async () => {
    nock(KS).post('/v3/auth/tokens').reply(() => tokenReply('t', '2099-01-01T00:00:00Z'));
    const over = new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'a', secret: 'b' }, endpointOverride: 'http://pl:1/' });
    expect(await over.endpoint()).toBe('http://pl:1');
    nock(KS).post('/v3/auth/tokens').reply(() => tokenReply('t', '2099-01-01T00:00:00Z'));
    const pub = new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'a', secret: 'b' }, interfaces: ['admin', 'public'] });
    expect(await pub.endpoint()).toBe('https://placement.public');
  });

  test('no placement endpoint in the catalog: a clear error saying what to set', async () => {
    nock(KS).post('/v3/auth/tokens').reply(() => tokenReply('t', '2099-01-01T00:00:00Z', []));
    const auth = new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'a', secret: 'b' } });
    await expect(auth.endpoint()).rejects.toThrow(/no placement endpoint .* set \[placement\] endpoint_override/);
  });

  test('refused credentials: PlacementAuthError with the status, keystone\'s words and the options to check, no secret', async () => {
    nock(KS).post('/v3/auth/tokens').reply(401, { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } });
    const auth = new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'a', secret: 'super-secret' } });
    const err = await auth.token().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlacementAuthError);
    expect((err as Error).message).toBe(
      `keystone ${KS}/v3/auth/tokens: authentication refused, answered 401 (The request you have made requires authentication.); ` +
        'check [placement] application_credential_id and application_credential_secret (a deleted, expired or revoked application credential is refused the same way)',
    );
    expect((err as Error).message).not.toContain('super-secret');
    nock(KS).post('/v3/auth/tokens').reply(401, { error: { code: 401 } });
    const pw = new KeystoneAuth({ authUrl: KS, method: { kind: 'password', username: 'u', password: 'pw-secret', userDomainName: 'Default', projectName: 'p', projectDomainName: 'Default' } });
    const pwErr = (await pw.token().catch((e: unknown) => e)) as Error;
    expect(pwErr.message).toMatch(/authentication refused, answered 401; check \[placement\] username, password, user_domain_name/);
    expect(pwErr.message).not.toContain('pw-secret');
  });

  test('a deleted application credential (keystone answers 404): refused, naming the credential options', async () => {
    nock(KS).post('/v3/auth/tokens').reply(404, { error: { code: 404, title: 'Not Found', message: 'Could not find Application Credential: a.' } });
    const auth = new KeystoneAuth({ authUrl: KS, method: { kind: 'application_credential', id: 'a', secret: 'b' } });
    await expect(auth.token()).rejects.toThrow(
      /authentication refused, answered 404 \(Could not find Application Credential: a\.\); check \[placement\] application_credential_id and application_credential_secret/,
    );
  });

  test('a token URL that is not keystone\'s: the status and auth_url named', async () => {
    nock(KS).post('/v3/auth/tokens').reply(404, 'Not Found');
    const auth = new KeystoneAuth({ authUrl: KS, method: { kind: 'password', username: 'u', password: 'p', userDomainName: 'Default', projectName: 'p', projectDomainName: 'Default' } });
    await expect(auth.token()).rejects.toThrow(/authentication failed, answered 404 to POST \/v3\/auth\/tokens; check \[placement\] auth_url/);
  });
});
