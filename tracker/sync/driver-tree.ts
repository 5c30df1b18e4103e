/**
 * The tree a driver gets to edit in `updateProviderTree`: Placement's current shape of this host as
 * the tracker last saw it (so a driver can tell that its layout changed and say how inventory
 * moves), restricted to what this agent owns. Providers, traits and aggregates that others put in
 * our tree are left out: the driver cannot remove what it never sees, and the sync merges them back.
 * A private copy: the driver may change it freely.
 */
import { ProviderTree } from '../../model/provider-tree';
import type { Ownership } from './ownership';
import type { PlacementView } from './view';

export function treeForDriver(view: PlacementView, ownership: Ownership, root: { uuid: string; name: string }): ProviderTree {
  const tree = new ProviderTree();
  const cached = view.get(root.uuid);
  tree.newRoot(cached?.name ?? root.name, root.uuid, cached?.generation);
  if (!cached) return tree;
  for (const uuid of view.uuids()) {
    const p = view.get(uuid);
    if (!p) continue;
    if (uuid !== root.uuid) {
      if (!ownership.ownsProvider(uuid) || !p.parent_provider_uuid || !tree.exists(p.parent_provider_uuid)) continue;
      tree.newChild(p.name, p.parent_provider_uuid, uuid, p.generation);
    }
    const inv = view.known(uuid, 'inventories');
    if (inv) tree.updateInventory(uuid, inv);
    const mine = (kind: 'traits' | 'aggregates'): string[] => {
      const owned = new Set(ownership.owned(kind, uuid));
      return (view.known(uuid, kind) ?? []).filter((x) => owned.has(x));
    };
    tree.updateTraits(uuid, mine('traits'));
    tree.updateAggregates(uuid, mine('aggregates'));
  }
  return tree;
}
