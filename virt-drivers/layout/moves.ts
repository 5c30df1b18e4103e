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
import type { AllocationsByConsumer, Inventories, InventoryRecord, MoveInstruction } from '../../tracker/tree/types';

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
  readonly diskGbProvider?: string;
}

const ROOT_CLASSES = new Set(['VCPU', 'MEMORY_MB', 'DISK_GB']);

/** Units of `rc` a record can hold: (total - reserved) * ratio. */
export function capacity(rec: InventoryRecord | undefined): number {
  if (!rec) return 0;
  return Math.floor((rec.total - (rec.reserved ?? 0)) * (rec.allocation_ratio ?? 1));
}

function related(a: MoveSide, b: MoveSide, rc: string, input: MoveInput): boolean {
  if (rc === 'DISK_GB' && a.uuid === input.root && b.uuid === input.diskGbProvider) return true;
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
  const side = (u: string): MoveSide => (input.after.get(u) ?? input.before.get(u)) as MoveSide;
  const total = (m: ReadonlyMap<string, MoveSide>, u: string): number => m.get(u)?.inventories[rc]?.total ?? 0;
  const byName = (a: string, b: string): number => side(a).name.localeCompare(side(b).name);
  const loss = new Map(ids.map((u) => [u, total(input.before, u) - total(input.after, u)] as const).filter(([, d]) => d > 0));
  const gain = new Map(ids.map((u) => [u, total(input.after, u) - total(input.before, u)] as const).filter(([, d]) => d > 0));
  const rootLoss = loss.get(input.root) ?? 0;
  const sharing = input.diskGbProvider;
  if (rc === 'DISK_GB' && sharing && rootLoss > 0 && total(input.after, input.root) === 0) gain.set(sharing, rootLoss);
  const flows: Flow[] = [];
  for (const from of [...loss.keys()].sort(byName)) {
    for (const to of [...gain.keys()].sort(byName)) {
      const left = loss.get(from) ?? 0;
      const room = gain.get(to) ?? 0;
      const target = to === sharing ? input.before.get(to) ?? input.after.get(to) : side(to);
      if (left <= 0 || room <= 0 || !target || !related(side(from), target, rc, input)) continue;
      const amount = Math.min(left, room);
      loss.set(from, left - amount);
      gain.set(to, room - amount);
      const roomForConsumers = to === sharing ? amount : Math.min(amount, capacity(input.after.get(to)?.inventories[rc]));
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

function place(flows: Flow[], consumer: string, amount: number, prefer?: string): number {
  const order = [...flows].sort((a, b) => (a.to === prefer ? -1 : b.to === prefer ? 1 : 0));
  const whole = order.find((f) => f.room >= amount);
  const targets = whole ? [whole] : order;
  let left = amount;
  for (const f of targets) {
    const n = Math.min(left, f.room);
    if (n <= 0) continue;
    f.room -= n;
    f.consumers.set(consumer, (f.consumers.get(consumer) ?? 0) + n);
    left -= n;
  }
  return left;
}

function assignConsumers(source: string, rc: string, flows: Flow[], input: MoveInput, warnings: string[]): void {
  const allocs = input.allocations ?? {};
  for (const f of flows) f.room -= usage(allocs, f.to, rc).reduce((n, [, a]) => n + a, 0);
  let room = capacity(input.after.get(source)?.inventories[rc]);
  const leaving: Array<[string, number, string | undefined]> = [];
  for (const [consumer, amount] of usage(allocs, source, rc)) {
    const at = input.locate?.(consumer, rc, source);
    if (at !== undefined && at !== source && flows.some((f) => f.to === at)) leaving.push([consumer, amount, at]);
    else if (amount <= room) room -= amount;
    else leaving.push([consumer, amount, undefined]);
  }
  for (const [consumer, amount, prefer] of leaving) {
    const unplaced = place(flows, consumer, amount, prefer);
    if (unplaced > 0) warnings.push(`consumer ${consumer}: ${unplaced} ${rc} on ${source} fit nowhere after the change`);
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
