/**
 * One error class per way a Placement call can fail, so callers branch on types, not on strings.
 *
 * Placement (microversion >= 1.23) answers errors as `{"errors": [{status, title, detail, code,
 * request_id}]}`. The `code` picks the class; a `placement.concurrent_update` whose detail speaks of
 * a consumer generation becomes `ConsumerGenerationConflictError` (nova tells them apart the same
 * way, by the detail text), because the two need opposite handling: a provider conflict is
 * refreshed and retried, a consumer conflict fails the operation.
 */

export interface PlacementErrorInfo {
  readonly method: string;
  readonly path: string;
  readonly status?: number;
  readonly code?: string;
  readonly detail?: string;
  readonly requestId?: string;
}

/** Base class: every failure of a Placement call. */
export class PlacementError extends Error {
  readonly method: string;
  readonly path: string;
  readonly status: number | undefined;
  readonly code: string | undefined;
  readonly detail: string | undefined;
  readonly requestId: string | undefined;

  constructor(message: string, info: PlacementErrorInfo, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.method = info.method;
    this.path = info.path;
    this.status = info.status;
    this.code = info.code;
    this.detail = info.detail;
    this.requestId = info.requestId;
  }
}

/** No usable answer: connection refused/reset, timeout, 5xx after the allowed retries, or a malformed 2xx. */
export class PlacementUnavailableError extends PlacementError {}

/** Where a malformed answer went wrong. */
export interface MalformedInfo extends PlacementErrorInfo {
  /** The request as a route template, e.g. `GET /resource_providers/{uuid}/inventories`. */
  readonly route: string;
  /** The first field that does not fit, as a path (`inventories.VCPU.total`), or `(body)`. */
  readonly field: string;
  /** What was expected there, e.g. `expected number, received string`. */
  readonly expected: string;
}

/**
 * A 2xx answer (from Placement or from keystone) whose body is not the shape the agent reads: a
 * proxy's HTML page, a truncated document, a field of the wrong type. It is an outage, not a
 * refusal: like a 5xx it says nothing about the request, so it is a `PlacementUnavailableError`
 * and every caller that waits out an outage (a sync cycle, a claim operation, startup) retries it.
 */
export class MalformedResponseError extends PlacementUnavailableError {
  readonly route: string;
  readonly field: string;
  readonly expected: string;

  constructor(info: MalformedInfo, options?: { cause?: unknown }) {
    const status = info.status === undefined ? '' : ` ${info.status}`;
    super(`${info.route} answered${status} with a malformed body at ${info.field}: ${info.expected}`, info, options);
    this.route = info.route;
    this.field = info.field;
    this.expected = info.expected;
  }
}

/**
 * `{ route, field }` of the first `MalformedResponseError` in `e`'s cause chain, to spread into a
 * log line; `{}` when there is none.
 */
export function malformedFields(e: unknown): { readonly route?: string; readonly field?: string } {
  for (let x: unknown = e; x instanceof Error; x = x.cause) if (x instanceof MalformedResponseError) return { route: x.route, field: x.field };
  return {};
}
/** 401/403: the token was refused, or the credentials cannot get one. */
export class PlacementAuthError extends PlacementError {}
/** 406 or a version document below what the agent needs. */
export class PlacementVersionError extends PlacementError {}
/** 404. */
export class PlacementNotFoundError extends PlacementError {}
/** 400: the request was malformed (unknown resource class or trait, schema violation). */
export class PlacementBadRequestError extends PlacementError {}
/** 409 placement.concurrent_update for a resource provider generation. */
export class ProviderGenerationConflictError extends PlacementError {}
/** 409 placement.concurrent_update for a consumer generation. Never retried blindly. */
export class ConsumerGenerationConflictError extends PlacementError {}
/** 409 placement.inventory.inuse: removing a class that still has allocations. */
export class InventoryInUseError extends PlacementError {}
/** 409 placement.resource_provider.inuse: deleting a provider that has allocations. */
export class ProviderInUseError extends PlacementError {}
/** 409 placement.resource_provider.cannot_delete_parent: delete children first. */
export class CannotDeleteParentError extends PlacementError {}
/** 409 placement.duplicate_name: a provider with this name or uuid exists. */
export class DuplicateNameError extends PlacementError {}
/** 409 placement.undefined_code: capacity exceeded, min/max/step violated, missing inventory. */
export class PlacementConflictError extends PlacementError {}
/** Any other unexpected status. */
export class PlacementUnexpectedError extends PlacementError {}

