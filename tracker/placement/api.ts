/**
 * The `PlacementApi` port: every Placement call the tracker and the compute manager make, typed
 * with Placement's own field names. `PlacementClient` implements it over HTTP; tests may use a fake.
 *
 * Microversions (pinned per call in the implementation): 1.14 provider trees and provider
 * allocations, 1.19 aggregates with generations, 1.20 create, 1.26 inventories, 1.6 traits, 1.7
 * resource classes, 1.28 consumer allocations (consumer generations), 1.30 reshaper. Allocations
 * stay at 1.28 for reads and writes alike: Placement warns never to mix versions below and above
 * 1.28 for one consumer, and nova (Zed) writes at 1.28-1.36 without `consumer_type`.
 *
 * Every method throws a `PlacementError` subclass (`errors.ts`) on failure.
 */
import type { FullInventoryRecord, Resources } from '../../model/provider-types';
import type { PlacementVersions } from './version';

export interface ProviderRecord {
  readonly uuid: string;
  readonly name: string;
  readonly generation: number;
  readonly parent_provider_uuid: string | null;
  readonly root_provider_uuid: string;
}

export interface InventoriesAnswer {
  readonly resource_provider_generation: number;
  readonly inventories: Readonly<Record<string, FullInventoryRecord>>;
}

export interface TraitsAnswer {
  readonly resource_provider_generation: number;
  readonly traits: readonly string[];
}

export interface AggregatesAnswer {
  readonly resource_provider_generation: number;
  readonly aggregates: readonly string[];
}

/** `GET /resource_providers/{uuid}/allocations`: consumer -> resources on this provider. */
export interface ProviderAllocationsAnswer {
  readonly resource_provider_generation: number;
  readonly allocations: Readonly<Record<string, { readonly resources: Resources }>>;
}

/** One consumer's allocations as read (`GET /allocations/{consumer}`); empty when none. */
export interface ConsumerAllocations {
  readonly allocations: Readonly<Record<string, { readonly resources: Resources; readonly generation?: number }>>;
  /** Absent when the consumer does not exist (no allocations). */
  readonly consumer_generation?: number;
  readonly project_id?: string;
  readonly user_id?: string;
}

/** The body of an allocation write for one consumer (1.28). Empty `allocations` deletes safely. */
export interface AllocationWrite {
  readonly allocations: Readonly<Record<string, { readonly resources: Resources }>>;
  readonly project_id: string;
  readonly user_id: string;
  /** null: "I expect this consumer to have no allocations". */
  readonly consumer_generation: number | null;
}

export interface ReshapeRequest {
  readonly inventories: Readonly<
    Record<string, { readonly resource_provider_generation: number; readonly inventories: Readonly<Record<string, FullInventoryRecord>> }>
  >;
  readonly allocations: Readonly<Record<string, AllocationWrite>>;
}

/** Options every call accepts. */
export interface CallOptions {
  /** The caller's global request id (X-OpenStack-Request-ID). */
  readonly requestId?: string;
}

export interface PlacementApi {
  versions(): Promise<PlacementVersions>;
  /** The endpoint in use, for log lines. */
  endpoint(): Promise<string>;

  /** Every provider in the tree containing `uuid` (empty when `uuid` is unknown). */
  providersInTree(uuid: string, o?: CallOptions): Promise<ProviderRecord[]>;
  /** Providers in any of `aggregates` with MISC_SHARES_VIA_AGGREGATE (storage pools and the like). */
  sharingProviders(aggregates: readonly string[], o?: CallOptions): Promise<ProviderRecord[]>;
  /** Creates a provider; answers with its record (1.20). @throws DuplicateNameError */
  createProvider(p: { uuid: string; name: string; parent_provider_uuid: string | null }, o?: CallOptions): Promise<ProviderRecord>;
  /** Renames a provider (parent unchanged). @throws DuplicateNameError */
  renameProvider(uuid: string, name: string, parent: string | null, o?: CallOptions): Promise<void>;
  /** @throws ProviderInUseError, CannotDeleteParentError; a 404 counts as done. */
  deleteProvider(uuid: string, o?: CallOptions): Promise<void>;

  getInventories(uuid: string, o?: CallOptions): Promise<InventoriesAnswer>;
  /** Replaces all inventories; answers with the new generation. @throws ProviderGenerationConflictError, InventoryInUseError */
  putInventories(uuid: string, generation: number, inventories: Readonly<Record<string, FullInventoryRecord>>, o?: CallOptions): Promise<InventoriesAnswer>;
  getTraits(uuid: string, o?: CallOptions): Promise<TraitsAnswer>;
  putTraits(uuid: string, generation: number, traits: readonly string[], o?: CallOptions): Promise<TraitsAnswer>;
  getAggregates(uuid: string, o?: CallOptions): Promise<AggregatesAnswer>;
  putAggregates(uuid: string, generation: number, aggregates: readonly string[], o?: CallOptions): Promise<AggregatesAnswer>;

  /** Which of `names` exist as traits. */
  existingTraits(names: readonly string[], o?: CallOptions): Promise<Set<string>>;
  /** Creates a CUSTOM_ trait if missing (idempotent). */
  ensureTrait(name: string, o?: CallOptions): Promise<void>;
  /** Creates a CUSTOM_ resource class if missing (idempotent, 1.7). */
  ensureResourceClass(name: string, o?: CallOptions): Promise<void>;

  providerAllocations(uuid: string, o?: CallOptions): Promise<ProviderAllocationsAnswer>;
  consumerAllocations(consumer: string, o?: CallOptions): Promise<ConsumerAllocations>;
  /** @throws ConsumerGenerationConflictError, PlacementConflictError (no room) */
  putAllocations(consumer: string, body: AllocationWrite, o?: CallOptions): Promise<void>;
  /** Several consumers in one transaction (1.13+). */
  postAllocations(bodies: Readonly<Record<string, AllocationWrite>>, o?: CallOptions): Promise<void>;
  /** Unconditional delete, ignoring generations; a 404 counts as done. */
  deleteAllocations(consumer: string, o?: CallOptions): Promise<void>;
  /**
   * One atomic reshape (1.30): every listed provider's inventories replaced and every listed
   * consumer's allocations written in one transaction, or nothing. With `allocations: {}` it writes
   * the inventories of many providers in one request (a new host's first registration). Answers
   * 204 without generations: Placement moves each listed provider's generation once per inventory
   * replacement (two for a non-empty list) and once per allocation change touching it.
   * @throws ProviderGenerationConflictError (a provider's generation moved),
   *   ConsumerGenerationConflictError (a consumer's did), PlacementBadRequestError (an unknown
   *   provider or resource class), InventoryInUseError, PlacementConflictError (allocations that
   *   would not fit)
   */
  reshape(req: ReshapeRequest, o?: CallOptions): Promise<void>;
}
