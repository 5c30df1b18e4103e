/**
 * Option types for the agent's configuration, as zod schemas that take the raw string an INI file
 * (or the environment) holds and yield a typed value, the way oslo.config's option types do.
 *
 * Each type fails with a short reason ("not an integer", "must be > 0"); the loader adds the option
 * name, the (masked) value and the expected form from the option's metadata, so every error line
 * reads `section.key = value: reason; expected form`.
 */
import { isIP } from 'node:net';
import { z } from 'zod';

/** Metadata kept beside each option's schema: what the example file and error messages show. */
export interface OptionMeta {
  /** One or two sentences for the example file. */
  readonly help: string;
  /**
   * The default as it would be written in the file, or a function computing it at load time (the
   * host name); absent means the option is required.
   */
  readonly default?: string | (() => string);
  /** What the example file shows as the default when `default` is computed. */
  readonly defaultShown?: string;
  /** The expected form, for error messages ("a number > 0"). */
  readonly expected: string;
  /** The value is masked in errors, logs and dumps. */
  readonly secret?: boolean;
  /** Every assignment is kept (oslo MultiStrOpt); otherwise the last one wins. */
  readonly multi?: boolean;
}

const metaOf = new WeakMap<z.ZodType, OptionMeta>();

/** Attaches metadata to a leaf schema and returns the schema. */
export function option<T extends z.ZodType>(schema: T, meta: OptionMeta): T {
  metaOf.set(schema, meta);
  return schema;
}

/** The metadata of a leaf schema made with `option`, if any. */
export function optionMeta(schema: z.ZodType): OptionMeta | undefined {
  return metaOf.get(schema);
}

function fail(ctx: z.RefinementCtx, message: string): never {
  ctx.addIssue({ code: 'custom', message });
  return z.NEVER;
}

export const str = (): z.ZodType<string, string> => z.string();

export const nonEmpty = (): z.ZodType<string, string> =>
  z.string().transform((v, ctx) => (v.trim() === '' ? fail(ctx, 'must not be empty') : v));

export function int(min?: number, max?: number): z.ZodType<number, string> {
  return z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (!/^[+-]?\d+$/.test(v)) return fail(ctx, 'not an integer');
    const n = Number(v);
    if (!Number.isSafeInteger(n)) return fail(ctx, 'out of range');
    if (min !== undefined && n < min) return fail(ctx, `must be >= ${min}`);
    if (max !== undefined && n > max) return fail(ctx, `must be <= ${max}`);
    return n;
  });
}

/** A float; `exclusiveMin` rejects the bound itself (ratios must be > 0). */
export function float(min?: number, exclusiveMin = false): z.ZodType<number, string> {
  return z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(v)) return fail(ctx, 'not a number');
    const n = Number(v);
    if (!Number.isFinite(n)) return fail(ctx, 'not a finite number');
    if (min !== undefined && (exclusiveMin ? n <= min : n < min)) {
      return fail(ctx, `must be ${exclusiveMin ? '>' : '>='} ${min}`);
    }
    return n;
  });
}

const TRUE = new Set(['true', 'yes', 'on', '1']);
const FALSE = new Set(['false', 'no', 'off', '0']);

/** oslo's boolean: true/false, yes/no, on/off, 1/0, any case. */
export const bool = (): z.ZodType<boolean, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim().toLowerCase();
    if (TRUE.has(v)) return true;
    if (FALSE.has(v)) return false;
    return fail(ctx, 'not a boolean');
  });

export function choice<const C extends readonly string[]>(choices: C): z.ZodType<C[number], string> {
  return z.string().transform((raw, ctx) => {
    const v = raw.trim();
    return choices.includes(v) ? v : fail(ctx, 'not one of the choices');
  });
}

/** oslo's ListOpt: comma-separated, blanks trimmed, empty items dropped. */
export const list = (): z.ZodType<string[], string> =>
  z.string().transform((raw) =>
    raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
  );