interface ErrorBody {
  status?: unknown;
  code?: unknown;
  detail?: unknown;
  request_id?: unknown;
  title?: unknown;
}

/** The first entry of an `errors[]` body, if the body has that shape. */
export function firstError(body: unknown): ErrorBody | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const errors = (body as { errors?: unknown }).errors;
  if (!Array.isArray(errors) || errors.length === 0) return undefined;
  const first: unknown = errors[0];
  return typeof first === 'object' && first !== null ? first : undefined;
}

function clean(detail: string): string {
  return detail.replace(/\s+/g, ' ').replace(/^There was a conflict when trying to complete your request\. ?/, '').trim();
}

/**
 * Below microversion 1.23 Placement sends no `code`; the detail text still says what happened
 * (these are the texts Placement 8.0 writes), so older deployments get the same classes.
 */
function codeFromDetail(detail: string): string | undefined {
  if (/generation conflict|generation already changed/i.test(detail)) return 'placement.concurrent_update';
  if (/Unable to delete parent resource provider/i.test(detail)) return 'placement.resource_provider.cannot_delete_parent';
  if (/Resource provider has allocations/i.test(detail)) return 'placement.resource_provider.inuse';
  if (/Inventory for .* in use/i.test(detail)) return 'placement.inventory.inuse';
  if (/Conflicting resource provider (name|uuid)/i.test(detail)) return 'placement.duplicate_name';
  return undefined;
}

/** Maps an HTTP error answer to its class. */
export function errorFromResponse(method: string, path: string, status: number, body: unknown, requestId?: string): PlacementError {
  const e = firstError(body);
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const rawDetail =
    typeof e?.detail === 'string' ? e.detail : typeof body === 'string' ? body : body === undefined ? '' : JSON.stringify(body);
  const detail = clean(rawDetail).slice(0, 500);
  const info: PlacementErrorInfo = {
    method,
    path,
    status,
    detail,
    ...(code !== undefined ? { code } : {}),
    ...(requestId !== undefined ? { requestId } : typeof e?.request_id === 'string' ? { requestId: e.request_id } : {}),
  };
  const msg = `${method} ${path}: ${status}${code ? ` ${code}` : ''}${detail ? `: ${detail}` : ''}`;
  if (status === 401 || status === 403) return new PlacementAuthError(msg, info);
  if (status === 404) return new PlacementNotFoundError(msg, info);
  if (status === 406) return new PlacementVersionError(msg, info);
  if (status === 400) return new PlacementBadRequestError(msg, info);
  if (status === 409) {
    switch (code ?? codeFromDetail(rawDetail)) {
      case 'placement.concurrent_update':
        return /consumer generation conflict/i.test(rawDetail)
          ? new ConsumerGenerationConflictError(msg, info)
          : new ProviderGenerationConflictError(msg, info);
      case 'placement.inventory.inuse':
        return new InventoryInUseError(msg, info);
      case 'placement.resource_provider.inuse':
        return new ProviderInUseError(msg, info);
      case 'placement.resource_provider.cannot_delete_parent':
        return new CannotDeleteParentError(msg, info);
      case 'placement.duplicate_name':
        return new DuplicateNameError(msg, info);
      default:
        return new PlacementConflictError(msg, info);
    }
  }
  if (status >= 500) return new PlacementUnavailableError(msg, info);
  return new PlacementUnexpectedError(msg, info);
}
