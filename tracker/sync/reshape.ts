/**
 * Turning a driver's move instructions into exactly one `POST /reshaper`: the full new inventories
 * of every provider a move touches, and the full new allocations of every consumer whose
 * allocations move, each with the generation it was read at. Placement applies it in one
 * transaction, so no reader (a scheduler above all) ever sees a half-moved state.
 *
 * Which consumers move: those the driver names (`consumers` in an instruction) move exactly as
 * named. For a class on a source provider that the driver does not break down by consumer, the
 * tracker moves consumers (in uuid order, whole amounts) until what stays fits the source's new
 * inventory, placing each in the first target with room left in the instruction's budget. A
 * consumer that fits nowhere makes the reshape fail before anything is sent.
 *
 * Not here: creating the target providers (done before, top-down) or deleting emptied ones (after,
 * bottom-up); see `syncer.ts`.
 */
import type { AllocationWrite, ReshapeRequest } from '../placement/api';
import type { FullInventoryRecord, MoveInstruction, Resources } from '../../model/provider-types';
import type { ProviderTree as Tree } from '../../model/provider-tree';
import { freshAspect, ReshapeError, type SyncContext } from './context';
import { resolveInventories } from './diff';

type Amounts = Record<string, Record<string, number>>; // provider -> rc -> amount

function capacity(rec: FullInventoryRecord | undefined): number {
  return rec ? Math.floor((rec.total - rec.reserved) * rec.allocation_ratio) : 0;
}

function add(target: Amounts, rp: string, rc: string, n: number): void {
  const row = (target[rp] ??= {});
  row[rc] = (row[rc] ?? 0) + n;
  if (row[rc] === 0) delete row[rc];
}

/** Validates the instructions against the trees; throws ReshapeError naming the first problem. */
function validate(moves: readonly MoveInstruction[], desired: Tree, ctx: SyncContext, ours: ReadonlySet<string>): void {
  // A provider in our tree that the agent did not create (Neutron's bandwidth providers) is never
  // a side of a move: the reshape would rewrite its inventory, which belongs to its creator.
  const theirs = (uuid: string): boolean => ctx.view.has(uuid) && !ours.has(uuid) && !ctx.ownership.ownsProvider(uuid);
  for (const m of moves) {
    if (!ctx.view.has(m.from) && !ours.has(m.from)) throw new ReshapeError(`move from unknown provider ${m.from}`);
    if (!desired.exists(m.to)) throw new ReshapeError(`move to provider ${m.to}, which is not in the new tree`);
    for (const uuid of [m.from, m.to]) {
      if (theirs(uuid)) throw new ReshapeError(`move ${m.from} -> ${m.to}: provider ${uuid} (${ctx.view.get(uuid)?.name ?? '?'}) was not created by this agent; its inventory is not the agent's to move`);
    }
    for (const [rc, n] of Object.entries(m.resources)) {
      if (!Number.isInteger(n) || n <= 0) throw new ReshapeError(`move ${m.from} -> ${m.to}: ${rc} amount ${n} is not a positive integer`);
    }
  }
}

/**
 * Builds the reshape request. Reads the allocations of the source providers and of the consumers
 * that move (the only reads a reshape needs).
 * @throws ReshapeError when a consumer cannot be placed or an instruction is invalid
 */
