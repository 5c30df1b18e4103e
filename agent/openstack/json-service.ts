/**
 * One OpenStack service's JSON API as a compute host calls it (Neutron, Cinder): keystone's token
 * and the catalog's endpoint, over the project's one JSON transport (`tracker/placement/transport.ts`).
 *
 * It is: the request loop every such client shares. A request that got no answer or a 5xx is sent
 * again up to `retries` times with backoff, but one that is not idempotent (a POST that could make
 * a second port or volume) only when the connection was refused (the request never left). A 401 is
 * retried once with a fresh token. Every other status is classified once, by the service's own
 * error classes (`failures`); a 2xx body is checked against the caller's schema, and a DELETE of
 * what is gone already is an answer, not a failure. It is not: a service's routes, bodies or
 * policy; each client has those.
 */
import type { z } from 'zod';
import { backoffDelay } from '../../lib/backoff';
import { systemClock, type Clock } from '../../lib/clock';
import type { AuthProvider } from '../../tracker/placement/auth';
import { TransportError, type HttpTransport, type TransportResponse } from '../../tracker/placement/transport';

/** The service's error class for each kind of failure; `what` is the request (`PUT /v2.0/ports/<id>`). */
export interface ServiceFailures {
  /** No answer, or a 5xx, after every retry. */
  unavailable(what: string, detail: string, cause?: unknown): Error;
  /** No token or endpoint could be had, or a 401 after a fresh token. */
  auth(what: string, detail: string, cause?: unknown): Error;
  /** Any other non-2xx status: the service's definite answer. */
  refused(what: string, status: number, detail: string): Error;
  /** A 2xx whose body does not fit the schema: `problem` names the first field that does not. */
  response(what: string, problem: string): Error;
}

export interface JsonServiceOptions {
  /** The service's name in messages ("Neutron"). */
  readonly name: string;
  readonly auth: AuthProvider;
  readonly transport: HttpTransport;
  /** Extra attempts after no answer or a 5xx. */
  readonly retries: number;
  readonly failures: ServiceFailures;
  /** The service's own words for a refusal, from its error body, as `: ...` (or ''). */
  readonly message: (data: unknown) => string;
  /** Headers besides the token sent with every request (a microversion, a service token). */
  readonly headers?: () => Promise<Readonly<Record<string, string>>>;
  /** `path` as a metric label of bounded variety. */
  readonly route?: (path: string) => string;
  readonly clock?: Clock;
  /** First backoff delay (ms); tests shorten it. */
  readonly retryDelayMs?: number;
  /** Called with each request's method and route, answered or not (the bench counts them). */
  readonly onRequest?: (method: string, route: string) => void;
  /** Called with each request's method, route, HTTP status (or 'error': no answer) and seconds. */
  readonly onAnswer?: (method: string, route: string, status: number | 'error', seconds: number) => void;
}

/** A path segment that is a uuid: the clients' routes show it as `{id}`, a metric label of bounded variety. */
export const UUID_SEGMENT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Transport failures where the request never left: safe to send again whatever it was. */
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

export class JsonService {
  private readonly clock: Clock;

  constructor(private readonly o: JsonServiceOptions) {
    this.clock = o.clock ?? systemClock;
  }

  /** One request, retried as the module says; resolves with a 2xx answer. @throws what `failures` makes */
  async send(method: string, path: string, body?: unknown, opts: { idempotent?: boolean } = {}): Promise<TransportResponse> {
    return (await this.request(method, path, body, opts.idempotent ?? true, false)) as TransportResponse;
  }

  /** `send`, with the 2xx body parsed by `schema`. @throws what `failures` makes (`response` for a body that does not fit) */
  async json<T>(method: string, path: string, schema: z.ZodType<T, unknown>, body?: unknown, opts: { idempotent?: boolean } = {}): Promise<T> {
    const r = schema.safeParse((await this.send(method, path, body, opts)).data);
    if (r.success) return r.data;
    const issue = r.error.issues[0];
    throw this.o.failures.response(`${method} ${path}`, `${issue?.path.join('.') || '(body)'}: ${issue?.message ?? 'does not fit'}`);
  }

  /** DELETE `path`: true when it deleted, false when it was gone already (404). @throws what `failures` makes */
  async remove(path: string): Promise<boolean> {
    return (await this.request('DELETE', path, undefined, true, true)) !== undefined;
  }

  /** The loop; with `absentOk` a 404 resolves undefined instead of being classified. */
  private async request(method: string, path: string, body: unknown, idempotent: boolean, absentOk: boolean): Promise<TransportResponse | undefined> {
    const bare = path.split('?')[0] ?? path;
    const what = `${method} ${bare}`;
    const route = this.o.route?.(path) ?? bare;
    let reauthed = false;
    for (let attempt = 0; ; attempt++) {
      const [token, endpoint, extra] = await Promise.all([this.o.auth.token(), this.o.auth.endpoint(), this.o.headers?.() ?? {}]).catch((e: unknown) => {
        throw this.o.failures.auth(what, e instanceof Error ? e.message : String(e), e);
      });
      this.o.onRequest?.(method, bare);
      let res: TransportResponse;
      const sent = this.clock.now();
      const answered = (status: number | 'error'): void => this.o.onAnswer?.(method, route, status, (this.clock.now() - sent) / 1000);
      try {
        res = await this.o.transport.send({
          method,
          url: `${endpoint}${path}`,
          headers: { ...extra, 'X-Auth-Token': token, Accept: 'application/json', ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      } catch (e) {
        answered('error');
        if (!(e instanceof TransportError)) throw e;
        // A request that may have reached the service (a timeout, a reset) is sent again only
        // when repeating it is harmless.
        if ((idempotent || NOT_SENT.has(e.code)) && attempt < this.o.retries) {
          await this.backoff(attempt);
          continue;
        }
        throw this.o.failures.unavailable(what, e.message, e);
      }
      const status = res.status;
      answered(status);
      if (status >= 200 && status < 300) return res;
      if (status === 404 && absentOk) return undefined;
      const detail = this.o.message(res.data);
      if (status === 401 && !reauthed) {
        reauthed = true;
        this.o.auth.invalidate();
        attempt--;
        continue;
      }
      if (status >= 500 && idempotent && attempt < this.o.retries) {
        await this.backoff(attempt);
        continue;
      }
      if (status >= 500) throw this.o.failures.unavailable(what, `answered ${status}${detail}`);
      if (status === 401) throw this.o.failures.auth(what, `${this.o.name} refused the token (401)${detail}`);
      throw this.o.failures.refused(what, status, detail);
    }
  }

  private backoff(attempt: number): Promise<void> {
    return this.clock.sleep(backoffDelay(attempt + 1, { initialMs: this.o.retryDelayMs ?? 500, maxMs: 10_000 }));
  }
}
