/**
 * Applies a `HostPlan` to the `ProviderTree` the tracker hands a driver, and returns the move
 * instructions the change implies.
 *
 * It is: the one place that mutates the tree for the built-in drivers. It owns the root's
 * inventory, the root traits the plan says it owns, and the children of the root named like a GPU
 * (`<nodename>_pci_...`) or NIC (`<nodename>:...`) provider. Everything else (other roots such as
 * sharing providers, children other services created, traits the tracker or an operator set) is
 * left alone, as nova's contract for `update_provider_tree` requires.
 *
 * Matching a planned child to an existing provider: first by the uuid derived from the device key
 * (the same device, possibly renamed), then by name (a provider an older agent created with a
 * random uuid), else a new provider with the derived uuid. Renames go through temporary names, so
 * two interfaces that swap names swap providers cleanly.
 */
import { ProviderTree } from '../../model/provider-tree';
import type { AllocationsByConsumer, MoveInstruction } from '../../model/provider-types';
import { deviceProviderUuid, gpuAddressFromName, isNicProviderName } from './ids';
import { computeMoves, type Locator, type MoveSide } from './moves';
import type { ChildPlan, HostPlan } from './plan-types';

/** The tracker did not create the compute node's root provider before calling the driver. */
export class RootProviderMissingError extends Error {
  constructor(readonly nodename: string) {
    super(`the provider tree has no provider named ${nodename}; the tracker creates the root before calling the driver`);
    this.name = 'RootProviderMissingError';
  }
}

export interface ApplyInput {
  readonly tree: ProviderTree;
  readonly nodename: string;
  readonly plan: HostPlan;
  readonly allocations?: AllocationsByConsumer;
  readonly locate?: Locator;
  /** Provider uuid -> lineage, remembered across calls by the driver; updated here. */
  readonly lineages: Map<string, string>;
}

export interface ApplyResult {
  readonly moves: MoveInstruction[];
  readonly warnings: string[];
}

type Kind = 'gpu' | 'nic';

function kindOf(nodename: string, name: string): Kind | undefined {
  if (gpuAddressFromName(nodename, name)) return 'gpu';
  if (isNicProviderName(nodename, name)) return 'nic';
  return undefined;
}

function ownedChildren(tree: ProviderTree, root: string, nodename: string): Array<{ uuid: string; name: string; kind: Kind }> {
  return tree
    .snapshot(root)
    .filter((p) => p.parent_provider_uuid === root)
    .flatMap((p) => {
      const kind = kindOf(nodename, p.name);
      return kind ? [{ uuid: p.uuid, name: p.name, kind }] : [];
    });
}

function sides(tree: ProviderTree, uuids: string[], lineage: (uuid: string, name: string) => string | undefined): Map<string, MoveSide> {
  const out = new Map<string, MoveSide>();
  for (const uuid of uuids) {
    const d = tree.data(uuid);
    const l = lineage(uuid, d.name);
    out.set(uuid, { uuid, name: d.name, inventories: d.inventories, ...(l ? { lineage: l } : {}) });
  }
  return out;
}

function sharingSide(tree: ProviderTree, uuid: string): MoveSide {
  const d = tree.data(uuid);
  return { uuid, name: d.name, lineage: 'sharing', inventories: d.inventories };
}

/** Decides, for each planned child, the existing provider it takes over (if any). */
function claim(tree: ProviderTree, root: string, nodename: string, plan: HostPlan): Map<ChildPlan, string | undefined> {
  const owned = new Map(ownedChildren(tree, root, nodename).map((c) => [c.uuid, c]));
  const derived = new Map(plan.children.map((c) => [c, deviceProviderUuid(root, c.key)]));
  const derivedSet = new Set(derived.values());
  const taken = new Set<string>();
  const out = new Map<ChildPlan, string | undefined>();
  for (const child of plan.children) {
    const d = derived.get(child) as string;
    if (owned.has(d) && !taken.has(d)) {
      out.set(child, d);
      taken.add(d);
    }
  }
  for (const child of plan.children) {
    if (out.has(child)) continue;
    const byName = tree.exists(child.name) ? tree.uuidOf(child.name) : undefined;
    if (byName && owned.has(byName) && !taken.has(byName) && !derivedSet.has(byName)) {
      out.set(child, byName);
      taken.add(byName);
    } else out.set(child, undefined);
  }
  return out;
}

