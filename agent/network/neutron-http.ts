/**
 * The Neutron client: the `NeutronApi` port over `JsonService` (keystone's token, the catalog's
 * `network` endpoint, the project's one JSON transport).
 *
 * Retries: a request that got no answer or a 5xx is sent again up to `[neutron] http_retries`
 * times with backoff (nova retries the same way); every Neutron call the agent makes is safe to
 * repeat except the POSTs, which could create a second port or binding, so those are sent again
 * only when the connection was refused (the request never left). A failed build gives back every
 * port carrying the instance's `device_id` (`network-api.ts`), so a port made by a POST whose answer
 * was lost does not stay. A 401 is retried once with a fresh token. Every other status is
 * classified once (`errors.ts`).
 */
import type { Clock } from '../../lib/clock';
import type { AuthProvider } from '../../tracker/placement/auth';
import type { HttpTransport } from '../../tracker/placement/transport';
import { JsonService, UUID_SEGMENT, type ServiceFailures } from '../openstack/json-service';
import {
  NeutronAuthError,
  NeutronConflictError,
  NeutronNotFoundError,
  NeutronRefusedError,
  NeutronResponseError,
  NeutronUnavailableError,
  NetworkRequestError,
} from './errors';
import type { Filters, NeutronApi, NeutronBinding, NeutronFloatingIp, NeutronNetwork, NeutronPort, NeutronSubnet } from './neutron-api';
import { answers } from './responses';

export interface NeutronHttpOptions {
  readonly auth: AuthProvider;
  readonly transport: HttpTransport;
  /** Extra attempts after no answer or a 5xx. */
  readonly retries: number;
  readonly clock?: Clock;
  /** First backoff delay (ms); tests shorten it. */
  readonly retryDelayMs?: number;
  /** Called with each request's method and route, answered or not (the bench counts them). */
  readonly onRequest?: (method: string, route: string) => void;
  /** Called with each request's method, route (`neutronRoute`), HTTP status (or 'error': no answer) and seconds. */
  readonly onAnswer?: (method: string, route: string, status: number | 'error', seconds: number) => void;
}

const UUIDISH = /^[A-Za-z0-9_.:-]{1,255}$/;

/** Neutron's failures, one class each (`errors.ts`). */
const failures: ServiceFailures = {
  unavailable: (what, detail, cause) => new NeutronUnavailableError(what, detail, cause === undefined ? undefined : { cause }),
  auth: (what, detail, cause) => new NeutronAuthError(what, detail, cause === undefined ? undefined : { cause }),
  refused: (what, status, detail) =>
    status === 404 ? new NeutronNotFoundError(what, detail) : status === 409 ? new NeutronConflictError(what, detail) : new NeutronRefusedError(what, status, detail),
  response: (what, problem) => new NeutronResponseError(what, problem),
};

export class NeutronHttpClient implements NeutronApi {
  private readonly service: JsonService;

  constructor(o: NeutronHttpOptions) {
    this.service = new JsonService({ ...o, name: 'Neutron', failures, message: neutronMessage, route: neutronRoute });
  }

  async extensions(): Promise<ReadonlySet<string>> {
    const r = await this.service.json('GET', '/v2.0/extensions', answers.extensions);
    return new Set(r.extensions.map((e) => e.alias));
  }

  async getPort(id: string): Promise<NeutronPort> {
    return (await this.service.json('GET', `/v2.0/ports/${seg(id)}`, answers.port)).port;
  }

  async listPorts(filters: Filters): Promise<NeutronPort[]> {
    return (await this.service.json('GET', `/v2.0/ports${query(filters)}`, answers.ports)).ports;
  }

  async createPort(body: Readonly<Record<string, unknown>>): Promise<NeutronPort> {
    return (await this.service.json('POST', '/v2.0/ports', answers.port, { port: body }, { idempotent: false })).port;
  }

  async updatePort(id: string, body: Readonly<Record<string, unknown>>): Promise<NeutronPort> {
    return (await this.service.json('PUT', `/v2.0/ports/${seg(id)}`, answers.port, { port: body })).port;
  }

