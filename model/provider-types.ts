/**
 * Data shapes shared by drivers (which describe the host) and the tracker (which writes Placement).
 * Field names are Placement's own, so a snapshot serializes to what `discover --json` prints and
 * what Placement accepts.
 */

/** One inventory record. Only `total` is required from a driver; see `resolveInventory`. */
export interface InventoryRecord {
  readonly total: number;
  readonly reserved?: number;
  readonly min_unit?: number;
  readonly max_unit?: number;
  readonly step_size?: number;
  /** Absent means "keep what Placement has" (or the initial ratio when the class is new). */
  readonly allocation_ratio?: number;
}

/** An inventory record with every field, as written to Placement. */
export type FullInventoryRecord = Required<InventoryRecord>;

/** Resource class name -> record. */
export type Inventories = Readonly<Record<string, InventoryRecord>>;

/** An immutable picture of one provider; changing it changes nothing in the tree. */
export interface ProviderSnapshot {
  readonly uuid: string;
  readonly name: string;
  readonly parent_provider_uuid: string | null;
  readonly root_provider_uuid: string;
  /** Placement's generation, when known (undefined for a provider not yet in Placement). */
  readonly generation: number | undefined;
  readonly inventories: Inventories;
  /** Sorted. */
  readonly traits: readonly string[];
  /** Sorted aggregate uuids. */
  readonly aggregates: readonly string[];
}

/** Resources by class, e.g. `{VGPU: 2}`. */
export type Resources = Readonly<Record<string, number>>;

/** One consumer's allocations: provider uuid -> resources. */
export type ConsumerAllocations = Readonly<Record<string, Resources>>;

/** Allocations on a tree, consumer uuid -> provider uuid -> resources (what a driver is given). */
export type AllocationsByConsumer = Readonly<Record<string, ConsumerAllocations>>;

/**
 * A driver's statement that inventory moved between providers when the tree changed shape.
 * `from` and `to` are provider uuids of the new tree or of the tree before the change; `resources`
 * is the amount of each class that moved. `consumers`, when allocations were given, says which
 * consumer's allocation moves and how much of it (it must not exceed `resources`).
 */
export interface MoveInstruction {
  readonly from: string;
  readonly to: string;
  readonly resources: Resources;
  readonly consumers?: Readonly<Record<string, Resources>>;
}

export const CUSTOM_NAME = /^CUSTOM_[A-Z0-9_]+$/;
export const RESOURCE_CLASS_NAME = /^[A-Z0-9_]+$/;

/** Placement's defaults for fields a record leaves out (`max_unit` defaults to total, as nova writes it). */
export function resolveInventory(rec: InventoryRecord, current?: FullInventoryRecord, initialRatio = 1.0): FullInventoryRecord {
  return {
    total: rec.total,
    reserved: rec.reserved ?? 0,
    min_unit: rec.min_unit ?? 1,
    max_unit: rec.max_unit ?? rec.total,
    step_size: rec.step_size ?? 1,
    allocation_ratio: rec.allocation_ratio ?? current?.allocation_ratio ?? initialRatio,
  };
}

/** A custom resource class or trait name for `name`, like os-traits' normalize_name, except that an
 * existing `CUSTOM_` prefix is not doubled. */
export function normalizeCustomName(name: string): string {
  const norm = name.toUpperCase().replace(/[^A-Z0-9]+/g, '_');
  return norm.startsWith('CUSTOM_') ? norm : `CUSTOM_${norm}`;
}
