/**
 * The row type of the methods the agent serves on nova's compute topic. A row declares a method
 * once: its wire name, namespace and versions, its arguments (nova's names, each with its decoder;
 * a required one must be sent, an optional one gets a default), whether it is journaled before the
 * request is acknowledged, the instance requests are ordered by, and a handler taking the decoded
 * arguments.
 *
 * Every way a row runs goes through its decoders: on the RPC dispatcher (`register.ts`: decoded on
 * arrival, before the request is journaled; an unknown or malformed argument is refused as Python
 * refuses a bad call), replayed from the journal at start-up, or routed in-process (`bindMethod`).
 *
 * Not here: the rows (`methods.ts` for instances, `adapters/host-methods.ts` for the host).
 */
import { decodeArgs, type ArgsOf, type ArgsSpec } from '../rpc/endpoint/args';
import type { RequestContext } from './ports';

/** nova's compute RPC topic (`RPC_TOPIC` in nova `compute/rpcapi.py`). */
export const COMPUTE_TOPIC = 'compute';

/** The versions a method accepts; `min` also names the major it belongs to. */
export interface MethodVersions {
  readonly min: string;
  readonly max?: string;
}

/**
 * nova's compute RPC API (nova `compute/rpcapi.py`): the default namespace, major 6, served at 6.4
 * (2025.1; Zed sends up to 6.1). 6.1 to 6.4 changed rebuild_instance (reimage_boot_volume and
 * target_state, unread), remove_volume_connection (delete_attachment, read: absent means false, as
 * an older caller meant) and added allow_share and deny_share (not served), so every row takes any
 * 6.x up to 6.4: nova sends a method at the version it was last changed in, and oslo lets a server
 * at 6.4 take any 6.y <= 6.4.
 */
export const NOVA_COMPUTE_API = { namespace: null, versions: { min: '6.0', max: '6.4' } } as const;

/** What a handler gets besides its decoded arguments. */
export interface MethodCall {
  readonly context: RequestContext;
  /** The arguments as sent, before decoding (nova mode saves the NovaObject primitives it got). */
  readonly sent: Readonly<Record<string, unknown>>;
}

/**
 * One served method. `S` types the handler's arguments; the table holds rows as
 * `ComputeMethod` (any spec), which is sound because every run decodes with the row's own `args`.
 */
export interface ComputeMethod<S extends ArgsSpec = ArgsSpec> {
  readonly name: string;
  /** null: nova's compute API; otherwise the namespace of the target (the agent's own, `baseapi`). */
  readonly namespace: string | null;
  readonly versions: MethodVersions;
  /** Recorded in the request journal before acknowledgement; read-only methods are not. */
  readonly journaled: boolean;
  readonly args: S;
  /** The instance uuid requests are ordered by; requests without one run unordered. */
  key?(args: ArgsOf<S>): string | undefined;
  handle(args: ArgsOf<S>, call: MethodCall): Promise<unknown>;
}

/** Declares a row, typing its handler by its argument decoders. */
export function method<S extends ArgsSpec>(row: ComputeMethod<S>): ComputeMethod<S> {
  return row;
}

/** The ordering key of an instance method: the uuid of its decoded `instance` argument. */
export function instanceKey(args: Readonly<Record<string, unknown>>): string | undefined {
  const inst = args.instance;
  if (typeof inst !== 'object' || inst === null) return undefined;
  const uuid = (inst as { readonly uuid?: unknown }).uuid;
  return typeof uuid === 'string' ? uuid : undefined;
}

/** A request bound to its row: decoded, ready to run. */
export interface BoundMethod {
  readonly key: string | undefined;
  run(): Promise<unknown>;
}

/**
 * Decodes `sent` with the row's decoders, as the dispatcher does on arrival.
 * @throws InvalidArgumentsError naming every missing, unknown or malformed argument
 */
export function bindMethod(row: ComputeMethod, sent: Readonly<Record<string, unknown>>, context: RequestContext): BoundMethod {
  const args = decodeArgs(row.name, row.args, sent);
  return { key: row.key?.(args), run: () => row.handle(args, { context, sent }) };
}
