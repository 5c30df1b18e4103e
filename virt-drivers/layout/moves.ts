/**
 * Move instructions: where inventory went when the compute node's subtree changed shape, and,
 * given allocations, which consumers' allocations follow it.
 *
 * It is: a comparison of the driver's providers before and after one `updateProviderTree`, by
 * uuid and resource class. A provider that lost inventory of a class is a source, one that gained
 * is a sink; inventory moves only between related providers: the same lineage (one GPU, the ports
 * of one NIC card), the root and a GPU for device classes (root vGPU layout <-> per-GPU layout),
 * or the root and the sharing provider that now serves DISK_GB. It is not: the reshape; the
 * tracker turns the instructions into one `POST /reshaper`.
 *
 * Consumers: a consumer stays on its source while the source's new capacity holds it, unless the
 * driver's `locate` says its devices are elsewhere; the others move, whole when one sink has room,
 * split otherwise. Allocations that fit nowhere are reported as warnings (the reshape will fail
 * on them; nothing is invented).
 */
import type { AllocationsByConsumer, Inventories, InventoryRecord, MoveInstruction } from '../../model/provider-types';

/** One provider as the move computation sees it. */
export interface MoveSide {
  readonly uuid: string;
  readonly name: string;
  /** `root`, `gpu:<address>`, `nic:<card>`, or undefined when unknown. */
  readonly lineage?: string;
  readonly inventories: Inventories;
}

/** Where the driver knows a consumer's `rc` units are, given they are on `from` now: a provider uuid. */
export type Locator = (consumer: string, rc: string, from: string) => string | undefined;

export interface MoveInput {
  readonly before: ReadonlyMap<string, MoveSide>;
  readonly after: ReadonlyMap<string, MoveSide>;
  readonly allocations?: AllocationsByConsumer;
  readonly locate?: Locator;
  /** The root's uuid, and the sharing provider now serving its DISK_GB, if any. */
  readonly root: string;
  readonly diskGbProvider?: MoveSide;
}

const ROOT_CLASSES = new Set(['VCPU', 'MEMORY_MB', 'DISK_GB']);

/** Units of `rc` a record can hold: (total - reserved) * ratio. */
export function capacity(rec: InventoryRecord | undefined): number {
  if (!rec) return 0;
  return Math.floor((rec.total - (rec.reserved ?? 0)) * (rec.allocation_ratio ?? 1));
}

function related(a: MoveSide, b: MoveSide, rc: string, input: MoveInput): boolean {
  if (rc === 'DISK_GB' && a.uuid === input.root && b.uuid === input.diskGbProvider?.uuid) return true;
  if (!a.lineage || !b.lineage) return false;
  if (a.lineage === b.lineage) return true;
  const pair = [a.lineage, b.lineage];
  return !ROOT_CLASSES.has(rc) && pair.includes('root') && pair.some((l) => l.startsWith('gpu:'));
}

interface Flow {
  from: string;
  to: string;
  rc: string;
  amount: number;
  room: number;
  consumers: Map<string, number>;
}

function flowsFor(rc: string, input: MoveInput): Flow[] {
  const ids = [...new Set([...input.before.keys(), ...input.after.keys()])];
  const sharing = input.diskGbProvider;
  const side = (u: string): MoveSide => (input.after.get(u) ?? input.before.get(u) ?? (u === sharing?.uuid ? sharing : undefined)) as MoveSide;
  const total = (m: ReadonlyMap<string, MoveSide>, u: string): number => m.get(u)?.inventories[rc]?.total ?? 0;
  const byName = (a: string, b: string): number => side(a).name.localeCompare(side(b).name);
  const loss = new Map(ids.map((u) => [u, total(input.before, u) - total(input.after, u)] as const).filter(([, d]) => d > 0));
  const gain = new Map(ids.map((u) => [u, total(input.after, u) - total(input.before, u)] as const).filter(([, d]) => d > 0));
  const rootLoss = loss.get(input.root) ?? 0;
  if (rc === 'DISK_GB' && sharing && rootLoss > 0 && total(input.after, input.root) === 0) gain.set(sharing.uuid, rootLoss);
  const flows: Flow[] = [];
  for (const from of [...loss.keys()].sort(byName)) {
    for (const to of [...gain.keys()].sort(byName)) {
      const left = loss.get(from) ?? 0;
      const room = gain.get(to) ?? 0;
      if (left <= 0 || room <= 0 || !related(side(from), side(to), rc, input)) continue;
      const amount = Math.min(left, room);
      loss.set(from, left - amount);
      gain.set(to, room - amount);
      const sink = to === sharing?.uuid ? sharing : input.after.get(to);
      const roomForConsumers = Math.min(amount, capacity(sink?.inventories[rc]));
      flows.push({ from, to, rc, amount, room: roomForConsumers, consumers: new Map() });
    }
  }
  return flows;
}

