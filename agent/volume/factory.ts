/**
 * The agent's Cinder clients, from the configuration: one per request, as nova-compute makes them
 * (`nova/volume/cinder.py` `cinderclient(context)`): the requesting user's token from the RPC
 * context, so what a build creates belongs to the server's project, with the agent's own token as
 * `X-Service-Token` (Cinder lets only a caller with the `service` role delete an in-use
 * attachment, and accepts a user token that expired during a long build when a service token
 * comes with it). A request without a user token (the agent acting for itself) goes with the
 * agent's token alone.
 *
 * The endpoint is the catalog's `block-storage` (or `volumev3`, `volume`) as the agent's own token
 * sees it, or `[cinder] endpoint_override`. A catalog URL that carries a project id
 * (`…/v3/<project>`, the install guide's form) is used without it: Cinder 2025.1 serves every
 * project at `…/v3`, and the agent's project is not the user's.
 */
import { readFileSync } from 'node:fs';
import type { AgentConfig } from '../../config/schema';
import type { Clock } from '../../lib/clock';
import { NoAuth, type AuthProvider } from '../../tracker/placement/auth';
import { serviceAuthFromConfig } from '../../tracker/placement/factory';
import { NodeHttpTransport, type HttpTransport } from '../../tracker/placement/transport';
import type { RequestContext } from '../compute/ports';
import type { CinderApi } from './cinder-api';
import { CinderHttpClient, type CinderHttpOptions } from './cinder-http';

/** Makes the Cinder client of one request. */
export interface CinderClients {
  /** Whether Cinder is configured at all (builds with volume mappings fail clearly when not). */
  readonly configured: boolean;
  /** The client acting for `ctx`'s user (with the agent's service token), or for the agent itself. */
  forRequest(ctx: RequestContext): CinderApi;
}

/** The endpoint without a trailing project id (`…/v3/<32 hex>` → `…/v3`). */
export function projectlessEndpoint(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/(v3)\/[0-9a-fA-F]{32}$/, '/$1');
}

export interface CinderClientsOptions {
  /** The agent's own auth (service user); undefined: Cinder is not configured. */
  readonly agentAuth: AuthProvider | undefined;
  /** Whether the agent's token goes as X-Service-Token (false with noauth: there is no token). */
  readonly serviceToken: boolean;
  readonly transport: HttpTransport;
  readonly retries: number;
  readonly clock?: Clock;
  readonly onAnswer?: CinderHttpOptions['onAnswer'];
}

export class ConfiguredCinderClients implements CinderClients {
  private readonly own: CinderApi | undefined;

  constructor(private readonly o: CinderClientsOptions) {
    this.own = o.agentAuth ? this.client(projectless(o.agentAuth)) : undefined;
  }

  get configured(): boolean {
    return this.o.agentAuth !== undefined;
  }

  forRequest(ctx: RequestContext): CinderApi {
    const agent = this.o.agentAuth;
    if (!agent || !this.own) throw new Error('Cinder is not configured: set [placement] keystone credentials (the catalog has block-storage) or [cinder] endpoint_override');
    const token = ctx['auth_token'];
    if (typeof token !== 'string' || token === '' || !this.o.serviceToken) return this.own;
    const user: AuthProvider = { token: () => Promise.resolve(token), endpoint: () => agent.endpoint().then(projectlessEndpoint), invalidate: () => undefined };
    return this.client(user);
  }

  private client(auth: AuthProvider): CinderApi {
    const o = this.o;
    return new CinderHttpClient({
      auth,
      ...(o.serviceToken && o.agentAuth ? { serviceAuth: o.agentAuth } : {}),
      transport: o.transport,
      retries: o.retries,
      ...(o.clock ? { clock: o.clock } : {}),
      ...(o.onAnswer ? { onAnswer: o.onAnswer } : {}),
    });
  }
}

function projectless(auth: AuthProvider): AuthProvider {
  return { token: () => auth.token(), endpoint: () => auth.endpoint().then(projectlessEndpoint), invalidate: () => auth.invalidate() };
}

/** The Cinder clients for `config`; `hooks.onAnswer` sees each request's outcome (the metrics). */
export function cinderFromConfig(config: AgentConfig, clock: Clock, hooks: Pick<CinderHttpOptions, 'onAnswer'> = {}): CinderClients {
  const c = config.cinder;
  const keystone = serviceAuthFromConfig(config, {
    serviceType: 'block-storage',
    serviceTypeAliases: ['volumev3', 'volume'],
    section: 'cinder',
    interfaces: c.valid_interfaces,
    endpointOverride: c.endpoint_override,
    regionName: c.os_region_name,
  });
  const agentAuth: AuthProvider | undefined = keystone ?? (c.endpoint_override ? new NoAuth(c.endpoint_override) : undefined);
  return new ConfiguredCinderClients({
    agentAuth,
    serviceToken: keystone !== undefined,
    transport: new NodeHttpTransport({ timeoutMs: c.timeout * 1000, ...(config.placement.cafile ? { ca: readFileSync(config.placement.cafile) } : {}) }),
    retries: c.http_retries,
    clock,
    ...(hooks.onAnswer ? { onAnswer: hooks.onAnswer } : {}),
  });
}
