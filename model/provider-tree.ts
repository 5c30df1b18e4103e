/**
 * ProviderTree: an in-memory model of resource providers (uuid, name, parent, generation,
 * inventories, traits, aggregates), modelled on nova's `provider_tree.py`.
 *
 * It is: the shape a virt driver fills in `updateProviderTree`, and the tracker's cache of what
 * Placement holds. It is not: a Placement client. It never does I/O, and it is not stored anywhere.
 *
 * Contracts:
 * - Immutable snapshots out (`data`, `snapshot`), mutable state in; a snapshot never changes.
 * - Names and uuids are unique within one tree; adding a duplicate throws.
 * - `update*` methods return whether the content changed, and set the generation only when one is
 *   passed, so the cache's generation always comes from Placement's last answer.
 * - Not synchronized: a tree has one owner at a time (the driver during `updateProviderTree`, the
 *   sync loop otherwise). `clone()` hands a private copy across.
 */
import { randomUUID } from 'node:crypto';
import type { Inventories, InventoryRecord, ProviderSnapshot } from './provider-types';

/** A name or uuid that the tree does not hold. */
export class ProviderNotFoundError extends Error {
  constructor(readonly ref: string) {
    super(`no provider named or with uuid ${ref} in the tree`);
    this.name = 'ProviderNotFoundError';
  }
}

/** Adding a provider whose name or uuid is already in the tree. */
export class DuplicateProviderError extends Error {
  constructor(readonly ref: string) {
    super(`a provider named or with uuid ${ref} is already in the tree`);
    this.name = 'DuplicateProviderError';
  }
}

interface Node {
  uuid: string;
  name: string;
  parent: string | null;
  generation: number | undefined;
  inventories: Record<string, InventoryRecord>;
  traits: Set<string>;
  aggregates: Set<string>;
  children: string[];
}

function sameRecord(a: InventoryRecord, b: InventoryRecord): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof InventoryRecord>;
  for (const k of keys) if (a[k] !== b[k]) return false;
  return true;
}

/** Equal inventories, key by key and field by field. */
export function sameInventories(a: Inventories, b: Inventories): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((rc) => {
    const rb = b[rc];
    const ra = a[rc];
    return ra !== undefined && rb !== undefined && sameRecord(ra, rb);
  });
}

function sameSet(a: ReadonlySet<string>, b: Iterable<string>): boolean {
  const bs = new Set(b);
  return a.size === bs.size && [...a].every((x) => bs.has(x));
}

export class ProviderTree {
  private readonly byUuid = new Map<string, Node>();
  private readonly uuidByName = new Map<string, string>();
  private readonly roots: string[] = [];

  /** Adds a root provider; the uuid is generated when not given. @throws DuplicateProviderError */
  newRoot(name: string, uuid: string = randomUUID(), generation?: number): string {
    this.add({ uuid, name, parent: null, generation });
    this.roots.push(uuid);
    return uuid;
  }

  /** Adds a child of `parent` (name or uuid). @throws ProviderNotFoundError, DuplicateProviderError */
  newChild(name: string, parent: string, uuid: string = randomUUID(), generation?: number): string {
    const p = this.find(parent);
    this.add({ uuid, name, parent: p.uuid, generation });
    p.children.push(uuid);
    return uuid;
  }

  /** Removes a provider and all its descendants. @throws ProviderNotFoundError */
  remove(ref: string): void {
    const node = this.find(ref);
    for (const child of [...node.children]) this.remove(child);
    this.byUuid.delete(node.uuid);
    this.uuidByName.delete(node.name);
    if (node.parent) {
      const p = this.byUuid.get(node.parent);
      if (p) p.children = p.children.filter((c) => c !== node.uuid);
    } else {
      this.roots.splice(this.roots.indexOf(node.uuid), 1);
    }
  }

  exists(ref: string): boolean {
    return this.byUuid.has(ref) || this.uuidByName.has(ref);
  }

  /** The uuid of a provider given its name or uuid. @throws ProviderNotFoundError */
  uuidOf(ref: string): string {
    return this.find(ref).uuid;
  }

  /** An immutable snapshot of one provider. @throws ProviderNotFoundError */
  data(ref: string): ProviderSnapshot {
    const n = this.find(ref);
    const inventories: Record<string, InventoryRecord> = {};
    for (const [rc, rec] of Object.entries(n.inventories)) inventories[rc] = Object.freeze({ ...rec });
    return Object.freeze({
      uuid: n.uuid,
      name: n.name,
      parent_provider_uuid: n.parent,
      root_provider_uuid: this.rootOf(n).uuid,
      generation: n.generation,
      inventories: Object.freeze(inventories),
      traits: Object.freeze([...n.traits].sort()),
      aggregates: Object.freeze([...n.aggregates].sort()),
    });
  }

  /** Uuids of the whole tree (or of the subtree under `ref`), parents before children. */
  uuids(ref?: string): string[] {
    const out: string[] = [];
    const walk = (uuid: string): void => {
      out.push(uuid);
      for (const c of this.byUuid.get(uuid)?.children ?? []) walk(c);
    };
    if (ref) walk(this.find(ref).uuid);
    else for (const r of this.roots) walk(r);
    return out;
  }

