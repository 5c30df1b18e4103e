/**
 * Error classes of the RPC layer, one per failure, each with `cause` chaining.
 *
 * Server side: what the dispatcher and decoder answer to a caller (`NoSuchMethodError`,
 * `UnsupportedVersionError`, `InvalidArgumentsError`, `BadMessageError`, `MessageTooLargeError`),
 * and `NovaError`, the base for the typed `nova.exception` errors handlers raise. Their remote
 * form matches what oslo.messaging and nova send (fixtures in `test/fixtures/oslo/`).
 *
 * Client side: `RemoteError` (the callee failed) and `RpcTimeoutError` (no answer in time).
 * Broker-level failures live with the Broker port (`../amqp/broker.ts`).
 */
import type { RemoteFailure, RemoteSerializable } from './failure';

/** Where oslo's dispatcher errors live; callers match on it. */
export const DISPATCHER_MODULE = 'oslo_messaging.rpc.dispatcher';
export const NOVA_EXCEPTION_MODULE = 'nova.exception';

type Opts = { cause?: unknown };

function shortFailure(className: string, module: string, message: string, kwargs: Record<string, unknown> = {}): RemoteFailure {
  const qualified = module === 'builtins' ? className : `${module}.${className}`;
  return { className, module, message, tb: [`${qualified}: ${message}\n`], args: [message], kwargs };
}

/** The method is not served (the version matched). Remote: `NoSuchMethod`. */
export class NoSuchMethodError extends Error implements RemoteSerializable {
  constructor(
    readonly method: string,
    options?: Opts,
  ) {
    super(`Endpoint does not support RPC method ${method}`, options);
    this.name = 'NoSuchMethodError';
  }
  toRemoteFailure(): RemoteFailure {
    return shortFailure('NoSuchMethod', DISPATCHER_MODULE, this.message);
  }
}

/** No served target matches the requested version or namespace. Remote: `UnsupportedVersion`. */
export class UnsupportedVersionError extends Error implements RemoteSerializable {
  constructor(
    readonly requested: string,
    readonly method: string | undefined,
    options?: Opts,
  ) {
    super(`Endpoint does not support RPC version ${requested}${method ? `. Attempted method: ${method}` : ''}`, options);
    this.name = 'UnsupportedVersionError';
  }
  toRemoteFailure(): RemoteFailure {
    return shortFailure('UnsupportedVersion', DISPATCHER_MODULE, this.message);
  }
}

/**
 * The arguments do not fit the method: missing, unexpected, or of the wrong form. Remote:
 * `TypeError` (builtins), which is what Python raises for a bad call, so the caller rebuilds it.
 */
export class InvalidArgumentsError extends Error implements RemoteSerializable {
  constructor(
    readonly method: string,
    readonly problems: readonly string[],
    options?: Opts,
  ) {
    super(`${method}() ${problems.join('; ')}`, options);
    this.name = 'InvalidArgumentsError';
  }
  toRemoteFailure(): RemoteFailure {
    return shortFailure('TypeError', 'builtins', this.message);
  }
}

/** Where a call expects its answer, when a bad message still names it. */
export interface ReplyAddress {
  readonly msgId: string;
  readonly replyQueue: string;
}

/**
 * The body is not a request the agent can decode: not UTF-8 JSON, no envelope, a malformed field.
 * Remote: `ValueError` (builtins). `replyTo` is set when the message still says where to answer.
 */
export class BadMessageError extends Error implements RemoteSerializable {
  constructor(
    readonly reason: string,
    readonly replyTo?: ReplyAddress,
    options?: Opts,
  ) {
    super(`bad RPC message: ${reason}`, options);
    this.name = 'BadMessageError';
  }
  toRemoteFailure(): RemoteFailure {
    return shortFailure('ValueError', 'builtins', this.message);
  }
}

/** The body exceeds `rpc_max_message_bytes`; it was not parsed. Remote: `ValueError`. */
export class MessageTooLargeError extends Error implements RemoteSerializable {
  constructor(
    readonly size: number,
    readonly limit: number,
    readonly replyTo?: ReplyAddress,
    options?: Opts,
  ) {
    super(`RPC message of ${size} bytes exceeds the agent's limit of ${limit} bytes (rpc_max_message_bytes)`, options);
    this.name = 'MessageTooLargeError';
  }
  toRemoteFailure(): RemoteFailure {
    return shortFailure('ValueError', 'builtins', this.message);
  }
}

/**
 * Base of the typed errors nova's conductor recognises (`nova.exception.<className>`): args
 * `[message]`, kwargs = the format kwargs plus `code`, as `NovaException` serializes itself.
 * Example: `new NovaError('InstanceNotFound', `Instance ${uuid} could not be found.`, { instance_id: uuid }, 404)`.
 */
export class NovaError extends Error implements RemoteSerializable {
  constructor(
    readonly className: string,
    message: string,
    readonly kwargs: Readonly<Record<string, unknown>> = {},
    readonly code = 500,
    options?: Opts,
  ) {
    super(message, options);
    this.name = className;
  }
  toRemoteFailure(): RemoteFailure {
    return shortFailure(this.className, NOVA_EXCEPTION_MODULE, this.message, { ...this.kwargs, code: this.code });
  }
}

/** The remote side answered with a failure; fields as it sent them. */
export class RemoteError extends Error {
  readonly className: string;
  readonly module: string;
  readonly remoteMessage: string;
  readonly tb: readonly string[];
  readonly args: readonly unknown[];
  readonly kwargs: Readonly<Record<string, unknown>>;

  constructor(failure: RemoteFailure, options?: Opts) {
    const where = failure.module ? `${failure.module}.${failure.className}` : failure.className;
    super(`${where}: ${failure.message}`, options);
    this.name = 'RemoteError';
    this.className = failure.className;
    this.module = failure.module;
    this.remoteMessage = failure.message;
    this.tb = failure.tb;
    this.args = failure.args;
    this.kwargs = failure.kwargs;
  }
}

/** No reply (or no call-monitor heartbeat) arrived in time. oslo: `MessagingTimeout`. */
export class RpcTimeoutError extends Error {
  constructor(
    readonly method: string,
    readonly msgId: string,
    readonly waitedMs: number,
    /** True when the call-monitor timer (no heartbeat) expired, not the overall timeout. */
    readonly monitor: boolean,
    options?: Opts,
  ) {
    super(
      `timed out after ${waitedMs} ms waiting for ${monitor ? 'a heartbeat or ' : ''}the reply to ${method} (msg_id ${msgId})`,
      options,
    );
    this.name = 'RpcTimeoutError';
  }
}
