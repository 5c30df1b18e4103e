/**
 * `PlacementClient`: the `PlacementApi` port over HTTP, each call pinned to its microversion. The
 * rest of the agent uses only the port; it never builds a URL itself.
 *
 * Pins: every call that can be refused is sent at 1.26 or later, even where the feature itself is
 * older (traits 1.6, resource classes 1.7, aggregates with generations 1.19, create with body 1.20),
 * because Placement puts the machine-readable `code` into error answers only from 1.23 on: at 1.6 a
 * generation conflict on a traits write is a bare 409 indistinguishable from any other. 1.26 is the
 * inventory version nova uses (reserved may equal total). Listings stay at 1.14 (trees), consumer
 * allocations at 1.28 (consumer generations) and the reshaper at 1.30.
 *
 * Answers: every 2xx body the agent reads is parsed once, here, by its schema in `responses.ts`; a
 * body that does not fit is a `MalformedResponseError` naming the route and the field, never a
 * value cast to a type it does not have.
 */
import type {
  AggregatesAnswer,
  AllocationWrite,
  CallOptions,
  ConsumerAllocations,
  InventoriesAnswer,
  PlacementApi,
  ProviderAllocationsAnswer,
  ProviderRecord,
  ReshapeRequest,
  TraitsAnswer,
} from './api';
import type { z } from 'zod';
import { MalformedResponseError, PlacementNotFoundError, PlacementVersionError } from './errors';
import { routeOf, type PlacementHttp, type PlacementRequest, type PlacementResponse } from './http';
import {
  aggregatesAnswer,
  checkAnswer,
  consumerAllocationsAnswer,
  createdProviderAnswer,
  inventoriesAnswer,
  providerAllocationsAnswer,
  providerListAnswer,
  traitListAnswer,
  traitsAnswer,
  versionDocument,
} from './responses';
import { compareMicroversion, formatMicroversion, MIN_PLACEMENT_MICROVERSION, type PlacementVersions } from './version';
import type { FullInventoryRecord } from '../../model/provider-types';

export type { ProviderRecord } from './api';

/** The microversion of every call that can be refused with a coded error (see above). */
export const MV_WRITE = '1.26';

const rp = (uuid: string, rest = ''): string => `/resource_providers/${encodeURIComponent(uuid)}${rest}`;

/** `GET /resource_providers?in_tree=...`: the route with its query's names, for error messages. */
function routeName(method: string, path: string): string {
  const query = path.split('?')[1];
  const names = query ? [...new URLSearchParams(query).keys()].map((k) => `${k}=...`).join('&') : '';
  return `${method} ${routeOf(path)}${names ? `?${names}` : ''}`;
}

export class PlacementClient implements PlacementApi {
  constructor(readonly http: PlacementHttp) {}

  private send(req: PlacementRequest, o?: CallOptions): Promise<PlacementResponse> {
    return this.http.request(o?.requestId ? { ...req, globalRequestId: o.requestId } : req);
  }

  /** Sends `req` and parses the answer with `schema`. @throws MalformedResponseError, PlacementError */
  private async read<T>(req: PlacementRequest, schema: z.ZodType<T>, o?: CallOptions): Promise<T> {
    const res = await this.send(req, o);
    return checkAnswer(schema, res.data, { method: req.method, path: req.path, route: routeName(req.method, req.path), status: res.status, requestId: res.requestId });
  }

  endpoint(): Promise<string> {
    return this.http.endpoint();
  }

  /**
   * `GET /`: the supported microversion range.
   * @throws PlacementVersionError when the answer is not a version document, its cause the
   *   `MalformedResponseError` naming the field (an outage to callers that walk the cause chain)
   */
  async versions(): Promise<PlacementVersions> {
    try {
      return await this.read({ method: 'GET', path: '/', anonymous: true }, versionDocument);
    } catch (e) {
      if (!(e instanceof MalformedResponseError)) throw e;
      const info = { method: 'GET', path: '/', ...(e.status !== undefined ? { status: e.status } : {}) };
      throw new PlacementVersionError(`GET /: the answer is not a Placement version document (${e.message})`, info, { cause: e });
    }
  }

  /**
   * Checks that Placement supports every microversion the agent pins.
   * @throws PlacementVersionError naming the endpoint, its max_version and what is needed.
   */
  async assertUsable(): Promise<PlacementVersions> {
    const v = await this.versions();
    if (compareMicroversion(v.max, MIN_PLACEMENT_MICROVERSION) < 0) {
      throw new PlacementVersionError(
        `Placement at ${await this.endpoint()} supports microversions up to ${formatMicroversion(v.max)}; ` +
          `compute-agent needs ${formatMicroversion(MIN_PLACEMENT_MICROVERSION)} or later (Placement from Train onwards)`,
        { method: 'GET', path: '/' },
      );
    }
    return v;
  }

  /** `GET /resource_providers[?in_tree=uuid]` at 1.14. */
  async listProviders(inTree?: string, o?: CallOptions): Promise<ProviderRecord[]> {
    const path = inTree ? `/resource_providers?in_tree=${encodeURIComponent(inTree)}` : '/resource_providers';
    return (await this.read({ method: 'GET', path, microversion: '1.14' }, providerListAnswer, o)).resource_providers;
  }

  providersInTree(uuid: string, o?: CallOptions): Promise<ProviderRecord[]> {
    return this.listProviders(uuid, o);
  }

  async sharingProviders(aggregates: readonly string[], o?: CallOptions): Promise<ProviderRecord[]> {
    if (aggregates.length === 0) return [];
    // member_of=in: (1.3) and required= (1.18) on the provider listing.
    const path = `/resource_providers?member_of=in:${aggregates.map(encodeURIComponent).join(',')}&required=MISC_SHARES_VIA_AGGREGATE`;
    return (await this.read({ method: 'GET', path, microversion: MV_WRITE }, providerListAnswer, o)).resource_providers;
  }

