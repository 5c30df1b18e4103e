/**
 * Argument decoders for RPC methods. oslo passes `args` as keyword arguments and Python binds them
 * by name: a missing required argument or an unknown one is a `TypeError`. The agent does the same
 * and also checks each value's form, so a handler receives typed arguments or is never called.
 *
 * Each decoder states the form it expects ("a string", "an Instance object"); `decodeArgs`
 * collects every problem into one `InvalidArgumentsError` naming the arguments. A decoder built
 * with `arg.from` may also say which fields of the value were wrong (`arg.refuse`). Not here: what
 * the objects mean (the method tables build their decoders on these, with `arg.from`).
 */
import { InvalidArgumentsError } from '../oslo/errors';

const INVALID: unique symbol = Symbol('invalid');

/** One wrong field inside a value: its path below the argument and what was expected there. */
export interface ArgIssue {
  readonly path: readonly (string | number)[];
  readonly problem: string;
}

/** A value a decoder refused, with the wrong fields when the decoder knows them. */
export interface Invalid {
  readonly [INVALID]: true;
  readonly issues: readonly ArgIssue[];
}

const REFUSED: Invalid = { [INVALID]: true, issues: [] };

/** Whether a decoder refused the value. */
export function isInvalid(v: unknown): v is Invalid {
  return typeof v === 'object' && v !== null && INVALID in v;
}

/** Turns one wire value into T, or refuses it (`Invalid`). */
export interface ArgDecoder<T> {
  readonly expected: string;
  /** When set, the argument may be absent and decodes to this value. */
  readonly absent?: { readonly value: T };
  decode(value: unknown): T | Invalid;
}

function decoder<T>(expected: string, decode: (v: unknown) => T | Invalid): ArgDecoder<T> {
  return { expected, decode };
}

/** A NovaObject primitive (`nova_object.name`, `.namespace`, `.version`, `.data`, `.changes`). */
export interface NovaObjectPrimitive {
  readonly 'nova_object.name': string;
  readonly 'nova_object.namespace': string;
  readonly 'nova_object.version': string;
  readonly 'nova_object.data': Readonly<Record<string, unknown>>;
  readonly 'nova_object.changes'?: readonly string[];
}

/** A refusal naming the wrong fields (none: the value as a whole is of the wrong form). */
function refuse(issues: readonly ArgIssue[] = []): Invalid {
  return issues.length === 0 ? REFUSED : { [INVALID]: true, issues };
}

const an = (word: string): string => `${/^[aeiou]/i.test(word) ? 'an' : 'a'} ${word}`;
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const UUID = /^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$/;