/** Applies the plan; returns the moves it implies. @throws RootProviderMissingError */
export function applyPlan(input: ApplyInput): ApplyResult {
  const { tree, nodename, plan, lineages } = input;
  if (!tree.exists(nodename)) throw new RootProviderMissingError(nodename);
  const root = tree.uuidOf(nodename);
  const warnings: string[] = [];
  const lineageBefore = (uuid: string, name: string): string | undefined => {
    if (uuid === root) return 'root';
    const addr = gpuAddressFromName(nodename, name);
    return lineages.get(uuid) ?? (addr ? `gpu:${addr}` : undefined);
  };
  const before = sides(tree, [root, ...ownedChildren(tree, root, nodename).map((c) => c.uuid)], lineageBefore);

  const current = tree.data(root);
  const inv = { ...plan.rootInventories };
  for (const [rc, rec] of Object.entries(current.inventories)) if (plan.keepRootClass(rc)) inv[rc] = rec;
  tree.updateInventory(root, inv);
  const keptTraits = current.traits.filter((t) => !plan.ownsRootTrait(t) || plan.keepRootTrait(t));
  tree.updateTraits(root, [...keptTraits, ...plan.rootTraits]);

  const claims = claim(tree, root, nodename, plan);
  const renames: Array<[string, string]> = [];
  for (const [child, uuid] of claims) if (uuid && tree.data(uuid).name !== child.name) renames.push([uuid, child.name]);
  for (const [uuid] of renames) tree.rename(uuid, `${tree.data(uuid).name}#renaming#${uuid}`);
  const claimed = new Set([...claims.values()].filter((u): u is string => u !== undefined));
  for (const c of ownedChildren(tree, root, nodename)) {
    if (!claimed.has(c.uuid) && !plan.keepChild(c.name, c.kind)) tree.remove(c.uuid);
  }
  for (const [uuid, name] of renames) tree.rename(uuid, name);

  const lineageAfter = new Map<string, string>();
  for (const [child, existing] of claims) {
    let uuid = existing;
    if (!uuid) {
      if (tree.exists(child.name)) {
        warnings.push(`${child.name} already exists outside the driver's providers; not reported`);
        continue;
      }
      uuid = tree.newChild(child.name, root, deviceProviderUuid(root, child.key));
    }
    tree.updateInventory(uuid, child.inventories);
    tree.updateTraits(uuid, child.traits);
    lineageAfter.set(uuid, child.lineage);
  }
  const afterIds = [root, ...ownedChildren(tree, root, nodename).map((c) => c.uuid)];
  const after = sides(tree, afterIds, (uuid, name) => (uuid === root ? 'root' : lineageAfter.get(uuid) ?? lineageBefore(uuid, name)));
  for (const [uuid, side] of after) if (side.lineage && uuid !== root) lineages.set(uuid, side.lineage);
  // Remember lineages of this call's providers only; a removed provider is remembered one more
  // round, in case the tracker could not delete it and hands it back.
  for (const uuid of [...lineages.keys()]) if (!before.has(uuid) && !after.has(uuid)) lineages.delete(uuid);

  const { moves, warnings: moveWarnings } = computeMoves({
    before,
    after,
    root,
    ...(input.allocations ? { allocations: input.allocations } : {}),
    ...(input.locate ? { locate: input.locate } : {}),
    ...(plan.diskGbProvider ? { diskGbProvider: sharingSide(tree, plan.diskGbProvider) } : {}),
  });
  return { moves, warnings: [...warnings, ...moveWarnings] };
}
