/**
 * Loads the agent's configuration the way oslo.config does, then validates it.
 *
 * Precedence, lowest first: option defaults, config files in the order given (a later file
 * overrides an earlier one; a multi-valued option collects every assignment), then environment
 * variables `COMPUTE_AGENT__<SECTION>__<KEY>`. `$name` and `${name}` in values are interpolated
 * against the same section, then `[DEFAULT]`, as oslo does (`$$` is a literal `$`).
 *
 * Every problem is collected, not just the first, and reported as one line naming `section.key`,
 * the value (secrets masked) and the expected form. Unknown keys in known sections are warnings:
 * oslo ignores them, but a typo in an option name should not pass silently. So is an option that
 * another option makes ignored (`resource_provider_bandwidths` without `report_bandwidth_inventory`).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { IniParseError, parseIni } from './ini';
import { configSchema, SECTION_NAMES, type AgentConfig, type SectionName } from './schema';
import { rabbitContradictions } from './sections/rabbit';
import { maskTransportUrl } from './transport-url';
import { optionMeta, type OptionMeta } from './types';

export const DEFAULT_CONFIG_FILE = '/etc/compute-agent/compute-agent.conf';
export const ENV_PREFIX = 'COMPUTE_AGENT__';

/** One thing wrong with the configuration. `key` is `section.key`, or the file for file errors. */
export interface ConfigProblem {
  readonly key: string;
  readonly message: string;
}

/** The configuration cannot be used; `problems` has one entry per line to show. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly ConfigProblem[]) {
    super(problems.map((p) => p.message).join('\n'));
    this.name = 'ConfigError';
  }
}

export interface LoadOptions {
  /** Files given with --config-file; when empty, the default file is read if it exists. */
  readonly files?: readonly string[];
  /** Directories given with --config-dir: their `*.conf` files are read after `files`, sorted. */
  readonly dirs?: readonly string[];
  /** Environment to read overrides from (process.env by default). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The default file, replaceable for tests. */
  readonly defaultFile?: string;
}

export interface LoadedConfig {
  readonly config: AgentConfig;
  /** The files read, in order. */
  readonly files: readonly string[];
  readonly warnings: readonly string[];
}

interface RawValue {
  values: string[];
  origin: string;
}

type Shape = Record<string, z.ZodType>;

function sectionShape(section: SectionName): Shape {
  return (configSchema.shape[section] as unknown as { shape: Shape }).shape;
}

function metaFor(section: SectionName, key: string): OptionMeta | undefined {
  const schema = sectionShape(section)[key];
  return schema ? optionMeta(schema) : undefined;
}

/** A value as it may be shown to an operator: secrets masked. */
export function displayValue(section: SectionName, key: string, value: string): string {
  if (key === 'transport_url') return JSON.stringify(maskTransportUrl(value));
  if (metaFor(section, key)?.secret) return value === '' ? '""' : '"***"';
  return JSON.stringify(value);
}

function configFiles(opts: LoadOptions, problems: ConfigProblem[]): string[] {
  const files: string[] = [];
  const explicit = opts.files ?? [];
  if (explicit.length === 0 && (opts.dirs ?? []).length === 0) {
    const def = opts.defaultFile ?? DEFAULT_CONFIG_FILE;
    if (existsSync(def)) files.push(def);
  }
  for (const f of explicit) {
    if (!existsSync(f)) problems.push({ key: f, message: `config file ${f}: not found` });
    else files.push(f);
  }
  for (const d of opts.dirs ?? []) {
    let names: string[];
    try {
      if (!statSync(d).isDirectory()) throw new Error('not a directory');
      names = readdirSync(d).filter((n) => n.endsWith('.conf')).sort();
    } catch (e) {
      problems.push({ key: d, message: `config dir ${d}: ${e instanceof Error ? e.message : String(e)}` });
      continue;
    }
    files.push(...names.map((n) => join(d, n)));
  }
  return files;
}

