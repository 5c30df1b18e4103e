/**
 * The ways a claim can be refused or fail, one class each, so flows and the RPC layer branch on
 * types: the host has no room, the claim breaks an inventory rule, a scheduler's claim is not the
 * flavor's or not on this host, someone else changed the consumer, the flavor's extra specs are
 * malformed, or Placement stayed unavailable past the operation's deadline. Placement's own
 * failures keep their classes (`../placement/errors.ts`).
 */

/** The host cannot take the request, as far as this agent can tell. */
export class InsufficientResourcesError extends Error {
  constructor(
    readonly provider: string,
    readonly resourceClass: string,
    readonly requested: number,
    readonly free: number,
  ) {
    super(`not enough ${resourceClass} on provider ${provider}: ${requested} requested, ${free} free`);
    this.name = 'InsufficientResourcesError';
  }
}

/** A claim's resources do not fit the provider's inventory rules (class missing, min/max/step). */
export class InvalidClaimError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidClaimError';
  }
}

/** A scheduler claim that is not on this host or does not match the flavor. */
export class ClaimMismatchError extends Error {
  constructor(readonly consumer: string, message: string) {
    super(message);
    this.name = 'ClaimMismatchError';
  }
}

/** Someone else changed the consumer; the operation fails (nova's AllocationMoveFailed / update conflict). */
export class AllocationConflictError extends Error {
  constructor(readonly consumer: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AllocationConflictError';
  }
}

/**
 * A flavor extra spec the request cannot be built from; the message names
 * `flavor.extra_specs.<key>`, the value, and the form expected.
 */
export class InvalidExtraSpecError extends Error {
  constructor(
    readonly key: string,
    readonly value: unknown,
    readonly expected: string,
  ) {
    super(`flavor.extra_specs.${key} = ${JSON.stringify(value)}: expected ${expected}`);
    this.name = 'InvalidExtraSpecError';
  }
}

/**
 * Placement stayed unreachable (or answered 5xx) for the whole `[placement] retry_deadline` of an
 * operation; `cause` is the last failure. Not a refusal: nothing says the request was wrong.
 */
export class PlacementOutageError extends Error {
  constructor(
    readonly operation: string,
    readonly elapsedMs: number,
    readonly deadlineMs: number,
    cause: Error,
  ) {
    super(`Placement unavailable for ${Math.round(elapsedMs / 1000)} s during ${operation} (retry_deadline ${Math.round(deadlineMs / 1000)} s): ${cause.message}`, { cause });
    this.name = 'PlacementOutageError';
  }
}
