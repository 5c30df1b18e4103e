/**
 * The Neutron client: the `NeutronApi` port over the project's one JSON transport
 * (`tracker/placement/transport.ts`), with keystone's token and the catalog's `network` endpoint.
 *
 * Retries: a request that got no answer or a 5xx is sent again up to `[neutron] http_retries`
 * times with backoff (nova retries the same way); every Neutron call the agent makes is safe to
 * repeat except the POSTs, which could create a second port or binding, so those are sent again
 * only when the connection was refused (the request never left). A failed build gives back every
 * port carrying the instance's `device_id` (`network-api.ts`), so a port made by a POST whose answer
 * was lost does not stay. A 401 is retried once with a fresh token. Every other status is
 * classified once (`errors.ts`).
 */
import { backoffDelay } from '../../lib/backoff';
import { systemClock, type Clock } from '../../lib/clock';
import type { AuthProvider } from '../../tracker/placement/auth';
import { TransportError, type HttpTransport, type TransportResponse } from '../../tracker/placement/transport';
import type { z } from 'zod';
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
import { answers, parseAnswer } from './responses';

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
}

const UUIDISH = /^[A-Za-z0-9_.:-]{1,255}$/;
/** Transport failures where the request never left: safe to send again whatever it was. */
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

export class NeutronHttpClient implements NeutronApi {
  private readonly clock: Clock;

  constructor(private readonly o: NeutronHttpOptions) {
    this.clock = o.clock ?? systemClock;
  }

  async extensions(): Promise<ReadonlySet<string>> {
    const r = await this.json('GET', '/v2.0/extensions', answers.extensions);
    return new Set(r.extensions.map((e) => e.alias));
  }

  async getPort(id: string): Promise<NeutronPort> {
    return (await this.json('GET', `/v2.0/ports/${seg(id)}`, answers.port)).port;
  }

  async listPorts(filters: Filters): Promise<NeutronPort[]> {
    return (await this.json('GET', `/v2.0/ports${query(filters)}`, answers.ports)).ports;
  }

  async createPort(body: Readonly<Record<string, unknown>>): Promise<NeutronPort> {
    return (await this.json('POST', '/v2.0/ports', answers.port, { port: body }, { idempotent: false })).port;
  }

  async updatePort(id: string, body: Readonly<Record<string, unknown>>): Promise<NeutronPort> {
    return (await this.json('PUT', `/v2.0/ports/${seg(id)}`, answers.port, { port: body })).port;
  }

  async deletePort(id: string): Promise<boolean> {
    return this.remove(`/v2.0/ports/${seg(id)}`);
  }

  async listNetworks(ids: readonly string[]): Promise<NeutronNetwork[]> {
    if (ids.length === 0) return [];
    return (await this.json('GET', `/v2.0/networks${query({ id: ids })}`, answers.networks)).networks;
  }

  async listSubnets(ids: readonly string[]): Promise<NeutronSubnet[]> {
    if (ids.length === 0) return [];
    return (await this.json('GET', `/v2.0/subnets${query({ id: ids })}`, answers.subnets)).subnets;
  }

  async listFloatingIps(portId: string): Promise<NeutronFloatingIp[]> {
    return (await this.json('GET', `/v2.0/floatingips${query({ port_id: portId })}`, answers.floatingips)).floatingips;
  }

  async listSecurityGroups(filters: Filters): Promise<{ id: string; name: string }[]> {
    return (await this.json('GET', `/v2.0/security-groups${query({ ...filters, fields: ['id', 'name'] })}`, answers.securityGroups)).security_groups;
  }

  async createBinding(portId: string, binding: { host: string; vnic_type?: string; profile?: Readonly<Record<string, unknown>> }): Promise<NeutronBinding> {
    return (await this.json('POST', `/v2.0/ports/${seg(portId)}/bindings`, answers.binding, { binding }, { idempotent: false })).binding;
  }

  async getBinding(portId: string, host: string): Promise<NeutronBinding> {
    return (await this.json('GET', `/v2.0/ports/${seg(portId)}/bindings/${seg(host)}`, answers.binding)).binding;
  }

  async activateBinding(portId: string, host: string): Promise<NeutronBinding> {
    return (await this.json('PUT', `/v2.0/ports/${seg(portId)}/bindings/${seg(host)}/activate`, answers.binding)).binding;
  }

  async deleteBinding(portId: string, host: string): Promise<boolean> {
    return this.remove(`/v2.0/ports/${seg(portId)}/bindings/${seg(host)}`);
  }

  /** DELETE: true when it deleted, false when it was already gone. */
  private async remove(path: string): Promise<boolean> {
    try {
      await this.send('DELETE', path);
      return true;
    } catch (e) {
      if (e instanceof NeutronNotFoundError) return false;
      throw e;
    }
  }

  private async json<T>(method: string, path: string, schema: z.ZodType<T, unknown>, body?: unknown, opts: { idempotent?: boolean } = {}): Promise<T> {
    const res = await this.send(method, path, body, opts);
    const parsed = parseAnswer(schema, res.data);
    if ('problem' in parsed) throw new NeutronResponseError(`${method} ${path}`, parsed.problem);
    return parsed.value;
  }

  /** One request, retried as the module says; resolves with a 2xx answer. */
  private async send(method: string, path: string, body?: unknown, opts: { idempotent?: boolean } = {}): Promise<TransportResponse> {
    const what = `${method} ${path.split('?')[0]}`;
    let reauthed = false;
    for (let attempt = 0; ; attempt++) {
      const [token, endpoint] = await Promise.all([this.o.auth.token(), this.o.auth.endpoint()]).catch((e: unknown) => {
        throw new NeutronAuthError(what, e instanceof Error ? e.message : String(e), { cause: e });
      });
      this.o.onRequest?.(method, path.split('?')[0] ?? path);
      let res: TransportResponse | undefined;
      let failure: string;
      try {
        res = await this.o.transport.send({
          method,
          url: `${endpoint}${path}`,
          headers: { 'X-Auth-Token': token, Accept: 'application/json', ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      } catch (e) {
        if (!(e instanceof TransportError)) throw e;
        failure = e.message;
        // A request that may have reached Neutron (a timeout, a reset) is sent again only when
        // repeating it is harmless: a second POST would make a second port.
        const resend = (opts.idempotent ?? true) || NOT_SENT.has(e.code);
        if (resend && attempt < this.o.retries) {
          await this.backoff(attempt);
          continue;
        }
        throw new NeutronUnavailableError(what, failure, { cause: e });
      }
      const status = res.status;
      if (status >= 200 && status < 300) return res;
      const detail = neutronMessage(res.data);
      if (status === 401 && !reauthed) {
        reauthed = true;
        this.o.auth.invalidate();
        attempt--;
        continue;
      }
      if (status >= 500 && (opts.idempotent ?? true) && attempt < this.o.retries) {
        await this.backoff(attempt);
        continue;
      }
      if (status >= 500) throw new NeutronUnavailableError(what, `answered ${status}${detail}`);
      if (status === 401) throw new NeutronAuthError(what, `Neutron refused the token (401)${detail}`);
      if (status === 404) throw new NeutronNotFoundError(what, detail);
      if (status === 409) throw new NeutronConflictError(what, detail);
      throw new NeutronRefusedError(what, status, detail);
    }
  }

  private backoff(attempt: number): Promise<void> {
    return this.clock.sleep(backoffDelay(attempt + 1, { initialMs: this.o.retryDelayMs ?? 500, maxMs: 10_000 }));
  }
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