function readFiles(files: string[], raw: Map<string, RawValue>, problems: ConfigProblem[], warnings: string[]): void {
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? String(e);
      problems.push({ key: file, message: `config file ${file}: cannot be read (${code})` });
      continue;
    }
    let doc;
    try {
      doc = parseIni(text, file);
    } catch (e) {
      if (e instanceof IniParseError) {
        // Never echo the line: it may be a password assignment.
        problems.push({ key: file, message: `${e.source}:${e.lineno}: ${e.message.split(': ')[1] ?? 'syntax error'}` });
        continue;
      }
      throw e;
    }
    for (const [section, keys] of doc) {
      if (!(SECTION_NAMES as string[]).includes(section)) continue; // other services' sections
      for (const [key, assignments] of keys) {
        const meta = metaFor(section as SectionName, key);
        const last = assignments[assignments.length - 1];
        if (!meta || !last) {
          warnings.push(`${file}:${last?.lineno ?? 0}: unknown option ${section}.${key} (ignored)`);
          continue;
        }
        const id = `${section}.${key}`;
        const values = assignments.map((a) => a.value);
        const prev = raw.get(id);
        raw.set(id, {
          values: meta.multi && prev ? [...prev.values, ...values] : meta.multi ? values : [last.value],
          origin: `${file}:${last.lineno}`,
        });
      }
    }
  }
}

function readEnv(env: Readonly<Record<string, string | undefined>>, raw: Map<string, RawValue>, warnings: string[]): void {
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || value === undefined) continue;
    const parts = name.slice(ENV_PREFIX.length).split('__');
    const section = SECTION_NAMES.find((s) => s.toLowerCase() === (parts[0] ?? '').toLowerCase());
    const key = (parts[1] ?? '').toLowerCase();
    if (parts.length !== 2 || !section || !metaFor(section, key)) {
      warnings.push(`environment ${name}: no such option (expected ${ENV_PREFIX}<SECTION>__<KEY>)`);
      continue;
    }
    raw.set(`${section}.${key}`, { values: [value], origin: `environment ${name}` });
  }
}

const VAR = /\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g;

function interpolate(
  section: SectionName,
  value: string,
  lookup: (section: SectionName, key: string) => string | undefined,
  seen: Set<string>,
  problems: ConfigProblem[],
  id: string,
): string {
  return value.replace(VAR, (whole, dollar: string, braced?: string, bare?: string) => {
    if (dollar === '$') return '$';
    const name = braced ?? bare ?? '';
    const from: SectionName | undefined = metaFor(section, name) ? section : metaFor('DEFAULT', name) ? 'DEFAULT' : undefined;
    const target = from ? lookup(from, name) : undefined;
    if (!from || target === undefined) {
      const [idSection, idKey] = id.split('.') as [SectionName, string];
      const what = metaFor(idSection, idKey)?.secret ? 'a $ reference' : whole;
      problems.push({ key: id, message: `${id}: ${what} does not name an option; write $$ for a literal $` });
      return whole;
    }
    const ref = `${from}.${name}`;
    if (seen.has(ref)) {
      problems.push({ key: id, message: `${id}: ${whole} refers back to itself` });
      return whole;
    }
    return interpolate(from, target, lookup, new Set([...seen, ref]), problems, id);
  });
}

