/**
 * The shapes of a layout plan: what the driver wants the compute node's subtree to be, before it
 * is applied to a `ProviderTree` (`apply.ts`).
 *
 * It is: plain data computed from host facts and configuration (`plan.ts`). It is not: the tree;
 * applying it decides uuids, renames, removals and move instructions.
 */
import type { InventoryRecord } from '../../model/provider-types';

/** One child provider the driver wants under the compute node. */
export interface ChildPlan {
  readonly kind: 'gpu' | 'nic';
  /** Full provider name. */
  readonly name: string;
  /** Stable device key; the provider's uuid is derived from it (`ids.ts`). */
  readonly key: string;
  /**
   * The physical thing the inventory belongs to: `gpu:<address>`, or `nic:<card>` for every port
   * of one card. Inventory moves only between providers of one lineage (or between a GPU and the
   * root for device classes).
   */
  readonly lineage: string;
  readonly inventories: Readonly<Record<string, InventoryRecord>>;
  readonly traits: readonly string[];
}

/** The whole plan for one compute node. */
export interface HostPlan {
  /** Root inventory for the classes the driver decides now. */
  readonly rootInventories: Readonly<Record<string, InventoryRecord>>;
  /** Root classes whose probe failed: keep the tree's record as it is. */
  readonly keepRootClass: (rc: string) => boolean;
  /** Root traits the driver wants. */
  readonly rootTraits: readonly string[];
  /** Root traits the driver controls (added or removed); others are left alone. */
  readonly ownsRootTrait: (trait: string) => boolean;
  /** Owned root traits whose probe failed: keep them as they are. */
  readonly keepRootTrait: (trait: string) => boolean;
  readonly children: readonly ChildPlan[];
  /** Existing owned children to leave untouched (their probe failed or their facts are incomplete). */
  readonly keepChild: (name: string, kind: 'gpu' | 'nic') => boolean;
  /** The sharing provider serving DISK_GB instead of the root, when there is one. */
  readonly diskGbProvider?: string;
  /** Things worth a log line (reserved clamped, and such). */
  readonly notes: readonly string[];
}
