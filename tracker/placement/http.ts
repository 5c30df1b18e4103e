/**
 * The one place that speaks HTTP to Placement: each call carries its own microversion, the token,
 * and a request id; answers become data or a typed error (`errors.ts`); connection failures and
 * 5xx are retried with backoff when a replay is safe; every request is counted by method, route
 * and status for metrics and benchmarks.
 *
 * Not here: what to write (sync, reshape, claims) or caching; see `../sync/`.
 *
 * Replay safety: a request that never reached the server (connection refused) is always retried.
 * Other failures (reset, timeout, 5xx) are retried only for `retry: 'safe'` requests, the default
 * for GET/PUT/DELETE: their writes carry a generation, so a replay of a write that did land gets a
 * 409 that the caller already handles. Allocation writes and POSTs use `retry: 'refused-only'`:
 * replaying one that landed would turn success into a consumer-generation conflict.
 *
 * Keystone that cannot be reached (or answers 5xx) while a token or the endpoint is resolved is an
 * outage too: it becomes `PlacementUnavailableError`, so callers that ride out outages (the claim
 * service, start-up) wait for it as they wait for Placement; refused credentials stay
 * `PlacementAuthError`.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isTlsFailure, NodeHttpTransport, TransportError, type HttpTransport } from './transport';
import type { Clock } from '../../lib/clock';
import { systemClock } from '../../lib/clock';
import { backoffDelay, type BackoffPolicy } from '../../lib/backoff';
import type { AuthProvider } from './auth';
import {
  ConsumerGenerationConflictError,
  errorFromResponse,
  PlacementAuthError,
  PlacementError,
  PlacementUnavailableError,
  ProviderGenerationConflictError,
  type PlacementErrorInfo,
} from './errors';

export interface PlacementRequest {
  readonly method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  /** Path with query, relative to the endpoint, e.g. `/resource_providers?in_tree=<uuid>`. */
  readonly path: string;
  /** `OpenStack-API-Version: placement <microversion>`; omit only for `GET /`. */
  readonly microversion?: string;
  readonly body?: unknown;
  /** Statuses that count as success (default: any 2xx). */
  readonly ok?: readonly number[];
  readonly retry?: 'safe' | 'refused-only';
  /** The caller's global request id (from the RPC context), sent as X-OpenStack-Request-ID. */
  readonly globalRequestId?: string;
  /** Skip the token (GET / is unauthenticated). */
  readonly anonymous?: boolean;
}

export interface PlacementResponse<T = unknown> {
  readonly status: number;
  readonly data: T;
  readonly requestId: string | undefined;
}

