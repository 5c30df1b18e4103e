/**
 * PlacementView: the tracker's cache of what Placement holds for this host's provider tree.
 *
 * It is: per provider, the record (uuid, name, parent, generation) and each aspect (inventories,
 * traits, aggregates, allocations) with the generation it was read at. Every change Placement makes
 * to a provider (inventory, traits, aggregates, an allocation written on it) bumps that generation,
 * so an aspect read at the provider's current generation is exactly Placement's truth (but for an
 * allocation merely taken off a provider, which moves nothing: this agent's own removals are
 * recorded with `dropConsumer`, others' show at the next re-read); one read at
 * an older generation may be stale and is re-read before the tracker writes from it. This is what
 * lets a steady-state cycle cost one `GET ?in_tree` and no writes, and a scheduler claim cost one
 * re-read of the one aspect about to be written (nova drops and re-reads the whole tree instead).
 *
 * It is not: a Placement client (no I/O here), or the desired state (that is the driver's tree).
 * Not synchronized: owned by the tracker, which serializes cycles and claims.
 */
import type { ProviderRecord } from '../placement/api';
import type { FullInventoryRecord, Resources } from '../../model/provider-types';

export interface AspectData {
  inventories: Readonly<Record<string, FullInventoryRecord>>;
  traits: readonly string[];
  aggregates: readonly string[];
  /** consumer -> resources on this provider */
  allocations: Readonly<Record<string, Resources>>;
}
export type Aspect = keyof AspectData;
export const ASSOCIATIONS: readonly Aspect[] = ['inventories', 'traits', 'aggregates'];

interface Cached<T> {
  readonly gen: number;
  readonly data: T;
}

export interface CachedProvider {
  readonly uuid: string;
  readonly name: string;
  readonly parent_provider_uuid: string | null;
  readonly generation: number;
  readonly aspects: { readonly [A in Aspect]?: Cached<AspectData[A]> };
}

interface Mutable {
  uuid: string;
  name: string;
  parent_provider_uuid: string | null;
  generation: number;
  aspects: { [A in Aspect]?: Cached<AspectData[A]> };
}

export interface ListingChanges {
  readonly added: readonly string[];
  readonly removed: readonly string[];
  /** Providers whose generation moved since the view last saw them. */
  readonly bumped: readonly string[];
}

export class PlacementView {
  private readonly providers = new Map<string, Mutable>();

  /** Providers in Placement's order from the last listing (parents first). */
  uuids(): string[] {
    return [...this.providers.keys()];
  }

  has(uuid: string): boolean {
    return this.providers.has(uuid);
  }

  get(uuid: string): CachedProvider | undefined {
    return this.providers.get(uuid);
  }

  /** Number of providers known. */
  get size(): number {
    return this.providers.size;
  }

  /**
   * Takes a `GET /resource_providers?in_tree=` answer as the truth about which providers exist and
   * their generations. Aspects are kept; a moved generation makes them stale, not wrong.
   */
  applyListing(records: readonly ProviderRecord[]): ListingChanges {
    const seen = new Set<string>();
    const added: string[] = [];
    const bumped: string[] = [];
    // Rebuild in listing order so iteration stays parents-first.
    const old = new Map(this.providers);
    this.providers.clear();
    for (const r of records) {
      seen.add(r.uuid);
      const prev = old.get(r.uuid);
      if (!prev) added.push(r.uuid);
      else if (prev.generation !== r.generation) bumped.push(r.uuid);
      this.providers.set(r.uuid, {
        uuid: r.uuid,
        name: r.name,
        parent_provider_uuid: r.parent_provider_uuid,
        generation: r.generation,
        aspects: prev?.aspects ?? {},
      });
    }
    const removed = [...old.keys()].filter((u) => !seen.has(u));
    return { added, removed, bumped };
  }

  /** Records a provider this agent just created (generation 0, every aspect known empty). */
  addCreated(r: ProviderRecord): void {
    const gen = r.generation;
    this.providers.set(r.uuid, {
      uuid: r.uuid,
      name: r.name,
      parent_provider_uuid: r.parent_provider_uuid,
      generation: gen,
      aspects: {
        inventories: { gen, data: {} },
        traits: { gen, data: [] },
        aggregates: { gen, data: [] },
        allocations: { gen, data: {} },
      },
    });
  }

  /** Records a rename (which Placement does without a generation change). */
  rename(uuid: string, name: string): void {
    const p = this.providers.get(uuid);
    if (p) p.name = name;
  }

  remove(uuid: string): void {
    this.providers.delete(uuid);
  }

  clear(): void {
    this.providers.clear();
  }

  /** The aspect's data if it was read at the provider's current generation. */
  fresh<A extends Aspect>(uuid: string, aspect: A): AspectData[A] | undefined {
    const p = this.providers.get(uuid);
    const a = p?.aspects[aspect];
    return p && a && a.gen === p.generation ? a.data : undefined;
  }

  /** The aspect's last known data, fresh or not. */
  known<A extends Aspect>(uuid: string, aspect: A): AspectData[A] | undefined {
    return this.providers.get(uuid)?.aspects[aspect]?.data;
  }

  /** Aspects of `uuid` that are not fresh. */
  stale(uuid: string, aspects: readonly Aspect[] = ASSOCIATIONS): Aspect[] {
    return aspects.filter((a) => this.fresh(uuid, a) === undefined);
  }

  /**
   * Stores an aspect read from Placement at `generation`. A read newer than the listing moves the
   * provider's generation forward, which makes the other aspects stale (someone else wrote).
   */
  setRead<A extends Aspect>(uuid: string, aspect: A, generation: number, data: AspectData[A]): void {
    const p = this.providers.get(uuid);
    if (!p) return;
    if (generation !== p.generation) p.generation = generation;
    (p.aspects as Record<Aspect, Cached<unknown>>)[aspect] = { gen: generation, data };
  }

  /**
   * Stores the result of this agent's own successful write, made at `from` and answered with
   * `to`. Aspects that were fresh at `from` stay fresh: the write was the only change between.
   */
  setWritten<A extends Aspect>(uuid: string, aspect: A, from: number, to: number, data: AspectData[A]): void {
    const p = this.providers.get(uuid);
    if (!p) return;
    const aspects = p.aspects as Record<Aspect, Cached<unknown> | undefined>;
    for (const key of Object.keys(aspects) as Aspect[]) {
      const a = aspects[key];
      if (a && a.gen === from) aspects[key] = { gen: to, data: a.data };
    }
    aspects[aspect] = { gen: to, data };
    p.generation = to;
  }

  /**
   * Records this agent's own write that took `consumer` off every provider but those in `kept`.
   * Placement does not move a provider's generation when an allocation only leaves it (`DELETE
   * /allocations/{consumer}`, or a write that no longer names the provider), so the cached
   * allocations would still be taken as fresh and keep listing the consumer there.
   */
  dropConsumer(consumer: string, kept: ReadonlySet<string> = new Set()): void {
    for (const p of this.providers.values()) {
      const a = p.aspects.allocations;
      if (!a || kept.has(p.uuid) || !(consumer in a.data)) continue;
      p.aspects.allocations = { gen: a.gen, data: Object.fromEntries(Object.entries(a.data).filter(([c]) => c !== consumer)) };
    }
  }

  /** Forgets every aspect of `uuid`, so the next use re-reads them (after an unexpected 409). */
  invalidate(uuid: string): void {
    const p = this.providers.get(uuid);
    if (p) p.aspects = {};
  }
}