  /** Snapshots of every provider, parents before children. */
  snapshot(ref?: string): ProviderSnapshot[] {
    return this.uuids(ref).map((u) => this.data(u));
  }

  rootUuids(): string[] {
    return [...this.roots];
  }

  /** Replaces the inventory; returns whether it changed. @throws ProviderNotFoundError */
  updateInventory(ref: string, inventories: Inventories, generation?: number): boolean {
    const n = this.find(ref);
    if (generation !== undefined) n.generation = generation;
    if (sameInventories(n.inventories, inventories)) return false;
    n.inventories = {};
    for (const [rc, rec] of Object.entries(inventories)) n.inventories[rc] = { ...rec };
    return true;
  }

  /** Replaces the traits; returns whether they changed. */
  updateTraits(ref: string, traits: Iterable<string>, generation?: number): boolean {
    const n = this.find(ref);
    if (generation !== undefined) n.generation = generation;
    const next = new Set(traits);
    if (sameSet(n.traits, next)) return false;
    n.traits = next;
    return true;
  }

  addTraits(ref: string, ...traits: string[]): boolean {
    const n = this.find(ref);
    return this.updateTraits(ref, [...n.traits, ...traits]);
  }

  removeTraits(ref: string, ...traits: string[]): boolean {
    const n = this.find(ref);
    const drop = new Set(traits);
    return this.updateTraits(ref, [...n.traits].filter((t) => !drop.has(t)));
  }

  /** Replaces the aggregates; returns whether they changed. */
  updateAggregates(ref: string, aggregates: Iterable<string>, generation?: number): boolean {
    const n = this.find(ref);
    if (generation !== undefined) n.generation = generation;
    const next = new Set(aggregates);
    if (sameSet(n.aggregates, next)) return false;
    n.aggregates = next;
    return true;
  }

  addAggregates(ref: string, ...aggregates: string[]): boolean {
    const n = this.find(ref);
    return this.updateAggregates(ref, [...n.aggregates, ...aggregates]);
  }

  /**
   * Renames a provider, keeping its uuid, content and place in the tree (Placement renames with
   * `PUT /resource_providers/{uuid}`). Returns whether the name changed.
   * @throws ProviderNotFoundError, DuplicateProviderError when another provider has `name`
   */
  rename(ref: string, name: string): boolean {
    const n = this.find(ref);
    if (n.name === name) return false;
    if (this.uuidByName.has(name)) throw new DuplicateProviderError(name);
    this.uuidByName.delete(n.name);
    n.name = name;
    this.uuidByName.set(name, n.uuid);
    return true;
  }

  setGeneration(ref: string, generation: number | undefined): void {
    this.find(ref).generation = generation;
  }

  /** A deep, independent copy. */
  clone(): ProviderTree {
    const copy = new ProviderTree();
    for (const s of this.snapshot()) copy.insert(s);
    return copy;
  }

  /**
   * Adds (or replaces the content of) a provider from a snapshot; the parent must already be
   * present. Used to build a tree from Placement's records, parents first.
   * @throws ProviderNotFoundError for a missing parent, DuplicateProviderError for a name clash
   */
  insert(s: ProviderSnapshot): void {
    if (!this.byUuid.has(s.uuid)) {
      if (s.parent_provider_uuid) this.newChild(s.name, s.parent_provider_uuid, s.uuid, s.generation);
      else this.newRoot(s.name, s.uuid, s.generation);
    }
    const n = this.find(s.uuid);
    if (n.name !== s.name) {
      if (this.uuidByName.has(s.name)) throw new DuplicateProviderError(s.name);
      this.uuidByName.delete(n.name);
      n.name = s.name;
      this.uuidByName.set(s.name, s.uuid);
    }
    this.updateInventory(s.uuid, s.inventories, s.generation);
    this.updateTraits(s.uuid, s.traits);
    this.updateAggregates(s.uuid, s.aggregates);
  }

  private add(spec: { uuid: string; name: string; parent: string | null; generation: number | undefined }): void {
    if (this.byUuid.has(spec.uuid)) throw new DuplicateProviderError(spec.uuid);
    if (this.uuidByName.has(spec.name)) throw new DuplicateProviderError(spec.name);
    this.byUuid.set(spec.uuid, { ...spec, inventories: {}, traits: new Set(), aggregates: new Set(), children: [] });
    this.uuidByName.set(spec.name, spec.uuid);
  }

  private find(ref: string): Node {
    const node = this.byUuid.get(ref) ?? this.byUuid.get(this.uuidByName.get(ref) ?? '');
    if (!node) throw new ProviderNotFoundError(ref);
    return node;
  }

  private rootOf(n: Node): Node {
    let cur = n;
    for (let p = cur.parent; p; p = cur.parent) {
      const parent = this.byUuid.get(p);
      if (!parent) break;
      cur = parent;
    }
    return cur;
  }
}