function usage(allocs: AllocationsByConsumer, provider: string, rc: string): Array<[string, number]> {
  return Object.entries(allocs)
    .map(([c, byRp]): [string, number] => [c, byRp[provider]?.[rc] ?? 0])
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => a.localeCompare(b));
}

/**
 * Places the consumers of `source` for one class: hinted consumers go whole to the provider the
 * driver says their devices are on; the rest are packed first-fit-decreasing, staying on the
 * source when it still has room (fewest moves), else moving whole to the first sink with room,
 * else split across the source and the sinks. What fits nowhere stays and is reported.
 */
function assignConsumers(source: string, rc: string, flows: Flow[], input: MoveInput, warnings: string[]): void {
  const allocs = input.allocations ?? {};
  for (const f of flows) f.room -= usage(allocs, f.to, rc).reduce((n, [, a]) => n + a, 0);
  let stay = capacity(input.after.get(source)?.inventories[rc]);
  const rest: Array<[string, number]> = [];
  for (const [consumer, amount] of usage(allocs, source, rc)) {
    const at = input.locate?.(consumer, rc, source);
    const hinted = at === undefined || at === source ? undefined : flows.find((f) => f.to === at && f.room >= amount);
    if (hinted) {
      hinted.room -= amount;
      hinted.consumers.set(consumer, amount);
    } else rest.push([consumer, amount]);
  }
  rest.sort(([ca, a], [cb, b]) => b - a || ca.localeCompare(cb));
  for (const [consumer, amount] of rest) {
    if (amount <= stay) {
      stay -= amount;
      continue;
    }
    const whole = flows.find((f) => f.room >= amount);
    if (whole) {
      whole.room -= amount;
      whole.consumers.set(consumer, amount);
      continue;
    }
    let left = amount - Math.max(stay, 0);
    stay = Math.max(stay - amount, 0);
    for (const f of flows) {
      const n = Math.min(left, f.room);
      if (n <= 0) continue;
      f.room -= n;
      f.consumers.set(consumer, n);
      left -= n;
    }
    if (left > 0) warnings.push(`consumer ${consumer}: ${left} ${rc} on ${source} fit nowhere after the change`);
  }
}

/** Computes the move instructions and any allocations that cannot follow their inventory. */
export function computeMoves(input: MoveInput): { moves: MoveInstruction[]; warnings: string[] } {
  const warnings: string[] = [];
  const classes = new Set<string>();
  for (const m of [input.before, input.after]) for (const s of m.values()) for (const rc of Object.keys(s.inventories)) classes.add(rc);
  const flows: Flow[] = [];
  for (const rc of [...classes].sort()) {
    const rcFlows = flowsFor(rc, input);
    flows.push(...rcFlows);
    if (!input.allocations) continue;
    for (const source of new Set(rcFlows.map((f) => f.from))) {
      assignConsumers(source, rc, rcFlows.filter((f) => f.from === source), input, warnings);
    }
    for (const [uuid, before] of input.before) {
      if (!before.inventories[rc] || input.after.get(uuid)?.inventories[rc] || rcFlows.some((f) => f.from === uuid)) continue;
      const stranded = usage(input.allocations, uuid, rc);
      if (stranded.length > 0) warnings.push(`${rc} on ${before.name} is gone with allocations of ${stranded.map(([c]) => c).join(', ')} and no related provider to move them to`);
    }
  }
  const grouped = new Map<string, { from: string; to: string; resources: Record<string, number>; consumers: Record<string, Record<string, number>> }>();
  for (const f of flows) {
    const key = `${f.from}>${f.to}`;
    const g = grouped.get(key) ?? { from: f.from, to: f.to, resources: {}, consumers: {} };
    g.resources[f.rc] = (g.resources[f.rc] ?? 0) + f.amount;
    for (const [c, n] of f.consumers) g.consumers[c] = { ...(g.consumers[c] ?? {}), [f.rc]: n };
    grouped.set(key, g);
  }
  const moves = [...grouped.values()].map(
    (g): MoveInstruction => ({ from: g.from, to: g.to, resources: g.resources, ...(input.allocations ? { consumers: g.consumers } : {}) }),
  );
  return { moves, warnings };
}