  async deletePort(id: string): Promise<boolean> {
    return this.service.remove(`/v2.0/ports/${seg(id)}`);
  }

  async listNetworks(ids: readonly string[]): Promise<NeutronNetwork[]> {
    if (ids.length === 0) return [];
    return (await this.service.json('GET', `/v2.0/networks${query({ id: ids })}`, answers.networks)).networks;
  }

  async listSubnets(ids: readonly string[]): Promise<NeutronSubnet[]> {
    if (ids.length === 0) return [];
    return (await this.service.json('GET', `/v2.0/subnets${query({ id: ids })}`, answers.subnets)).subnets;
  }

  async listFloatingIps(portId: string): Promise<NeutronFloatingIp[]> {
    try {
      return (await this.service.json('GET', `/v2.0/floatingips${query({ port_id: portId })}`, answers.floatingips)).floatingips;
    } catch (e) {
      // A Neutron without the L3 API (no router service plugin, as ML2/OVS may be deployed) has no
      // such collection: no floating IP can point at the port. nova takes the 404 the same way.
      if (e instanceof NeutronNotFoundError) return [];
      throw e;
    }
  }

  async listSecurityGroups(filters: Filters): Promise<{ id: string; name: string }[]> {
    return (await this.service.json('GET', `/v2.0/security-groups${query({ ...filters, fields: ['id', 'name'] })}`, answers.securityGroups)).security_groups;
  }

  async createBinding(portId: string, binding: { host: string; vnic_type?: string; profile?: Readonly<Record<string, unknown>> }): Promise<NeutronBinding> {
    return (await this.service.json('POST', `/v2.0/ports/${seg(portId)}/bindings`, answers.binding, { binding }, { idempotent: false })).binding;
  }

  async getBinding(portId: string, host: string): Promise<NeutronBinding> {
    return (await this.service.json('GET', `/v2.0/ports/${seg(portId)}/bindings/${seg(host)}`, answers.binding)).binding;
  }

  async activateBinding(portId: string, host: string): Promise<NeutronBinding> {
    return (await this.service.json('PUT', `/v2.0/ports/${seg(portId)}/bindings/${seg(host)}/activate`, answers.activated)).binding;
  }

  async deleteBinding(portId: string, host: string): Promise<boolean> {
    return this.service.remove(`/v2.0/ports/${seg(portId)}/bindings/${seg(host)}`);
  }
}

/** `path` without its query, ids as `{id}` and a binding's host as `{host}`: a metric label of bounded variety. */
export function neutronRoute(path: string): string {
  const parts = (path.split('?')[0] ?? path).split('/');
  return parts.map((p, i) => (parts[i - 1] === 'bindings' ? '{host}' : UUID_SEGMENT.test(p) ? '{id}' : p)).join('/');
}

/** A path segment, refused when it could change the route. */
function seg(v: string): string {
  if (!UUIDISH.test(v)) throw new NetworkRequestError(`${JSON.stringify(v).slice(0, 80)} is not a Neutron id or host name (letters, digits, '_.:-')`);
  return encodeURIComponent(v);
}

function query(filters: Filters): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(filters)) {
    for (const one of typeof v === 'string' ? [v] : v) parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(one)}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

/** Neutron's own words for a refusal (`{"NeutronError": {"type", "message"}}`), as `: type: message`. */
function neutronMessage(data: unknown): string {
  if (typeof data !== 'object' || data === null) return typeof data === 'string' && data.trim() ? `: ${data.trim().slice(0, 300)}` : '';
  const err = (data as { NeutronError?: unknown }).NeutronError;
  if (typeof err === 'object' && err !== null) {
    const { type, message } = err as { type?: unknown; message?: unknown };
    return `: ${typeof type === 'string' ? `${type}: ` : ''}${typeof message === 'string' ? message : ''}`.replace(/: $/, '');
  }
  return '';
}
