/**
 * A TreeSource for tracker tests whose layout the test edits between cycles: a root with
 * inventories and traits, and children. Moves are whatever the test queues for the next cycle.
 */
import type { TreeSource } from '../../tracker/tracker';
import type { ProviderTree } from '../../model/provider-tree';
import type { AllocationsByConsumer, Inventories, MoveInstruction } from '../../model/provider-types';

export interface ChildSpec {
  uuid: string;
  name: string;
  inventories: Inventories;
  traits?: string[];
  aggregates?: string[];
}

export class ScriptedDriver implements TreeSource {
  root: { inventories: Inventories; traits: string[]; aggregates: string[] } = { inventories: {}, traits: [], aggregates: [] };
  children: ChildSpec[] = [];
  /** Moves returned by the next call(s) until cleared. */
  moves: MoveInstruction[] = [];
  /** Allocations given on the last call, if any. */
  lastAllocations: AllocationsByConsumer | undefined;
  calls = 0;

  updateProviderTree(tree: ProviderTree, nodename: string, allocations?: AllocationsByConsumer): Promise<readonly MoveInstruction[]> {
    this.calls++;
    this.lastAllocations = allocations;
    tree.updateInventory(nodename, this.root.inventories);
    tree.updateTraits(nodename, this.root.traits);
    tree.updateAggregates(nodename, this.root.aggregates);
    const want = new Set(this.children.map((c) => c.uuid));
    for (const s of tree.snapshot()) if (s.parent_provider_uuid && !want.has(s.uuid) && tree.exists(s.uuid)) tree.remove(s.uuid);
    for (const c of this.children) {
      if (!tree.exists(c.uuid)) tree.newChild(c.name, nodename, c.uuid);
      tree.updateInventory(c.uuid, c.inventories);
      tree.updateTraits(c.uuid, c.traits ?? []);
      tree.updateAggregates(c.uuid, c.aggregates ?? []);
    }
    return Promise.resolve(this.moves);
  }
}