export const arg = {
  /**
   * A decoder from a function that returns the decoded value or `arg.refuse(issues)`: how a method
   * table turns its own object decoders (NovaObject primitives, plain JSON) into argument
   * decoders. `expected` names the form in the refusal.
   */
  from: <T>(expected: string, decode: (v: unknown) => T | Invalid): ArgDecoder<T> => decoder(expected, decode),
  /** The refusal an `arg.from` function returns; `issues` name the wrong fields, paths below the argument. */
  refuse,
  string: (): ArgDecoder<string> => decoder('a string', (v) => (typeof v === 'string' ? v : REFUSED)),
  bool: (): ArgDecoder<boolean> => decoder('true or false', (v) => (typeof v === 'boolean' ? v : REFUSED)),
  int: (min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): ArgDecoder<number> =>
    decoder(`an integer in [${min}, ${max}]`, (v) => (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : REFUSED)),
  number: (): ArgDecoder<number> => decoder('a number', (v) => (typeof v === 'number' && Number.isFinite(v) ? v : REFUSED)),
  uuid: (): ArgDecoder<string> => decoder('a UUID string', (v) => (typeof v === 'string' && UUID.test(v) ? v : REFUSED)),
  oneOf: <const C extends readonly string[]>(choices: C): ArgDecoder<C[number]> =>
    decoder(`one of ${choices.map((c) => JSON.stringify(c)).join(', ')}`, (v) =>
      typeof v === 'string' && (choices as readonly string[]).includes(v) ? (v as C[number]) : REFUSED,
    ),
  /** Any JSON object (a dict on the Python side). */
  dict: (): ArgDecoder<Readonly<Record<string, unknown>>> => decoder('an object', (v) => (isRecord(v) ? v : REFUSED)),
  /** A list whose items all decode with `item`. */
  list: <T>(item: ArgDecoder<T>): ArgDecoder<readonly T[]> =>
    decoder(`a list of ${item.expected.replace(/^an? /, '')}s`, (v) => {
      if (!Array.isArray(v)) return REFUSED;
      const out: T[] = [];
      for (const [i, x] of v.entries()) {
        const d = item.decode(x);
        if (isInvalid(d)) return refuse(d.issues.map((issue) => ({ path: [i, ...issue.path], problem: issue.problem })));
        out.push(d);
      }
      return out;
    }),
  /** A NovaObject primitive of class `name` (any version; the handler checks what it reads). */
  novaObject: (name: string): ArgDecoder<NovaObjectPrimitive> =>
    decoder(`${an(name)} object primitive`, (v) =>
      isRecord(v) && v['nova_object.name'] === name && typeof v['nova_object.version'] === 'string' && isRecord(v['nova_object.data'])
        ? (v as unknown as NovaObjectPrimitive)
        : REFUSED,
    ),
  /** Any JSON value, unchecked. */
  any: (): ArgDecoder<unknown> => decoder('any value', (v) => v),
  /** `inner`, or null. */
  nullable: <T>(inner: ArgDecoder<T>): ArgDecoder<T | null> =>
    decoder(`${inner.expected} or null`, (v) => (v === null ? null : inner.decode(v))),
  /** `inner`; when the argument is absent it decodes to `fallback`. */
  optional: <T, D = undefined>(inner: ArgDecoder<T>, fallback?: D): ArgDecoder<T | D> => ({
    expected: inner.expected,
    absent: { value: fallback as D },
    decode: (v) => inner.decode(v),
  }),
};

/** A method's arguments: name to decoder. */
export type ArgsSpec = Readonly<Record<string, ArgDecoder<unknown>>>;
/** The decoded arguments a handler receives. */
export type ArgsOf<S extends ArgsSpec> = { readonly [K in keyof S]: S[K] extends ArgDecoder<infer T> ? T : never };

function shape(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (isRecord(v)) return typeof v['nova_object.name'] === 'string' ? `${an(v['nova_object.name'])} object` : 'an object';
  if (typeof v === 'string') return v.length > 40 ? `a string of ${v.length} characters` : `the string ${JSON.stringify(v)}`;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return `${typeof v} ${String(v)}`;
  return typeof v;
}

/** The wrong fields of a refused value, e.g. ` (instance.uuid: a UUID; instance.flavor: missing)`. */
function detail(name: string, issues: readonly ArgIssue[]): string {
  if (issues.length === 0) return '';
  return ` (${issues.map((i) => `${[name, ...i.path].join('.')}: ${i.problem}`).join('; ')})`;
}

/**
 * Binds and checks `args` against `spec`.
 * @throws InvalidArgumentsError listing every missing, unexpected or malformed argument.
 */
export function decodeArgs<S extends ArgsSpec>(method: string, spec: S, args: Readonly<Record<string, unknown>>): ArgsOf<S> {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [name, dec] of Object.entries(spec)) {
    if (!Object.prototype.hasOwnProperty.call(args, name)) {
      if (dec.absent) out[name] = dec.absent.value;
      else problems.push(`missing required argument '${name}' (${dec.expected})`);
      continue;
    }
    const value = args[name];
    const decoded = dec.decode(value);
    if (isInvalid(decoded)) problems.push(`argument '${name}': expected ${dec.expected}, got ${shape(value)}${detail(name, decoded.issues)}`);
    else out[name] = decoded;
  }
  for (const name of Object.keys(args)) {
    if (!Object.prototype.hasOwnProperty.call(spec, name)) problems.push(`got an unexpected keyword argument '${name.slice(0, 80)}'`);
  }
  if (problems.length > 0) throw new InvalidArgumentsError(method, problems);
  return out as ArgsOf<S>;
}
