/**
 * Errors of the Glance client, one class per failure. All extend `GlanceError` (a `DriverError`),
 * and name the request (`GET /v2/images/<id>`) so a build's fault says what failed.
 */
import { DriverError } from '../errors';

/** Base class of Glance failures. */
export class GlanceError extends DriverError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'GlanceError';
  }
}

/** 404: no such image (or not visible to this user). */
export class GlanceNotFoundError extends GlanceError {
  constructor(readonly request: string) {
    super(`${request}: not found in Glance (404)`);
    this.name = 'GlanceNotFoundError';
  }
}

/** 204 from the data call: the image exists but has no data uploaded. */
export class GlanceNoDataError extends GlanceError {
  constructor(readonly request: string) {
    super(`${request}: the image has no data (204)`);
    this.name = 'GlanceNoDataError';
  }
}

/** No answer (refused, reset, timed out) or a 5xx, after every retry. */
export class GlanceUnavailableError extends GlanceError {
  constructor(readonly request: string, detail: string, options?: { cause?: unknown }) {
    super(`${request}: Glance unavailable: ${detail}`, options);
    this.name = 'GlanceUnavailableError';
  }
}

/** 401/403 after a fresh token, or no token or endpoint could be had. */
export class GlanceAuthError extends GlanceError {
  constructor(readonly request: string, detail: string, options?: { cause?: unknown }) {
    super(`${request}: ${detail}`, options);
    this.name = 'GlanceAuthError';
  }
}

/** An answer the client cannot use: an unexpected status, or a body that does not fit. */
export class GlanceResponseError extends GlanceError {
  constructor(readonly request: string, detail: string, options?: { cause?: unknown }) {
    super(`${request}: ${detail}`, options);
    this.name = 'GlanceResponseError';
  }
}