/** An optional float: empty means unset. */
export function optFloat(min?: number, exclusiveMin = false): z.ZodType<number | undefined, string> {
  const inner = float(min, exclusiveMin);
  return z.string().transform((raw, ctx) => {
    if (raw.trim() === '') return undefined;
    const r = inner.safeParse(raw);
    if (r.success) return r.data;
    return fail(ctx, r.error.issues[0]?.message ?? 'not a number');
  });
}

/** An absolute filesystem path. */
export const absPath = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    return v.startsWith('/') ? v.replace(/(.)\/+$/, '$1') : fail(ctx, 'not an absolute path');
  });

/** An optional absolute path: empty means unset. */
export const optPath = (): z.ZodType<string | undefined, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (v === '') return undefined;
    return v.startsWith('/') ? v : fail(ctx, 'not an absolute path');
  });

/** An http(s) URL without credentials; empty means unset. */
export const httpUrl = (): z.ZodType<string | undefined, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (v === '') return undefined;
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      return fail(ctx, 'not a URL');
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return fail(ctx, 'scheme must be http or https');
    if (u.username || u.password) return fail(ctx, 'must not carry credentials');
    return v.replace(/\/+$/, '');
  });

/**
 * Two TCP ports `MIN<sep>MAX` with 1 <= MIN <= MAX <= 65535: libvirt's migration range is written
 * `MIN-MAX` here, nova's `[serial_console] port_range` `MIN:MAX`.
 */
export function portRange(separator: '-' | ':'): z.ZodType<{ min: number; max: number }, string> {
  const form = new RegExp(`^\\s*(\\d{1,5})\\s*${separator}\\s*(\\d{1,5})\\s*$`);
  return z.string().transform((raw, ctx) => {
    const m = form.exec(raw);
    const min = Number(m?.[1]);
    const max = Number(m?.[2]);
    return !m || min < 1 || max > 65535 || min > max ? fail(ctx, 'not a port range') : { min, max };
  });
}

/** A host name usable in queue names (`compute.<host>`) and provider names. */
export const hostName = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    return /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(v) && v.length <= 255 ? v : fail(ctx, 'not a valid host name');
  });

/** An IPv4 or IPv6 address (oslo's IPOpt), e.g. nova's `my_ip`. */
export const ipAddress = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    return isIP(v) === 0 ? fail(ctx, 'not an IP address') : v;
  });

/** `auto`, or one of the nova-compute service versions the agent implements (64 Zed, 68 2025.1). */
export const serviceVersion = (): z.ZodType<'auto' | 64 | 68, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim().toLowerCase();
    if (v === 'auto') return 'auto' as const;
    if (v === '64') return 64 as const;
    if (v === '68') return 68 as const;
    return fail(ctx, /^\d+$/.test(v) ? 'not a service version the agent implements' : 'neither auto nor a service version');
  });

/**
 * The audit interval: an integer; positive values must be expressible as a cron step (divide a
 * minute, an hour or a day evenly). 0 and negative values pass (default and disabled).
 */
export const auditIntervalType = (): z.ZodType<number, string> =>
  int().transform((n, ctx) => {
    if (n <= 0) return n;
    const even =
      (n <= 60 && 60 % n === 0) || (n % 60 === 0 && n <= 3600 && 3600 % n === 0) || (n % 3600 === 0 && 86400 % n === 0);
    return even ? n : fail(ctx, 'cannot be scheduled evenly');
  });

/** `host:port` or `[v6]:port` to listen on; empty means disabled. */
export const listenAddress = (): z.ZodType<string | undefined, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (v === '') return undefined;
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(v);
    return m && Number(m[3]) <= 65535 ? v : fail(ctx, 'not host:port');
  });

/**
 * oslo's ListOpt whose every item must match `item` (e.g. `physnet:ifname`); `what` names one
 * item's form in the error ("physnet:interface").
 */
export function patternList(item: RegExp, what: string): z.ZodType<string[], string> {
  return z.string().transform((raw, ctx) => {
    const items = raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const bad = items.find((s) => !item.test(s));
    return bad === undefined ? items : fail(ctx, `item ${JSON.stringify(bad)} is not of the form ${what}`);
  });
}
