/**
 * Keystone v3 authentication for the Placement client: password or application credential.
 *
 * The token is fetched once, cached, and renewed shortly before `expires_at` or after a 401 (a
 * revoked token). Concurrent callers share one in-flight request. The Placement endpoint comes from
 * `endpoint_override` or from the token's service catalog (type `placement`, first matching
 * interface of `valid_interfaces`, optionally in `region_name`), and is re-read with every new
 * token so a catalog change (http to https, say) is followed without a restart.
 *
 * A 201 whose body is not a token (no parsable `expires_at`, a catalog of another shape) is a
 * `MalformedResponseError` naming `POST /v3/auth/tokens` and the field; nothing is cached, so the
 * next request asks keystone again.
 */
import { readFileSync } from 'node:fs';
import { isTlsFailure, NodeHttpTransport, TransportError, type HttpTransport } from './transport';
import { systemClock, type Clock } from '../../lib/clock';
import type { AuthProvider } from './auth';
import { PlacementAuthError } from './errors';
import { checkAnswer, keystoneTokenAnswer, type KeystoneTokenAnswer } from './responses';

export type KeystoneMethod =
  | {
      readonly kind: 'password';
      readonly username: string;
      readonly password: string;
      readonly userDomainName: string;
      readonly projectName: string;
      readonly projectDomainName: string;
    }
  | { readonly kind: 'application_credential'; readonly id: string; readonly secret: string };

export interface KeystoneOptions {
  readonly authUrl: string;
  readonly method: KeystoneMethod;
  readonly endpointOverride?: string;
  readonly interfaces?: readonly string[];
  /** The catalog's service type to take the endpoint of (default `placement`; `image` for Glance). */
  readonly serviceType?: string;
  /** Other names of that service type, tried in order when the catalog lacks it (Cinder: `volumev3`, `volume`). */
  readonly serviceTypeAliases?: readonly string[];
  /** The config section whose endpoint_override, valid_interfaces and region_name the error about a missing endpoint names. */
  readonly section?: string;
  readonly regionName?: string;
  readonly timeoutMs?: number;
  readonly cafile?: string;
  /** Renew this long before expiry. */
  readonly renewBeforeMs?: number;
  readonly clock?: Clock;
  readonly transport?: HttpTransport;
}

type CatalogEntry = NonNullable<KeystoneTokenAnswer['token']['catalog']>[number];

interface CachedToken {
  readonly token: string;
  readonly expiresAt: number;
  readonly endpoint: string | undefined;
}

export class KeystoneAuth implements AuthProvider {
  private cached: CachedToken | undefined;
  private inflight: Promise<CachedToken> | undefined;
  private readonly http: HttpTransport;
  private readonly clock: Clock;
  private readonly tokensUrl: string;

  constructor(private readonly opts: KeystoneOptions) {
    this.clock = opts.clock ?? systemClock;
    const base = opts.authUrl.replace(/\/+$/, '');
    this.tokensUrl = `${/\/v3$/.test(base) ? base : `${base}/v3`}/auth/tokens`;
    this.http =
      opts.transport ??
      new NodeHttpTransport({ timeoutMs: opts.timeoutMs ?? 30000, ...(opts.cafile ? { ca: readFileSync(opts.cafile) } : {}) });
  }

  async token(): Promise<string> {
    return (await this.current()).token;
  }

  async endpoint(): Promise<string> {
    if (this.opts.endpointOverride) return this.opts.endpointOverride.replace(/\/+$/, '');
    const t = await this.current();
    if (!t.endpoint) {
      throw new PlacementAuthError(
        `keystone ${this.opts.authUrl}: the service catalog has no ${this.opts.serviceType ?? 'placement'} endpoint for interfaces ` +
          `${(this.opts.interfaces ?? ['internal', 'public']).join(',')}${this.opts.regionName ? ` in region ${this.opts.regionName}` : ''}; ` +
          `set [${this.opts.section ?? 'placement'}] endpoint_override or fix valid_interfaces/region_name`,
        { method: 'POST', path: '/v3/auth/tokens' },
      );
    }
    return t.endpoint;
  }

  invalidate(): void {
    this.cached = undefined;
  }

