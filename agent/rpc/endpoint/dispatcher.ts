/**
 * The dispatcher: methods registered by name, each with its argument decoders, the versions it
 * accepts, whether it must be journaled before the request is acknowledged, and the key (an
 * instance uuid) that orders requests for one instance. Whoever wires the agent registers the
 * methods it serves (the compute method table) and hands the dispatcher to the RPC server.
 *
 * Version rules follow oslo's dispatcher (`rpc/dispatcher.py`): the served version of a namespace
 * (and major) is the highest version registered in it; a request with a different major or a
 * higher minor gets `UnsupportedVersion`, an unknown method `NoSuchMethod`. On top of oslo, a
 * method may narrow the versions it accepts. Resolution is synchronous so the server can order
 * requests at arrival.
 *
 * Not here: delivery, acknowledgement, replies (`server.ts`).
 */
import { decodeArgs, type ArgsOf, type ArgsSpec } from './args';
import { NoSuchMethodError, UnsupportedVersionError } from '../oslo/errors';
import type { RpcContext, RpcRequest } from '../oslo/messages';
import { compareVersions, formatVersion, isCompatible, parseVersion, version, type RpcVersion } from '../oslo/versions';

/** What a handler knows about the request it serves, besides its arguments. */
export interface CallInfo {
  readonly method: string;
  readonly version: string;
  readonly context: RpcContext;
  /**
   * The arguments as sent, before decoding: for a handler that must pass an object back unchanged
   * (nova saves the NovaObject primitives it sent).
   */
  readonly args: Readonly<Record<string, unknown>>;
  /** The request's `_unique_id` (or a local id when the sender gave none). */
  readonly uniqueId: string;
  /** True for a call (the result is sent back), false for a cast. */
  readonly isCall: boolean;
  /** Aborted when the agent stops and the graceful shutdown timeout ran out. */
  readonly signal: AbortSignal;
}

/** One RPC method. `S` is its argument spec, `R` its (JSON-serializable) result. */
export interface MethodRegistration<S extends ArgsSpec, R> {
  readonly name: string;
  /** oslo Target namespace; null (the default) for the compute API. */
  readonly namespace?: string | null;
  /**
   * Accepted request versions. `min` also says which major the method belongs to; the highest
   * `max ?? min` of a namespace is the version the agent serves there. A missing `max` accepts
   * everything up to the served version.
   */
  readonly versions: { readonly min: string; readonly max?: string };
  readonly args: S;
  /**
   * The instance uuid the request acts on, from the decoded arguments. Requests with the same key
   * run one at a time in arrival order; others run concurrently.
   */
  readonly orderingKey?: (args: ArgsOf<S>) => string | undefined;
  /**
   * Record the request in the RequestJournal before acknowledging it (default true). Read-only
   * methods set false: a lost one is simply asked again.
   */
  readonly journaled?: boolean;
  /** Runs the method. A thrown `RemoteSerializable` error (e.g. `NovaError`) reaches the caller typed. */
  readonly handler: (args: ArgsOf<S>, call: CallInfo) => Promise<R>;
}

/** A request bound to its method, ready to run. */
export interface ResolvedRequest {
  readonly method: string;
  readonly orderingKey: string | undefined;
  readonly journaled: boolean;
  invoke(call: CallInfo): Promise<unknown>;
}

interface Entry {
  readonly min: RpcVersion;
  readonly max: RpcVersion | undefined;
  readonly journaled: boolean;
  resolve(args: Readonly<Record<string, unknown>>, method: string): { key: string | undefined; invoke: (call: CallInfo) => Promise<unknown> };
}

interface Target {
  served: RpcVersion;
  readonly methods: Map<string, Entry>;
}

/** Registration was refused (a duplicate name, a private name, a malformed version). */
export class RegistrationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RegistrationError';
  }
}

const nsKey = (namespace: string | null, major: number): string => `${namespace ?? ''}\u0000${major}`;

export class Dispatcher {
  private readonly targets = new Map<string, Target>();

  /** @throws RegistrationError */
  register<S extends ArgsSpec, R>(reg: MethodRegistration<S, R>): this {
    if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(reg.name)) {
      throw new RegistrationError(`method name ${JSON.stringify(reg.name)} is not servable (letters, digits, _; no leading _)`);
    }
    const min = parseVersion(reg.versions.min);
    const max = reg.versions.max === undefined ? undefined : parseVersion(reg.versions.max);
    if (!min || (reg.versions.max !== undefined && !max)) throw new RegistrationError(`${reg.name}: malformed version range`);
    if (max && (max.major !== min.major || compareVersions(max, min) < 0)) {
      throw new RegistrationError(`${reg.name}: version range ${reg.versions.min}..${reg.versions.max} is empty or spans majors`);
    }
    const namespace = reg.namespace ?? null;
    const key = nsKey(namespace, min.major);
    const target = this.targets.get(key) ?? { served: min, methods: new Map<string, Entry>() };
    if (target.methods.has(reg.name)) throw new RegistrationError(`${reg.name} is already registered`);
    const top = max ?? min;
    if (compareVersions(top, target.served) > 0) target.served = top;
    target.methods.set(reg.name, {
      min,
      max,
      journaled: reg.journaled ?? true,
      resolve: (raw, method) => {
        const args = decodeArgs(method, reg.args, raw);
        return { key: reg.orderingKey?.(args), invoke: (call) => reg.handler(args, call) };
      },
    });
    this.targets.set(key, target);
    return this;
  }

  /** The version served in `namespace` for `major`, e.g. "6.0"; undefined when nothing is registered. */
  servedVersion(namespace: string | null = null, major = 6): string | undefined {
    const t = this.targets.get(nsKey(namespace, major));
    return t ? formatVersion(t.served) : undefined;
  }

  /**
   * Binds a request to its method and decodes its arguments.
   * @throws UnsupportedVersionError, NoSuchMethodError, InvalidArgumentsError
   */
  resolve(req: RpcRequest): ResolvedRequest {
    const requested = parseVersion(req.version) ?? version('1.0');
    const target = this.targets.get(nsKey(req.namespace, requested.major));
    if (!target || !isCompatible(target.served, requested)) throw new UnsupportedVersionError(req.version, req.method);
    const entry = target.methods.get(req.method);
    if (!entry) throw new NoSuchMethodError(req.method);
    if (compareVersions(requested, entry.min) < 0 || (entry.max && compareVersions(requested, entry.max) > 0)) {
      throw new UnsupportedVersionError(req.version, req.method);
    }
    const bound = entry.resolve(req.args, req.method);
    return { method: req.method, orderingKey: bound.key, journaled: entry.journaled, invoke: bound.invoke };
  }
}
