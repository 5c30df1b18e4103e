/**
 * The compute methods' argument decoders: NovaObject primitives, as a real nova-conductor sends
 * them (`nova_object.name/namespace/version/data/changes`, nested objects and `…List` objects with
 * `{"objects": [...]}`), and plain JSON, as the agent's peers in standalone mode, its CLI and tests
 * send them, become the same normalized shapes. Each is an argument decoder (`arg.from`): a
 * malformed argument is refused before the request is journaled, naming each wrong field and what
 * was expected there.
 *
 * Unknown fields and newer minor versions are tolerated (nova does the same); only the fields the
 * agent reads are checked.
 */
import { z } from 'zod';
import type { Flavor } from '../../model/instance';
import { imageMetaFrom, type ImageMeta } from '../../model/image-meta';
import type { ProviderMapping } from '../../model/network';
import type { LiveMigrateData } from '../../virt-drivers/types';
import { arg, type ArgDecoder, type ArgIssue } from '../rpc/endpoint/args';

/** Arguments that are well formed one by one but cannot be used together; the message names them. */
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
const hostName = z.string().min(1, 'a host name');

const flavorSchema = z.object({
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
  availability_zone: z.string().nullish(),
  system_metadata: z.record(z.string(), z.unknown()).nullish(),
});

const migrationSchema = z.object({
  uuid,
  migration_type: z.enum(['migration', 'resize', 'live-migration', 'evacuation']).default('migration'),
  source_compute: hostName,
  dest_compute: hostName,
  status: z.string().optional(),
});

export interface DecodedInstance {
  readonly uuid: string;
  readonly name: string;
  readonly project_id: string;
  readonly user_id: string;
  readonly flavor: Flavor | undefined;
  readonly image_ref: string | undefined;
  /** The vm_state nova had when it sent the request. */
  readonly vm_state: string | undefined;
  /** The availability zone nova placed it in (ports get `device_owner = compute:<az>`). */
  readonly availability_zone: string | undefined;
  /** The image properties the agent acts on, from the `image_*` keys of nova's system metadata. */
  readonly image_meta?: ImageMeta;
}

export interface DecodedMigration {
  readonly uuid: string;
  readonly migration_type: 'migration' | 'resize' | 'live-migration' | 'evacuation';
  readonly source_compute: string;
  readonly dest_compute: string;
}

/** A migration whose destination may not be set yet (nova's conductor fills it after scheduling). */
export type UnplacedMigration = Omit<DecodedMigration, 'dest_compute'> & { readonly dest_compute: string | undefined };

/** A decoder from a zod schema; issues at the value's root are the expected form itself, so only deeper ones are named. */
export function fromSchema<T, O>(expected: string, schema: z.ZodType<T>, normalize: (v: T) => O): ArgDecoder<O> {
  return arg.from(expected, (v) => {
    const input = unwrap(v);
    const r = schema.safeParse(input);
    if (r.success) return normalize(r.data);
    // zod 4 leaves `input` out of its issues (unless asked to report it), so whether a field is
    // missing or of the wrong type is read from the value itself.
    const issues: ArgIssue[] = r.error.issues
      .filter((i) => i.path.length > 0)
      .map((i) => ({ path: i.path.map((p) => (typeof p === 'symbol' ? String(p) : p)), problem: i.code === 'invalid_type' && valueAt(input, i.path) === undefined ? 'missing' : i.message }));
    return arg.refuse(issues);
  });
}

/** The value at `path` inside `v` (undefined where the path leads nowhere). */
function valueAt(v: unknown, path: readonly PropertyKey[]): unknown {
  let cur = v;
  for (const k of path) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[k];
  }
  return cur;
}

const same = <T>(v: T): T => v;

const requestSpecSchema = z.object({
  flavor: flavorSchema.optional(),
  requested_resources: z.array(z.object({ requester_id: z.string().nullish(), provider_uuids: z.array(uuid).default([]) })).nullish(),
});

/** What the agent reads of a RequestSpec. */
export interface DecodedRequestSpec {
  readonly flavor: Flavor | undefined;
  /** Requester (port or request group id) -> providers; absent when the spec has no `requested_resources`. */
  readonly providerMapping?: ProviderMapping;
}

function normalizeRequestSpec(s: z.infer<typeof requestSpecSchema> | null): DecodedRequestSpec {
  const groups = (s?.requested_resources ?? []).filter((g) => !!g.requester_id);
  const providerMapping = Object.fromEntries(groups.map((g) => [g.requester_id as string, g.provider_uuids]));
  return { flavor: s?.flavor, ...(groups.length ? { providerMapping } : {}) };
}

function normalizeInstance(i: z.infer<typeof instanceSchema>): DecodedInstance {
  const imageMeta = imageMetaFrom(i.system_metadata, 'image_');
  return {
    uuid: i.uuid,
    name: i.display_name ?? i.hostname ?? i.name ?? `instance-${i.uuid.slice(0, 8)}`,
    project_id: i.project_id,
    user_id: i.user_id,
    flavor: i.flavor,
    image_ref: i.image_ref ?? undefined,
    vm_state: i.vm_state ?? undefined,
    availability_zone: i.availability_zone ?? undefined,
    ...(imageMeta ? { image_meta: imageMeta } : {}),
  };
}