/** Counts requests by `METHOD route status`, e.g. `PUT /resource_providers/{uuid}/inventories 409`. */
export class RequestCounter {
  private readonly counts = new Map<string, number>();
  add(method: string, route: string, status: number | 'error'): void {
    const key = `${method} ${route} ${status}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
  snapshot(): ReadonlyMap<string, number> {
    return new Map(this.counts);
  }
  /** Total requests, optionally only those whose method matches. */
  total(filter?: (method: string, route: string, status: string) => boolean): number {
    let n = 0;
    for (const [key, count] of this.counts) {
      const [method = '', route = '', status = ''] = key.split(' ');
      if (!filter || filter(method, route, status)) n += count;
    }
    return n;
  }
  writes(): number {
    return this.total((m) => m !== 'GET');
  }
  reads(): number {
    return this.total((m) => m === 'GET');
  }
  reset(): void {
    this.counts.clear();
  }
}

const UUID_SEGMENT = /\/[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}(?=\/|$)/g;

/** The route of a path, for counting: uuids and names become placeholders, the query is dropped. */
export function routeOf(path: string): string {
  const bare = path.split('?')[0] ?? path;
  return bare
    .replace(UUID_SEGMENT, '/{uuid}')
    .replace(/^\/(traits|resource_classes)\/[^/]+$/, '/$1/{name}')
    .replace(/\/inventories\/[^/]+$/, '/inventories/{rc}');
}

export interface PlacementHttpOptions {
  readonly auth: AuthProvider;
  readonly timeoutMs?: number;
  /** CA bundle (PEM file) for https endpoints. */
  readonly cafile?: string;
  /** Attempts per request for retryable failures (including the first). */
  readonly attempts?: number;
  readonly backoff?: BackoffPolicy;
  readonly clock?: Clock;
  readonly counter?: RequestCounter;
  /** Replaces the node:http transport (tests may inject a fake; nock intercepts either way). */
  readonly transport?: HttpTransport;
  /** Told of every answer (or failure to get one) and every generation conflict: for metrics. */
  readonly observer?: PlacementObserver;
}

export interface PlacementObserver {
  request(method: string, route: string, status: number | 'error', seconds: number): void;
  conflict(kind: 'provider' | 'consumer'): void;
}

const REFUSED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/** Sends requests to Placement. Safe for concurrent use; holds no state but the counter. */
export class PlacementHttp {
  readonly counter: RequestCounter;
  private readonly http: HttpTransport;
  private readonly auth: AuthProvider;
  private readonly attempts: number;
  private readonly backoff: BackoffPolicy;
  private readonly clock: Clock;
  private readonly observer: PlacementObserver | undefined;

  constructor(opts: PlacementHttpOptions) {
    this.observer = opts.observer;
    this.auth = opts.auth;
    this.counter = opts.counter ?? new RequestCounter();
    this.attempts = Math.max(1, opts.attempts ?? 4);
    this.backoff = opts.backoff ?? { initialMs: 200, maxMs: 2000 };
    this.clock = opts.clock ?? systemClock;
    this.http =
      opts.transport ??
      new NodeHttpTransport({ timeoutMs: opts.timeoutMs ?? 30000, ...(opts.cafile ? { ca: readFileSync(opts.cafile) } : {}) });
  }

  /** The endpoint requests go to. @throws PlacementAuthError when it cannot be resolved. */
  endpoint(): Promise<string> {
    return this.auth.endpoint();
  }

  /**
   * Sends one request, retrying as its `retry` mode allows.
   * @throws a PlacementError subclass for every failure (never a transport error).
   */
  async request<T = unknown>(req: PlacementRequest): Promise<PlacementResponse<T>> {
    const route = routeOf(req.path);
    let reauthenticated = false;
    for (let attempt = 1; ; attempt++) {
      const base = await authStep(() => this.auth.endpoint());
      const headers: Record<string, string> = { Accept: 'application/json' };
      if (req.microversion) headers['OpenStack-API-Version'] = `placement ${req.microversion}`;
      if (!req.anonymous) headers['X-Auth-Token'] = await authStep(() => this.auth.token());
      headers['X-OpenStack-Request-ID'] = req.globalRequestId ?? `req-${randomUUID()}`;
      if (req.body !== undefined) headers['Content-Type'] = 'application/json';
      const info: PlacementErrorInfo = { method: req.method, path: req.path };
      let failure: PlacementError;
      const started = process.hrtime.bigint();
      const seconds = (): number => Number(process.hrtime.bigint() - started) / 1e9;
      try {
        const res = await this.http.send({
          method: req.method,
          url: `${base.replace(/\/+$/, '')}${req.path}`,
          headers,
          ...(req.body === undefined ? {} : { body: JSON.stringify(req.body) }),
        });
        this.counter.add(req.method, route, res.status);
        this.observer?.request(req.method, route, res.status, seconds());
        const requestId = headerOf(res.headers, 'openstack-request-id') ?? headerOf(res.headers, 'x-openstack-request-id');
        const ok = req.ok ? req.ok.includes(res.status) : res.status >= 200 && res.status < 300;
        if (ok) return { status: res.status, data: res.data as T, requestId };
        failure = errorFromResponse(req.method, req.path, res.status, res.data, requestId);
        if (failure instanceof ProviderGenerationConflictError) this.observer?.conflict('provider');
        else if (failure instanceof ConsumerGenerationConflictError) this.observer?.conflict('consumer');
        if (res.status === 401 && !reauthenticated && !req.anonymous) {
          // A keystone token can be revoked or expire early: fetch a new one once.
          this.auth.invalidate();
          reauthenticated = true;
          attempt--;
          continue;
        }
        if (!(res.status >= 500 && req.retry !== 'refused-only' && attempt < this.attempts)) throw failure;
      } catch (e) {
        if (e instanceof PlacementError) throw e;
        const code = e instanceof TransportError ? e.code : '';
        this.counter.add(req.method, route, 'error');
        this.observer?.request(req.method, route, 'error', seconds());
        const tls = isTlsFailure(code);
        const reason = `${e instanceof Error ? e.message : String(e)}${tls ? ' (check [placement] cafile)' : ''}`;
        failure = new PlacementUnavailableError(`${req.method} ${base}${req.path}: ${reason}`, info, { cause: e });
        // A certificate that does not verify will not verify on the next try either.
        const retryable = !tls && (REFUSED.has(code) || req.retry !== 'refused-only');
        if (!retryable || attempt >= this.attempts) throw failure;
      }
      await this.clock.sleep(backoffDelay(attempt, this.backoff));
    }
  }
}

/** Runs an auth step; keystone not answering (no reply, or 5xx) becomes PlacementUnavailableError. */
async function authStep<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (e) {
    const noAnswer = e instanceof PlacementAuthError && (e.cause instanceof TransportError || (e.status ?? 0) >= 500);
    if (!noAnswer) throw e;
    throw new PlacementUnavailableError(e.message, { method: e.method, path: e.path, ...(e.status !== undefined ? { status: e.status } : {}) }, { cause: e });
  }
}

function headerOf(headers: unknown, name: string): string | undefined {
  if (typeof headers !== 'object' || headers === null) return undefined;
  const v = (headers as Record<string, unknown>)[name];
  return typeof v === 'string' ? v : undefined;
}