function crossChecks(config: AgentConfig, problems: ConfigProblem[], warnings: string[]): void {
  const p = config.placement;
  const need = (cond: boolean, key: string, why: string): void => {
    if (!cond) problems.push({ key: `placement.${key}`, message: `placement.${key}: missing; ${why}` });
  };
  if (p.auth_type === 'password') {
    const why = 'required when placement.auth_type = password';
    need(p.auth_url !== undefined, 'auth_url', why);
    need(p.username !== '', 'username', why);
    need(p.password !== '', 'password', why);
    need(p.project_name !== '', 'project_name', why);
  } else if (p.auth_type === 'v3applicationcredential') {
    const why = 'required when placement.auth_type = v3applicationcredential';
    need(p.auth_url !== undefined, 'auth_url', why);
    need(p.application_credential_id !== '', 'application_credential_id', why);
    need(p.application_credential_secret !== '', 'application_credential_secret', why);
  }
  const r = config.oslo_messaging_rabbit;
  if ((r.ssl_cert_file === undefined) !== (r.ssl_key_file === undefined)) {
    problems.push({
      key: 'oslo_messaging_rabbit.ssl_key_file',
      message: 'oslo_messaging_rabbit.ssl_cert_file and ssl_key_file: set both or neither',
    });
  }
  for (const message of rabbitContradictions(r)) problems.push({ key: 'oslo_messaging_rabbit', message });
  const n = config.network;
  if (n.resource_provider_bandwidths.length > 0 && !n.report_bandwidth_inventory) {
    warnings.push('network.resource_provider_bandwidths is set but network.report_bandwidth_inventory = false: no bandwidth is reported (Neutron reports it); it is ignored');
  }
}

/**
 * Reads, merges and validates the configuration.
 * @throws ConfigError with one problem per bad option, file or syntax error.
 */
export function loadConfig(opts: LoadOptions = {}): LoadedConfig {
  const problems: ConfigProblem[] = [];
  const warnings: string[] = [];
  const raw = new Map<string, RawValue>();
  const files = configFiles(opts, problems);
  readFiles(files, raw, problems, warnings);
  readEnv(opts.env ?? process.env, raw, warnings);

  const lookup = (section: SectionName, key: string): string | undefined => {
    const given = raw.get(`${section}.${key}`);
    if (given) return given.values[given.values.length - 1];
    const def = metaFor(section, key)?.default;
    return typeof def === 'function' ? def() : def;
  };

  const input: Record<string, Record<string, string | string[] | undefined>> = {};
  for (const section of SECTION_NAMES) {
    const out: Record<string, string | string[] | undefined> = {};
    for (const key of Object.keys(sectionShape(section))) {
      const id = `${section}.${key}`;
      const meta = metaFor(section, key);
      const given = raw.get(id)?.values;
      const values = given ?? (lookup(section, key) === undefined ? [] : [lookup(section, key) as string]);
      const done = values.map((v) => interpolate(section, v, lookup, new Set([id]), problems, id));
      out[key] = meta?.multi ? done : done[done.length - 1];
    }
    input[section] = out;
  }

  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    const explicitProblems = problems.length;
    const reported = new Set(problems.map((p) => p.key));
    for (const issue of parsed.error.issues) {
      const [section, key] = issue.path as [SectionName, string];
      const id = `${section}.${key}`;
      // One line per cause: an option whose interpolation already failed is not reported again,
      // and a default (valid by construction) fails only through an option that is reported itself.
      if (reported.has(id)) continue;
      if (!raw.has(id) && (explicitProblems > 0 || parsed.error.issues.some((i) => raw.has(i.path.join('.'))))) continue;
      const meta = metaFor(section, key);
      const value = input[section]?.[key];
      const shown =
        value === undefined ? 'missing' : `= ${displayValue(section, key, Array.isArray(value) ? value.join(', ') : value)}`;
      const origin = raw.get(id)?.origin;
      problems.push({
        key: id,
        message: `${id} ${shown}: ${issue.message}; expected ${meta?.expected ?? 'a valid value'}${origin ? ` (${origin})` : ''}`,
      });
    }
  } else {
    crossChecks(parsed.data, problems, warnings);
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
  return { config: parsed.data, files, warnings };
}

/** Every secret value in the configuration, for the log scrubber. */
export function secretsOf(config: AgentConfig): string[] {
  const out = [config.placement.password, config.placement.application_credential_secret];
  for (const h of config.DEFAULT.transport_url.hosts) if (h.password) out.push(h.password);
  return out.filter((s) => s !== '');
}
