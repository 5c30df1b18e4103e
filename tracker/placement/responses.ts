/**
 * The 2xx answers the agent reads from Placement and keystone, as zod schemas, and `checkAnswer`,
 * which either returns the parsed body or throws one `MalformedResponseError` naming the request's
 * route and the first field that does not fit.
 *
 * Each schema holds exactly the fields the agent reads, at the microversion `client.ts` pins for
 * that call; fields it does not read are dropped by the parse (Placement's `links`, for one), so the
 * cache keeps only what it uses. A body is parsed once, where it arrives; nothing downstream checks
 * it again. Answers the agent does not read (204s, `PUT /traits/{name}`, a rename's echo) have no
 * schema.
 *
 * Not here: error answers (4xx, 5xx), which `errors.ts` classifies by status and code.
 */
import { z } from 'zod';
import type { AggregatesAnswer, ConsumerAllocations, InventoriesAnswer, ProviderAllocationsAnswer, ProviderRecord, TraitsAnswer } from './api';
import { MalformedResponseError } from './errors';
import { parseMicroversion, type Microversion, type PlacementVersions } from './version';

/** A provider or consumer generation, a count, an inventory amount. */
const whole = z.number().int().nonnegative();
/** Resource class -> amount, as allocations carry them. */
const resources = z.record(z.string(), whole);

/** One provider as listed (1.14 added `parent_provider_uuid` and `root_provider_uuid`). */
const providerRecord = z.object({
  uuid: z.string(),
  name: z.string(),
  generation: whole,
  parent_provider_uuid: z.string().nullable(),
  root_provider_uuid: z.string(),
}) satisfies z.ZodType<ProviderRecord>;

/** `GET /resource_providers?in_tree=` (1.14) and `?member_of=in:...&required=` (sent at 1.26). */
export const providerListAnswer = z.object({ resource_providers: z.array(providerRecord) }) satisfies z.ZodType<{
  resource_providers: ProviderRecord[];
}>;

/** `POST /resource_providers`: from 1.20 the answer is the created provider (sent at 1.26). */
export const createdProviderAnswer = providerRecord;

/** One inventory record with every field (1.26: `reserved` may equal `total`). */
const inventoryRecord = z.object({
  total: whole,
  reserved: whole,
  min_unit: whole,
  max_unit: whole,
  step_size: whole,
  allocation_ratio: z.number().nonnegative(),
});

/** `GET` and `PUT /resource_providers/{uuid}/inventories` (1.26). */
export const inventoriesAnswer = z.object({
  resource_provider_generation: whole,
  inventories: z.record(z.string(), inventoryRecord),
}) satisfies z.ZodType<InventoriesAnswer>;

/** `GET` and `PUT /resource_providers/{uuid}/traits` (1.6, sent at 1.26). */
export const traitsAnswer = z.object({ resource_provider_generation: whole, traits: z.array(z.string()) }) satisfies z.ZodType<TraitsAnswer>;

/** `GET` and `PUT /resource_providers/{uuid}/aggregates` (1.19 added the generation; sent at 1.26). */
export const aggregatesAnswer = z.object({
  resource_provider_generation: whole,
  aggregates: z.array(z.string()),
}) satisfies z.ZodType<AggregatesAnswer>;

/** `GET /traits?name=in:...` (1.6, sent at 1.26): which of the names exist. */
export const traitListAnswer = z.object({ traits: z.array(z.string()) });

/** `GET /resource_providers/{uuid}/allocations` (1.14): consumer -> resources on this provider. */
export const providerAllocationsAnswer = z.object({
  resource_provider_generation: whole,
  allocations: z.record(z.string(), z.object({ resources })),
}) satisfies z.ZodType<ProviderAllocationsAnswer>;

/**
 * `GET /allocations/{consumer}` (1.28): provider -> resources with the provider's generation, and
 * the consumer's generation, project and user, which are absent when the consumer has none.
 */
export const consumerAllocationsAnswer = z.object({
  allocations: z.record(z.string(), z.object({ resources, generation: whole.optional() })),
  consumer_generation: whole.optional(),
  project_id: z.string().optional(),
  user_id: z.string().optional(),
}) satisfies z.ZodType<ConsumerAllocations>;

const microversion = z.string().transform((text, ctx): Microversion => {
  const v = parseMicroversion(text);
  if (v) return v;
  ctx.issues.push({ code: 'custom', message: 'expected a microversion such as "1.30"', input: text });
  return z.NEVER;
});
const versionRange = z.object({ min_version: microversion, max_version: microversion });

/** `GET /` (unversioned): the version document; the agent reads the first entry's range. */
export const versionDocument = z
  .object({ versions: z.tuple([versionRange], versionRange) })
  .transform((d): PlacementVersions => ({ min: d.versions[0].min_version, max: d.versions[0].max_version }));

/** A keystone v3 catalog endpoint: `region` and `region_id` are null for an endpoint in no region. */
const catalogEndpoint = z.object({
  interface: z.string(),
  url: z.string(),
  region: z.string().nullish(),
  region_id: z.string().nullish(),
});

/**
 * keystone v3 `POST /v3/auth/tokens` (201): when the token expires and, for a scoped token, the
 * service catalog (absent for an unscoped one, which then has no Placement endpoint to offer).
 */
export const keystoneTokenAnswer = z.object({
  token: z.object({
    expires_at: z.string().refine((t) => Number.isFinite(Date.parse(t)), { error: 'expected an ISO 8601 time' }),
    catalog: z.array(z.object({ type: z.string(), endpoints: z.array(catalogEndpoint) })).optional(),
  }),
});

export type KeystoneTokenAnswer = z.infer<typeof keystoneTokenAnswer>;

/** The request an answer belongs to. */
export interface AnswerSource {
  readonly method: string;
  /** The path as sent, with its query. */
  readonly path: string;
  /** `METHOD template`, e.g. `GET /resource_providers/{uuid}/inventories`. */
  readonly route: string;
  readonly status: number;
  readonly requestId?: string | undefined;
}

/**
 * The body parsed by `schema`.
 * @throws MalformedResponseError naming `from.route` and the first field that does not fit
 */
export function checkAnswer<T>(schema: z.ZodType<T>, body: unknown, from: AnswerSource): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new MalformedResponseError(
    {
      method: from.method,
      path: from.path,
      status: from.status,
      route: from.route,
      field: issue && issue.path.length > 0 ? fieldPath(issue.path) : '(body)',
      expected: (issue?.message ?? 'does not fit').replace(/^Invalid input: /, ''),
      ...(from.requestId !== undefined ? { requestId: from.requestId } : {}),
    },
    { cause: parsed.error },
  );
}

/** `["inventories", "VCPU", "total"]` -> `inventories.VCPU.total`; indexes as `[0]`. */
function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((k, i) => (typeof k === 'number' ? `[${k}]` : `${i > 0 ? '.' : ''}${String(k)}`)).join('');
}