export async function buildReshape(ctx: SyncContext, desired: Tree, moves: readonly MoveInstruction[], rootUuid: string): Promise<ReshapeRequest> {
  // Our providers; a move may also go to a sharing provider (another root), whose inventory is not ours.
  const ours = new Set(desired.uuids(rootUuid));
  validate(moves, desired, ctx, ours);
  const newInventory = async (uuid: string): Promise<Record<string, FullInventoryRecord>> => {
    if (!ours.has(uuid)) return {};
    const current = ctx.view.has(uuid) ? await freshAspect(ctx, uuid, 'inventories') : {};
    return resolveInventories(desired.data(uuid).inventories, current, ctx.initialRatios);
  };

  // deltas[consumer][provider][rc]: what each moving consumer gains (+) or loses (-).
  const deltas = new Map<string, Amounts>();
  const delta = (c: string): Amounts => {
    let d = deltas.get(c);
    if (!d) deltas.set(c, (d = {}));
    return d;
  };

  const sources = [...new Set(moves.map((m) => m.from))];
  for (const from of sources) {
    const onSource: Readonly<Record<string, Resources>> = ctx.view.has(from) ? await freshAspect(ctx, from, 'allocations') : {};
    const out = moves.filter((m) => m.from === from);
    const movedByName = new Map<string, number>(); // `${consumer} ${rc}` -> amount already named
    for (const m of out) {
      for (const [c, res] of Object.entries(m.consumers ?? {})) {
        for (const [rc, n] of Object.entries(res)) {
          const held = onSource[c]?.[rc] ?? 0;
          const key = `${c} ${rc}`;
          if ((movedByName.get(key) ?? 0) + n > held) {
            throw new ReshapeError(`consumer ${c} holds ${held} ${rc} on ${from}; the driver moves more than that`);
          }
          movedByName.set(key, (movedByName.get(key) ?? 0) + n);
          add(delta(c), from, rc, -n);
          add(delta(c), m.to, rc, n);
        }
      }
    }
    // Budget left per target and class, after the named consumers.
    const budget = new Map<string, number>();
    for (const m of out) {
      for (const [rc, n] of Object.entries(m.resources)) {
        let named = 0;
        for (const res of Object.values(m.consumers ?? {})) named += res[rc] ?? 0;
        budget.set(`${m.to} ${rc}`, (budget.get(`${m.to} ${rc}`) ?? 0) + n - named);
      }
    }
    const newInv = await newInventory(from);
    const classes = new Set(out.flatMap((m) => Object.keys(m.resources)));
    for (const rc of classes) {
      let staying = 0;
      const holders = Object.keys(onSource).sort();
      for (const c of holders) staying += (onSource[c]?.[rc] ?? 0) - (movedByName.get(`${c} ${rc}`) ?? 0);
      const room = capacity(newInv[rc]);
      for (const c of holders) {
        if (staying <= room) break;
        const amount = (onSource[c]?.[rc] ?? 0) - (movedByName.get(`${c} ${rc}`) ?? 0);
        if (amount <= 0) continue;
        const target = out.find((m) => m.resources[rc] !== undefined && (budget.get(`${m.to} ${rc}`) ?? 0) >= amount);
        if (!target) throw new ReshapeError(`no target of the moves from ${from} has room for consumer ${c}'s ${amount} ${rc}`);
        budget.set(`${target.to} ${rc}`, (budget.get(`${target.to} ${rc}`) ?? 0) - amount);
        add(delta(c), from, rc, -amount);
        add(delta(c), target.to, rc, amount);
        staying -= amount;
      }
    }
  }

  const allocations: Record<string, AllocationWrite> = {};
  for (const [consumer, d] of deltas) {
    ctx.stats.reads++;
    const cur = await ctx.api.consumerAllocations(consumer);
    if (cur.consumer_generation === undefined || !cur.project_id || !cur.user_id) {
      throw new ReshapeError(`consumer ${consumer} vanished while the reshape was prepared`);
    }
    const next: Amounts = {};
    for (const [rp, v] of Object.entries(cur.allocations)) for (const [rc, n] of Object.entries(v.resources)) add(next, rp, rc, n);
    for (const [rp, row] of Object.entries(d)) for (const [rc, n] of Object.entries(row)) add(next, rp, rc, n);
    for (const [rp, row] of Object.entries(next)) {
      if (Object.values(row).some((n) => n < 0)) throw new ReshapeError(`consumer ${consumer} would hold a negative amount on ${rp}`);
      if (Object.keys(row).length === 0) delete next[rp];
    }
    allocations[consumer] = {
      allocations: Object.fromEntries(Object.entries(next).map(([rp, resources]) => [rp, { resources }])),
      project_id: cur.project_id,
      user_id: cur.user_id,
      consumer_generation: cur.consumer_generation,
    };
  }

  const inventories: Record<string, { resource_provider_generation: number; inventories: Record<string, FullInventoryRecord> }> = {};
  for (const uuid of new Set(moves.flatMap((m) => [m.from, m.to]))) {
    if (!ours.has(uuid) && !ctx.view.has(uuid)) continue; // a sharing provider: its inventory is not ours to write
    const inv = await newInventory(uuid);
    inventories[uuid] = { resource_provider_generation: ctx.view.get(uuid)?.generation ?? 0, inventories: inv };
  }
  return { inventories, allocations };
}