  private async current(): Promise<CachedToken> {
    const renewBefore = this.opts.renewBeforeMs ?? 120000;
    if (this.cached && this.cached.expiresAt - renewBefore > this.clock.now()) return this.cached;
    this.inflight ??= this.fetch().finally(() => {
      this.inflight = undefined;
    });
    this.cached = await this.inflight;
    return this.cached;
  }

  private body(): unknown {
    const m = this.opts.method;
    if (m.kind === 'application_credential') {
      return { auth: { identity: { methods: ['application_credential'], application_credential: { id: m.id, secret: m.secret } } } };
    }
    return {
      auth: {
        identity: {
          methods: ['password'],
          password: { user: { name: m.username, domain: { name: m.userDomainName }, password: m.password } },
        },
        scope: { project: { name: m.projectName, domain: { name: m.projectDomainName } } },
      },
    };
  }

  private async fetch(): Promise<CachedToken> {
    const info = { method: 'POST', path: '/v3/auth/tokens' };
    let res;
    try {
      res = await this.http.send({
        method: 'POST',
        url: this.tokensUrl,
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify(this.body()),
      });
    } catch (e) {
      const tls = e instanceof TransportError && isTlsFailure(e.code);
      throw new PlacementAuthError(`keystone ${this.tokensUrl}: ${e instanceof Error ? e.message : String(e)}${tls ? ' (check [placement] cafile)' : ''}`, info, { cause: e });
    }
    const subject = res.headers['x-subject-token'] as unknown;
    if (res.status !== 201 || typeof subject !== 'string') {
      throw new PlacementAuthError(`keystone ${this.tokensUrl}: ${refusal(res.status, res.data, this.opts.method.kind)}`, {
        ...info,
        status: res.status,
      });
    }
    const requestId = res.headers['x-openstack-request-id'];
    const { token } = checkAnswer(keystoneTokenAnswer, res.data, {
      ...info,
      route: 'POST /v3/auth/tokens',
      status: res.status,
      requestId: typeof requestId === 'string' ? requestId : undefined,
    });
    return { token: subject, expiresAt: Date.parse(token.expires_at), endpoint: this.pickEndpoint(token.catalog ?? []) };
  }

  private pickEndpoint(catalog: readonly CatalogEntry[]): string | undefined {
    const types = [this.opts.serviceType ?? 'placement', ...(this.opts.serviceTypeAliases ?? [])];
    const service = types.map((t) => catalog.find((c) => c.type === t)).find((c) => c !== undefined);
    const region = this.opts.regionName;
    for (const iface of this.opts.interfaces ?? ['internal', 'public']) {
      const ep = (service?.endpoints ?? []).find((e) => e.interface === iface && (!region || e.region === region || e.region_id === region));
      if (ep) return ep.url.replace(/\/+$/, '');
    }
    return undefined;
  }
}

/** Keystone's own words for a refused token request, if its body has them. */
function keystoneMessage(data: unknown): string | undefined {
  if (typeof data !== 'object' || data === null || !('error' in data)) return undefined;
  const error = data.error;
  if (typeof error !== 'object' || error === null || !('message' in error)) return undefined;
  const message = error.message;
  return typeof message === 'string' && message.trim() !== '' ? message.trim() : undefined;
}

/**
 * Why a token request failed, and which options to check. Keystone answers 401 alike for a wrong
 * secret, an unknown user and an expired or revoked application credential (404 for a deleted
 * one), so the message names every option that could be the cause.
 */
function refusal(status: number, data: unknown, kind: KeystoneMethod['kind']): string {
  const said = keystoneMessage(data);
  const answer = `answered ${status}${said ? ` (${said})` : ''}`;
  if (status === 401 || (status === 404 && kind === 'application_credential')) {
    return kind === 'password'
      ? `authentication refused, ${answer}; check [placement] username, password, user_domain_name, project_name and project_domain_name`
      : `authentication refused, ${answer}; check [placement] application_credential_id and application_credential_secret (a deleted, expired or revoked application credential is refused the same way)`;
  }
  if (status === 403) return `authentication forbidden, ${answer}; the [placement] user may not have a role on the project`;
  return `authentication failed, ${answer} to POST /v3/auth/tokens; check [placement] auth_url`;
}
