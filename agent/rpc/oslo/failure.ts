/**
 * The `failure` of an oslo.messaging reply: a JSON string of `{class, module, message, tb, args,
 * kwargs}` (oslo `_drivers/common.py` serialize_remote_exception). The caller rebuilds the
 * exception only when `module` is `builtins` or one it allows (nova allows `nova.exception`);
 * otherwise it raises `RemoteError(class, message)`.
 *
 * Errors that know their wire form implement `RemoteSerializable`; anything else a handler throws
 * is sent under module `compute_agent`, which no caller imports, so it arrives as a RemoteError
 * carrying our message. Not here: the error classes themselves (`errors.ts`).
 */

/** The decoded failure object, field for field. */
export interface RemoteFailure {
  readonly className: string;
  readonly module: string;
  readonly message: string;
  readonly tb: readonly string[];
  readonly args: readonly unknown[];
  readonly kwargs: Readonly<Record<string, unknown>>;
}

/** An error that chooses how a remote caller sees it. */
export interface RemoteSerializable {
  toRemoteFailure(): RemoteFailure;
}

/** Module name for errors without a wire form of their own. */
export const AGENT_MODULE = 'compute_agent';
const MAX_TB_LINES = 30;

export function isRemoteSerializable(e: unknown): e is RemoteSerializable {
  return typeof e === 'object' && e !== null && typeof (e as Partial<RemoteSerializable>).toRemoteFailure === 'function';
}

/** Traceback lines in Python's shape (each ends with a newline), from an error's stack. */
function stackLines(err: Error): string[] {
  const frames = (err.stack ?? '')
    .split('\n')
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => l.startsWith('at '))
    .slice(0, MAX_TB_LINES)
    .map((l) => `  ${l}\n`);
  return ['Traceback (compute-agent, most recent call first):\n', ...frames, `${err.name}: ${err.message}\n`];
}

/** The failure for whatever a handler threw. */
export function failureFromError(err: unknown): RemoteFailure {
  if (isRemoteSerializable(err)) return err.toRemoteFailure();
  if (err instanceof Error) {
    return { className: err.name || 'Error', module: AGENT_MODULE, message: err.message, tb: stackLines(err), args: [err.message], kwargs: {} };
  }
  const message = String(err);
  return { className: 'Error', module: AGENT_MODULE, message, tb: [`Error: ${message}\n`], args: [message], kwargs: {} };
}

/** The `failure` string, keys in oslo's order. */
export function encodeFailure(f: RemoteFailure): string {
  return JSON.stringify({ class: f.className, module: f.module, message: f.message, tb: f.tb, args: f.args, kwargs: f.kwargs });
}

const str = (v: unknown, fallback: string): string => (typeof v === 'string' ? v : fallback);

/**
 * Parses a `failure` string leniently, as oslo does: missing fields get defaults, a `_Remote`
 * suffix (a re-raised remote error) is stripped. Undefined when it is not a JSON object.
 */
export function decodeFailure(text: string): RemoteFailure | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const o = raw as Record<string, unknown>;
  let className = str(o.class, 'Exception');
  let module = str(o.module, '');
  if (className.endsWith('_Remote') && module.endsWith('_Remote')) {
    className = className.slice(0, -'_Remote'.length);
    module = module.slice(0, -'_Remote'.length);
  }
  const tb = Array.isArray(o.tb) ? o.tb.filter((l): l is string => typeof l === 'string') : [];
  const args = Array.isArray(o.args) ? o.args : [];
  const kwargs = typeof o.kwargs === 'object' && o.kwargs !== null && !Array.isArray(o.kwargs) ? (o.kwargs as Record<string, unknown>) : {};
  return { className, module, message: str(o.message, ''), tb, args, kwargs };
}
