/**
 * Checks of what a driver hands back: the provider tree is one Placement would accept, and move
 * instructions balance and leave every allocation on inventory that can hold it.
 *
 * It is: pure functions returning a list of problems (empty means fine), used by the driver
 * conformance suite and usable by the tracker before it writes anything. It is not: Placement;
 * it cannot know about consumers on providers outside the tree it is given.
 */
import type { AllocationsByConsumer, InventoryRecord, MoveInstruction, ProviderSnapshot } from '../model/provider-types';
import { isValidResourceClass, isValidTrait } from './traits';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const SHARES = 'MISC_SHARES_VIA_AGGREGATE';
const isInt = (n: unknown): n is number => typeof n === 'number' && Number.isInteger(n);

function recordProblems(where: string, rc: string, r: InventoryRecord): string[] {
  const out: string[] = [];
  if (!isValidResourceClass(rc)) out.push(`${where}: ${rc} is neither a standard resource class nor CUSTOM_[A-Z0-9_]+`);
  if (!isInt(r.total) || r.total < 1) {
    out.push(`${where} ${rc}: total must be an integer >= 1 (omit the class instead), got ${r.total}`);
    return out;
  }
  const reserved = r.reserved ?? 0;
  if (!isInt(reserved) || reserved < 0 || reserved > r.total) out.push(`${where} ${rc}: reserved ${reserved} not in 0..total`);
  const min = r.min_unit ?? 1;
  const max = r.max_unit ?? r.total;
  const step = r.step_size ?? 1;
  if (!isInt(min) || min < 1 || !isInt(max) || max < min || !isInt(step) || step < 1) {
    out.push(`${where} ${rc}: min_unit ${min}, max_unit ${max}, step_size ${step} are not 1 <= min_unit <= max_unit, step_size >= 1`);
  }
  if (r.allocation_ratio !== undefined && !(r.allocation_ratio > 0)) out.push(`${where} ${rc}: allocation_ratio must be > 0`);
  return out;
}

/**
 * Problems with a tree (snapshots in the tree's order). `nodename` names the compute node's root:
 * it must be the only root that is not a sharing provider.
 */
export function checkProviderTree(snaps: readonly ProviderSnapshot[], nodename: string): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  const names = new Set<string>();
  for (const p of snaps) {
    const where = `provider ${p.name}`;
    if (!UUID.test(p.uuid)) problems.push(`${where}: uuid ${p.uuid} is not a lower-case uuid`);
    if (seen.has(p.uuid)) problems.push(`${where}: duplicate uuid ${p.uuid}`);
    if (names.has(p.name)) problems.push(`${where}: duplicate name`);
    if (p.name.length < 1 || p.name.length > 200) problems.push(`${where}: name must be 1-200 characters`);
    if (p.parent_provider_uuid !== null && !seen.has(p.parent_provider_uuid)) problems.push(`${where}: listed before its parent`);
    seen.add(p.uuid);
    names.add(p.name);
    for (const [rc, rec] of Object.entries(p.inventories)) problems.push(...recordProblems(where, rc, rec));
    for (const t of p.traits) if (!isValidTrait(t)) problems.push(`${where}: trait ${t} is neither standard nor CUSTOM_[A-Z0-9_]+`);
    for (const a of p.aggregates) if (!UUID.test(a)) problems.push(`${where}: aggregate ${a} is not a uuid`);
  }
  const roots = snaps.filter((p) => p.parent_provider_uuid === null);
  const computeRoots = roots.filter((p) => !p.traits.includes(SHARES));
  if (computeRoots.length !== 1 || computeRoots[0]?.name !== nodename) {
    problems.push(`expected exactly one root (${nodename}) besides sharing providers, got ${computeRoots.map((r) => r.name).join(', ') || 'none'}`);
  }
  return problems;
}

const capacity = (r: InventoryRecord | undefined): number =>
  r ? Math.floor((r.total - (r.reserved ?? 0)) * (r.allocation_ratio ?? 1)) : 0;

/**
 * Problems with move instructions for a change from `before` to `after`: unknown providers,
 * amounts that do not balance against the inventory that changed, consumer amounts that exceed
 * the move or the consumer's allocation, and (given allocations) any allocation that, once the
 * moves are applied, sits on a missing class or overflows its provider's capacity.
 */
