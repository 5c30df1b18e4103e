/**
 * One decoding layer for the compute methods' arguments: NovaObject primitives, as a real
 * nova-conductor sends them (`nova_object.name/namespace/version/data/changes`, nested objects and
 * `…List` objects with `{"objects": [...]}`), and plain JSON, as our own client and tests send
 * them, both become the same normalized shapes. A malformed argument is refused with one message
 * naming the argument, the field and the expected form.
 *
 * Unknown fields and newer minor versions are tolerated (nova does the same); only the fields the
 * agent reads are checked.
 */
import { z } from 'zod';
import type { Flavor } from '../../model/instance';

/** An argument that cannot be used; the message names it and says what was expected. */
export class ArgumentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArgumentError';
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Replaces every NovaObject primitive by its data, recursively; `…List` objects become arrays. */
export function unwrap(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(unwrap);
  if (!isRecord(v)) return v;
  if (typeof v['nova_object.name'] === 'string' && isRecord(v['nova_object.data'])) {
    const data = v['nova_object.data'];
    if (String(v['nova_object.name']).endsWith('List') && Array.isArray(data.objects)) return data.objects.map(unwrap);
    return unwrap(data);
  }
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unwrap(x)]));
}

const uuid = z.string().regex(/^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$/, 'a UUID');
const count = z.number().int('an integer').min(0, 'an integer >= 0');

export const flavorSchema = z.object({
  name: z.string().default('flavor'),
  vcpus: z.number().int('an integer').min(1, 'an integer >= 1'),
  memory_mb: z.number().int('an integer').min(1, 'an integer >= 1'),
  root_gb: count.default(0),
  ephemeral_gb: count.default(0),
  swap: count.default(0),
  extra_specs: z.record(z.string(), z.coerce.string()).default({}),
});

const instanceSchema = z.object({
  uuid,
  display_name: z.string().optional(),
  hostname: z.string().optional(),
  name: z.string().optional(),
  project_id: z.string().min(1, 'a project id'),
  user_id: z.string().min(1, 'a user id'),
  flavor: flavorSchema.optional(),
  image_ref: z.string().nullish(),
  host: z.string().nullish(),
  vm_state: z.string().nullish(),
  task_state: z.string().nullish(),
});

const migrationSchema = z.object({
  uuid,
  migration_type: z.enum(['migration', 'resize', 'live-migration', 'evacuation']).default('migration'),
  source_compute: z.string().min(1, 'a host name'),
  dest_compute: z.string().min(1, 'a host name'),
  status: z.string().optional(),
});

export interface DecodedInstance {
  readonly uuid: string;
  readonly name: string;
  readonly project_id: string;
  readonly user_id: string;
  readonly flavor: Flavor | undefined;
  readonly image_ref: string | undefined;
}

export interface DecodedMigration {
  readonly uuid: string;
  readonly migration_type: 'migration' | 'resize' | 'live-migration' | 'evacuation';
  readonly source_compute: string;
  readonly dest_compute: string;
}

function parse<T>(argName: string, schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(unwrap(value));
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => {
    const where = i.path.length ? `${argName}.${i.path.join('.')}` : argName;
    const msg = i.code === 'invalid_type' && i.input === undefined ? 'missing' : i.message;
    return `${where}: ${msg}`;
  });
  throw new ArgumentError(`invalid argument ${argName}: ${lines.join('; ')}`);
}

export function decodeInstance(value: unknown, argName = 'instance'): DecodedInstance {
  const i = parse(argName, instanceSchema, value);
  return {
    uuid: i.uuid,
    name: i.display_name ?? i.hostname ?? i.name ?? `instance-${i.uuid.slice(0, 8)}`,
    project_id: i.project_id,
    user_id: i.user_id,
    flavor: i.flavor,
    image_ref: i.image_ref ?? undefined,
  };
}

export function decodeFlavor(value: unknown, argName = 'flavor'): Flavor {
  return parse(argName, flavorSchema, value);
}

export function decodeMigration(value: unknown, argName = 'migration'): DecodedMigration {
  return parse(argName, migrationSchema, value);
}

/** A plain JSON object argument (a dict on the Python side), or an empty one when absent. */
export function decodeDict(value: unknown, argName: string): Readonly<Record<string, unknown>> {
  if (value === undefined || value === null) return {};
  const v = unwrap(value);
  if (!isRecord(v)) throw new ArgumentError(`invalid argument ${argName}: expected an object`);
  return v;
}
