/**
 * The invariants an outage or a crash must leave intact, checked against what the agents report
 * (`list_instances` over RPC) and what the real Placement holds. Shared by the SIGKILL, crash-point
 * and two-agent integration tests.
 *
 * Each check returns the problems it found (empty: all good) instead of throwing at the first one,
 * so a test that checks many instances reports every broken one at once.
 *
 * Not here: driving the agents (`agents.ts`, `control-plane.ts`).
 */
import { NOAUTH_TOKEN } from '../../tracker/placement/auth';
import type { PlacementClient } from '../../tracker/placement/client';
import type { Flavor } from '../../model/instance';
import { DurableJournal } from '../../agent/journal/durable';
import { silentLogger } from '../../lib/logging/logger';
import { requestFromFlavor, totalsOf } from '../../tracker/claims/request';
import { PLACEMENT_URL } from './stack';

/** What `list_instances` answers for one instance. */
export interface InstanceRow {
  readonly uuid: string;
  readonly vm_state: string;
  readonly task_state: string | null;
}

/** One agent as the checks see it: its host name, its root provider, and its instances now. */
export interface CheckedHost {
  readonly host: string;
  readonly root: string;
  list(): Promise<Map<string, InstanceRow>>;
}

/** States an instance may rest in once an operation is done or rolled back. */
const STABLE = new Set(['active', 'stopped']);

function isSettled(r: InstanceRow | undefined): boolean {
  return r !== undefined && r.task_state === null && STABLE.has(r.vm_state);
}

/** Where an instance is, when it rests on exactly one host (`null`: on none); undefined while not. */
export async function restingPlace(hosts: readonly CheckedHost[], uuid: string): Promise<string | null | undefined> {
  const on: Array<[string, InstanceRow]> = [];
  for (const h of hosts) {
    const r = (await h.list()).get(uuid);
    if (r) on.push([h.host, r]);
  }
  if (on.length === 0) return null;
  const [first] = on;
  return on.length === 1 && first && isSettled(first[1]) ? first[0] : undefined;
}

export interface InstanceExpectation {
  readonly uuid: string;
  readonly flavor: Flavor;
  /** Host names it may rest on (the operation done, or rolled back); empty: it must be gone. */
  readonly hosts: readonly string[];
  /** Migration consumers of its moves: each must hold nothing. */
  readonly migrations?: readonly string[];
}

/**
 * One instance: at rest (no task state, a stable vm_state) on exactly one of the allowed hosts, or
 * on none when none is allowed; its allocation exactly the flavor on exactly that host's root
 * provider (none when gone); its migration consumers empty.
 */
export async function instanceProblems(api: PlacementClient, hosts: readonly CheckedHost[], want: InstanceExpectation): Promise<string[]> {
  const problems: string[] = [];
  const where: CheckedHost[] = [];
  for (const h of hosts) {
    const r = (await h.list()).get(want.uuid);
    if (!r) continue;
    where.push(h);
    if (!isSettled(r)) problems.push(`${want.uuid} on ${h.host} is ${r.vm_state}/${String(r.task_state)}, not at rest`);
  }
  if (where.length > 1) problems.push(`${want.uuid} is on ${where.map((h) => h.host).join(' and ')}`);
  const home = where[0];
  if (want.hosts.length === 0 && home) problems.push(`${want.uuid} should be gone but is on ${home.host}`);
  if (want.hosts.length > 0 && !home) problems.push(`${want.uuid} is on no host (expected one of ${want.hosts.join(', ')})`);
  if (home && !want.hosts.includes(home.host)) problems.push(`${want.uuid} is on ${home.host}, expected one of ${want.hosts.join(', ')}`);
  const held = (await api.consumerAllocations(want.uuid)).allocations;
  const expected = home ? { [home.root]: totalsOf(requestFromFlavor(want.flavor)) } : {};
  const seen = Object.fromEntries(Object.entries(held).map(([rp, a]) => [rp, a.resources]));
  if (JSON.stringify(sorted(seen)) !== JSON.stringify(sorted(expected))) problems.push(`${want.uuid} holds ${JSON.stringify(seen)}, expected ${JSON.stringify(expected)}`);
  for (const m of want.migrations ?? []) {
    const left = (await api.consumerAllocations(m)).allocations;
    if (Object.keys(left).length > 0) problems.push(`migration ${m} of ${want.uuid} still holds ${JSON.stringify(left)}`);
  }
  return problems;
}

function sorted(o: Record<string, Readonly<Record<string, number>>>): Array<[string, Array<[string, number]>]> {
  return Object.entries(o)
    .map(([k, v]): [string, Array<[string, number]>] => [k, Object.entries(v).sort(([a], [b]) => a.localeCompare(b))])
    .sort(([a], [b]) => a.localeCompare(b));
}

/**
 * The hosts together: every consumer on their root providers is an instance resting on that host,
 * and each provider's usages equal the sum of its allocations.
 */
export async function hostProblems(api: PlacementClient, hosts: readonly CheckedHost[]): Promise<string[]> {
  const problems: string[] = [];
  for (const h of hosts) {
    const mine = await h.list();
    const on = (await api.providerAllocations(h.root)).allocations;
    const sum: Record<string, number> = {};
    for (const [consumer, a] of Object.entries(on)) {
      if (!mine.has(consumer)) problems.push(`${consumer} holds ${JSON.stringify(a.resources)} on ${h.host}, which has no such instance`);
      for (const [rc, n] of Object.entries(a.resources)) sum[rc] = (sum[rc] ?? 0) + n;
    }
    const usages = await providerUsages(h.root);
    for (const rc of new Set([...Object.keys(sum), ...Object.keys(usages)])) {
      if ((usages[rc] ?? 0) !== (sum[rc] ?? 0)) problems.push(`${h.host} ${rc}: usage ${usages[rc] ?? 0}, allocations sum to ${sum[rc] ?? 0}`);
    }
  }
  return problems;
}

/** GET /resource_providers/{uuid}/usages (the Placement client has no use for it). */
async function providerUsages(rp: string): Promise<Record<string, number>> {
  const res = await fetch(`${PLACEMENT_URL}/resource_providers/${rp}/usages`, { headers: { 'X-Auth-Token': NOAUTH_TOKEN, Accept: 'application/json' } });
  if (!res.ok) throw new Error(`usages of ${rp}: HTTP ${res.status}`);
  return ((await res.json()) as { usages: Record<string, number> }).usages;
}

/** No lost request: the journal of a stopped agent holds no accepted request left unfinished. */
export async function pendingRequests(statePath: string): Promise<string[]> {
  const journal = await DurableJournal.open(statePath, { logger: silentLogger() });
  try {
    return journal.pending().map((r) => `${r.method} ${r.uniqueId} (instance ${r.orderingKey ?? '-'})`);
  } finally {
    await journal.close();
  }
}