export function checkMoves(
  before: readonly ProviderSnapshot[],
  after: readonly ProviderSnapshot[],
  moves: readonly MoveInstruction[],
  allocations?: AllocationsByConsumer,
): string[] {
  const problems: string[] = [];
  const old = new Map(before.map((p) => [p.uuid, p]));
  const now = new Map(after.map((p) => [p.uuid, p]));
  const total = (m: Map<string, ProviderSnapshot>, u: string, rc: string): number => m.get(u)?.inventories[rc]?.total ?? 0;
  const out = new Map<string, number>();
  const into = new Map<string, number>();
  for (const [i, m] of moves.entries()) {
    const where = `move ${i} (${m.from} -> ${m.to})`;
    if (m.from === m.to) problems.push(`${where}: from and to are the same provider`);
    if (!old.has(m.from) && !now.has(m.from)) problems.push(`${where}: unknown source provider`);
    if (!old.has(m.to) && !now.has(m.to)) problems.push(`${where}: unknown target provider`);
    for (const [rc, n] of Object.entries(m.resources)) {
      if (!isInt(n) || n < 1) problems.push(`${where}: ${rc} amount ${n} is not a positive integer`);
      out.set(`${m.from}|${rc}`, (out.get(`${m.from}|${rc}`) ?? 0) + n);
      into.set(`${m.to}|${rc}`, (into.get(`${m.to}|${rc}`) ?? 0) + n);
    }
    const moved: Record<string, number> = {};
    for (const [consumer, res] of Object.entries(m.consumers ?? {})) {
      for (const [rc, n] of Object.entries(res)) {
        moved[rc] = (moved[rc] ?? 0) + n;
        const had = allocations?.[consumer]?.[m.from]?.[rc] ?? 0;
        if (allocations && n > had) problems.push(`${where}: consumer ${consumer} moves ${n} ${rc} but holds ${had} on the source`);
      }
    }
    for (const [rc, n] of Object.entries(moved)) if (n > (m.resources[rc] ?? 0)) problems.push(`${where}: consumers move ${n} ${rc}, more than the ${m.resources[rc] ?? 0} moved`);
  }
  for (const [key, n] of out) {
    const [u = '', rc = ''] = key.split('|');
    const lost = total(old, u, rc) - total(now, u, rc);
    if (n > lost) problems.push(`${rc} moved out of ${u}: ${n}, but it lost only ${Math.max(lost, 0)}`);
  }
  for (const [key, n] of into) {
    const [u = '', rc = ''] = key.split('|');
    const sharing = now.get(u)?.traits.includes(SHARES) ?? false;
    const room = sharing ? capacity(now.get(u)?.inventories[rc]) : total(now, u, rc) - total(old, u, rc);
    if (n > room) problems.push(`${rc} moved into ${u}: ${n}, but it ${sharing ? 'can hold' : 'gained'} only ${Math.max(room, 0)}`);
  }
  if (allocations) problems.push(...checkAllocationsAfter(old, now, moves, allocations));
  return problems;
}

/**
 * Applies the consumer moves and checks every resulting allocation against `after`. Allocations
 * on providers in neither tree (another host's, mid-migration) are not judged.
 */
function checkAllocationsAfter(old: Map<string, ProviderSnapshot>, now: Map<string, ProviderSnapshot>, moves: readonly MoveInstruction[], allocations: AllocationsByConsumer): string[] {
  const problems: string[] = [];
  const result = new Map<string, Map<string, Map<string, number>>>(); // consumer -> rp -> rc -> n
  const add = (c: string, rp: string, rc: string, n: number): void => {
    const byRp = result.get(c) ?? new Map<string, Map<string, number>>();
    const byRc = byRp.get(rp) ?? new Map<string, number>();
    byRc.set(rc, (byRc.get(rc) ?? 0) + n);
    byRp.set(rp, byRc);
    result.set(c, byRp);
  };
  for (const [c, byRp] of Object.entries(allocations)) for (const [rp, res] of Object.entries(byRp)) for (const [rc, n] of Object.entries(res)) add(c, rp, rc, n);
  for (const m of moves) {
    for (const [c, res] of Object.entries(m.consumers ?? {})) {
      for (const [rc, n] of Object.entries(res)) {
        add(c, m.from, rc, -n);
        add(c, m.to, rc, n);
      }
    }
  }
  const used = new Map<string, number>();
  for (const [c, byRp] of result) {
    for (const [rp, byRc] of byRp) {
      for (const [rc, n] of byRc) {
        if (n === 0 || (!now.has(rp) && !old.has(rp))) continue;
        if (n < 0) problems.push(`consumer ${c} would hold ${n} ${rc} on ${rp}`);
        else if (!now.get(rp)?.inventories[rc]) problems.push(`consumer ${c} is left with ${n} ${rc} on ${now.get(rp)?.name ?? rp}, which no longer has ${rc}`);
        used.set(`${rp}|${rc}`, (used.get(`${rp}|${rc}`) ?? 0) + n);
      }
    }
  }
  for (const [key, n] of used) {
    const [rp = '', rc = ''] = key.split('|');
    const rec = now.get(rp)?.inventories[rc];
    if (rec && n > capacity(rec)) problems.push(`${rc} on ${now.get(rp)?.name ?? rp}: ${n} allocated after the moves, capacity ${capacity(rec)}`);
  }
  return problems;
}