/** The decoders of the compute methods' arguments, by what they decode. */
export const computeArgs = {
  /** An Instance the method creates or checks: uuid, owner, flavor. */
  instance: fromSchema('an Instance (object primitive or plain object)', instanceSchema, normalizeInstance),
  /** An Instance this host knows: only its uuid is read. */
  instanceRef: fromSchema('an Instance with a uuid', z.object({ uuid }), (i) => ({ uuid: i.uuid })),
  flavor: fromSchema('a Flavor (object primitive or plain object)', flavorSchema, same<Flavor>),
  migration: fromSchema('a Migration (object primitive or plain object)', migrationSchema, same<DecodedMigration>),
  /** A Migration sent before its destination was scheduled. */
  unplacedMigration: fromSchema(
    'a Migration (object primitive or plain object)',
    migrationSchema.extend({ dest_compute: z.string().nullish() }),
    (m): UnplacedMigration => ({ ...m, dest_compute: m.dest_compute || undefined }),
  ),
  /**
   * nova's RequestSpec: its flavor, and the request group -> provider mapping of
   * `requested_resources` (nova's `get_request_group_mapping()`: each RequestGroup's
   * `requester_id` -> `provider_uuids`, filled by nova-conductor from the scheduler's choice; a
   * port's resource request is such a group).
   */
  requestSpec: arg.optional<DecodedRequestSpec, DecodedRequestSpec>(
    fromSchema('a RequestSpec (object primitive or plain object) or null', requestSpecSchema.nullable(), normalizeRequestSpec),
    { flavor: undefined },
  ),
  /** nova's Selections for a build (`host_list`): each host and the allocation the scheduler claimed for it. */
  selections: arg.optional(
    fromSchema('a list of Selections or null', z.array(z.object({ service_host: z.string().optional(), allocation_request: z.string().nullish() })).nullable(), (l) => l ?? []),
    [],
  ),
  /** A driver's migrate data (nova's LiveMigrateData): opaque JSON; absent or null is empty. */
  migrateData: arg.optional(fromSchema('a LiveMigrateData (object primitive or plain object) or null', z.record(z.string(), z.unknown()).nullable(), (d) => (d ?? {}) as LiveMigrateData), {}),
  /** A string nova may leave out or send as null. */
  optionalString: arg.optional(arg.nullable(arg.string()), null),
  /** `unquiesce_instance`'s `mapping`: the snapshot's block device mappings (absent or null: none). */
  quiesceMapping: arg.optional(
    fromSchema('a list of block device mappings or null', z.array(z.object({ source_type: z.string().nullish(), snapshot_id: z.string().nullish() }).passthrough()).nullable(), (l) => l ?? []),
    [],
  ),
  /** A password (`set_admin_password`'s `new_pass`): any string, even empty, never echoed in an error. */
  password: arg.from('a string', (v) => (typeof v === 'string' ? v : arg.refuse([{ path: [], problem: 'not a string' }]))),
  /** The Glance image a snapshot or backup fills (nova's API created it). */
  imageId: fromSchema('an image id (letters, digits and -)', z.string().regex(/^[A-Za-z0-9-]{1,64}$/, 'letters, digits and -'), same),
  /** `unshelve_instance`'s `image`: the shelved image nova's conductor read from Glance (its id), or null for a server booted from a volume. */
  /** A build's `image` (nova's image dict, or absent): the properties the agent acts on, from its `properties`. */
  imageMeta: arg.optional(
    fromSchema('an image (an object, its properties an object) or null', z.object({ properties: z.record(z.string(), z.unknown()).nullish() }).passthrough().nullable(), (i) => imageMetaFrom(i?.properties)),
    undefined,
  ),
  shelvedImage: arg.optional(fromSchema('an image (an object with an id) or null', z.object({ id: z.string().min(1, 'an image id') }).nullable(), (i) => i?.id), undefined),
  /** `check_instance_shared_storage`'s `data`: what nova's `check_instance_shared_storage_local` made on the other host. */
  sharedStorageProbe: fromSchema('an object with a filename', z.object({ filename: z.string().min(1, 'a file path') }), same),
  /** `backup_instance`'s `backup_type`: a word such as daily or weekly. */
  backupType: fromSchema('a backup type (a non-empty string)', z.string().min(1, 'a non-empty string'), same),
  /** `backup_instance`'s `rotation`: how many backups of the type to keep. */
  rotation: fromSchema('an integer >= 0', z.number().int('an integer').min(0, 'an integer >= 0'), same),
  /** `reboot_instance`'s `reboot_type`. */
  rebootType: fromSchema("'SOFT' or 'HARD'", z.enum(['SOFT', 'HARD']), same),
  /** `rebuild_instance`'s `recreate` (an evacuation): absent or null is false. */
  recreate: arg.optional(arg.nullable(arg.bool()), false),
  /** `stop_instance`'s `clean_shutdown`: absent or null is true, nova's default. */
  cleanShutdown: arg.optional(arg.nullable(arg.bool()), true),
  /** The console type nova's API asked for (`novnc`, `serial`, ...). */
  consoleType: fromSchema('a console type such as novnc or serial', z.string().min(1), same),
  /** `validate_console_port`'s `port`: nova's proxies send the port as a string. */
  consolePort: fromSchema('a port number or its decimal string', z.union([z.number().int().min(0).max(65535), z.string().regex(/^\d{1,5}$/)]), (v) => String(v)),
  /** `get_console_output`'s `tail_length`: lines, as an integer or its string (nova's API passes either); absent, null or -1: all. */
  tailLength: arg.optional(
    fromSchema('an integer, its decimal string, or null', z.union([z.number().int(), z.string().regex(/^-?\d+$/)]).nullable(), (v) => (v === null || Number(v) < 0 ? null : Number(v))),
    null,
  ),
};

/** nova's arguments the agent accepts and does not read: optional, any value. */
export function unread<const N extends string>(...names: readonly N[]): Record<N, ArgDecoder<unknown>> {
  const decoder = arg.optional(arg.any());
  return Object.fromEntries(names.map((n) => [n, decoder])) as Record<N, ArgDecoder<unknown>>;
}
