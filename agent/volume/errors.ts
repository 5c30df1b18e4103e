/**
 * Errors of the Cinder client, one class per failure. Each names the request
 * (`PUT /v3/attachments/<id>`), so a fault says what failed and where.
 */

/** Base class of every Cinder failure. */
export class CinderError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CinderError';
  }
}

/** 404: no such volume or attachment (or not visible to this user). */
export class CinderNotFoundError extends CinderError {
  constructor(readonly request: string, detail = '') {
    super(`${request}: not found in Cinder (404)${detail}`);
    this.name = 'CinderNotFoundError';
  }
}

/** 409: the volume is in a state that refuses the request (attached elsewhere, still in use). */
export class CinderConflictError extends CinderError {
  constructor(readonly request: string, detail: string) {
    super(`${request}: Cinder refused it as a conflict (409)${detail}`);
    this.name = 'CinderConflictError';
  }
}

/** A definite refusal other than 404/409 (400 bad request, 403 policy, 413 quota): retrying cannot help. */
export class CinderRefusedError extends CinderError {
  constructor(readonly request: string, readonly status: number, detail: string) {
    super(`${request}: Cinder refused it (${status})${detail}`);
    this.name = 'CinderRefusedError';
  }
}

/** No answer (refused, reset, timed out) or a 5xx, after every retry. */
export class CinderUnavailableError extends CinderError {
  constructor(readonly request: string, detail: string, options?: { cause?: unknown }) {
    super(`${request}: Cinder unavailable: ${detail}`, options);
    this.name = 'CinderUnavailableError';
  }
}

/** 401 after a fresh token, or no token or endpoint could be had. */
export class CinderAuthError extends CinderError {
  constructor(readonly request: string, detail: string, options?: { cause?: unknown }) {
    super(`${request}: ${detail}`, options);
    this.name = 'CinderAuthError';
  }
}

/** A 2xx whose body does not have the shape the agent reads. */
export class CinderResponseError extends CinderError {
  constructor(readonly request: string, detail: string) {
    super(`${request}: unexpected answer from Cinder: ${detail}`);
    this.name = 'CinderResponseError';
  }
}

/**
 * A volume of a build could not be made ready: the mapping (by volume, or by what it was to be
 * made from) and why. `cause` is the Cinder failure when there was one.
 */
export class VolumeSetupError extends CinderError {
  constructor(readonly volume: string, reason: string, options?: { cause?: unknown }) {
    super(`volume ${volume}: ${reason}`, options);
    this.name = 'VolumeSetupError';
  }
}