  createProvider(p: { uuid: string; name: string; parent_provider_uuid: string | null }, o?: CallOptions): Promise<ProviderRecord> {
    const body = p.parent_provider_uuid ? p : { uuid: p.uuid, name: p.name };
    return this.read({ method: 'POST', path: '/resource_providers', microversion: MV_WRITE, body, retry: 'refused-only' }, createdProviderAnswer, o);
  }

  async renameProvider(uuid: string, name: string, parent: string | null, o?: CallOptions): Promise<void> {
    // Placement sets only the fields present; the parent is sent as it is, so nothing else changes.
    const body = parent ? { name, parent_provider_uuid: parent } : { name };
    await this.send({ method: 'PUT', path: rp(uuid), microversion: MV_WRITE, body }, o);
  }

  async deleteProvider(uuid: string, o?: CallOptions): Promise<void> {
    try {
      await this.send({ method: 'DELETE', path: rp(uuid), microversion: MV_WRITE }, o);
    } catch (e) {
      if (!(e instanceof PlacementNotFoundError)) throw e;
    }
  }

  getInventories(uuid: string, o?: CallOptions): Promise<InventoriesAnswer> {
    return this.read({ method: 'GET', path: rp(uuid, '/inventories'), microversion: MV_WRITE }, inventoriesAnswer, o);
  }

  putInventories(uuid: string, generation: number, inventories: Readonly<Record<string, FullInventoryRecord>>, o?: CallOptions): Promise<InventoriesAnswer> {
    const body = { resource_provider_generation: generation, inventories };
    return this.read({ method: 'PUT', path: rp(uuid, '/inventories'), microversion: MV_WRITE, body }, inventoriesAnswer, o);
  }

  getTraits(uuid: string, o?: CallOptions): Promise<TraitsAnswer> {
    return this.read({ method: 'GET', path: rp(uuid, '/traits'), microversion: MV_WRITE }, traitsAnswer, o);
  }

  putTraits(uuid: string, generation: number, traits: readonly string[], o?: CallOptions): Promise<TraitsAnswer> {
    const body = { resource_provider_generation: generation, traits };
    return this.read({ method: 'PUT', path: rp(uuid, '/traits'), microversion: MV_WRITE, body }, traitsAnswer, o);
  }

  getAggregates(uuid: string, o?: CallOptions): Promise<AggregatesAnswer> {
    return this.read({ method: 'GET', path: rp(uuid, '/aggregates'), microversion: MV_WRITE }, aggregatesAnswer, o);
  }

  putAggregates(uuid: string, generation: number, aggregates: readonly string[], o?: CallOptions): Promise<AggregatesAnswer> {
    const body = { resource_provider_generation: generation, aggregates };
    return this.read({ method: 'PUT', path: rp(uuid, '/aggregates'), microversion: MV_WRITE, body }, aggregatesAnswer, o);
  }

  async existingTraits(names: readonly string[], o?: CallOptions): Promise<Set<string>> {
    if (names.length === 0) return new Set();
    const q = `in:${names.map(encodeURIComponent).join(',')}`;
    const data = await this.read({ method: 'GET', path: `/traits?name=${q}`, microversion: MV_WRITE }, traitListAnswer, o);
    return new Set(data.traits);
  }

  async ensureTrait(name: string, o?: CallOptions): Promise<void> {
    await this.send({ method: 'PUT', path: `/traits/${encodeURIComponent(name)}`, microversion: MV_WRITE, ok: [201, 204] }, o);
  }

  async ensureResourceClass(name: string, o?: CallOptions): Promise<void> {
    await this.send({ method: 'PUT', path: `/resource_classes/${encodeURIComponent(name)}`, microversion: MV_WRITE, ok: [201, 204] }, o);
  }

  providerAllocations(uuid: string, o?: CallOptions): Promise<ProviderAllocationsAnswer> {
    return this.read({ method: 'GET', path: rp(uuid, '/allocations'), microversion: '1.14' }, providerAllocationsAnswer, o);
  }

  consumerAllocations(consumer: string, o?: CallOptions): Promise<ConsumerAllocations> {
    return this.read({ method: 'GET', path: `/allocations/${encodeURIComponent(consumer)}`, microversion: '1.28' }, consumerAllocationsAnswer, o);
  }

  async putAllocations(consumer: string, body: AllocationWrite, o?: CallOptions): Promise<void> {
    await this.send({ method: 'PUT', path: `/allocations/${encodeURIComponent(consumer)}`, microversion: '1.28', body, ok: [204], retry: 'refused-only' }, o);
  }

  async postAllocations(bodies: Readonly<Record<string, AllocationWrite>>, o?: CallOptions): Promise<void> {
    await this.send({ method: 'POST', path: '/allocations', microversion: '1.28', body: bodies, ok: [204], retry: 'refused-only' }, o);
  }

  async deleteAllocations(consumer: string, o?: CallOptions): Promise<void> {
    try {
      await this.send({ method: 'DELETE', path: `/allocations/${encodeURIComponent(consumer)}`, microversion: '1.28', ok: [204] }, o);
    } catch (e) {
      if (!(e instanceof PlacementNotFoundError)) throw e;
    }
  }

  async reshape(req: ReshapeRequest, o?: CallOptions): Promise<void> {
    await this.send({ method: 'POST', path: '/reshaper', microversion: '1.30', body: req, ok: [204], retry: 'refused-only' }, o);
  }
}
