/**
 * Table rows that put the tracker and nova's report client side by side for one scenario of one
 * run: both sides' requests and wall time, and their ratio (tracker / nova). Pure, so the rows are
 * unit-tested; the measuring is in `placement-sync.ts` and `nova-report-client.ts`.
 */
import { median, round, type BenchRow } from './lib';
import { totalRequests, type MethodCounts, type NovaPass } from './nova-report-client';

/** What the tracker sent for one scenario. */
export interface TrackerMeasure {
  readonly reads: number;
  readonly writes: number;
  readonly conflicts: number;
  readonly wallMs: number;
  readonly cpuMs: number;
}

/** Medians over the runs of one nova scenario. */
export interface NovaSummary {
  readonly runs: number;
  readonly reads: number;
  readonly writes: number;
  readonly conflicts: number;
  readonly attempts: number;
  readonly wallMs: number;
  readonly cpuMs: number;
  readonly rcOnlyRequests: number;
  readonly rcOnlyWallMs: number;
}

const writesOf = (c: MethodCounts): number => c.PUT + c.POST + c.DELETE;

/** Medians of each figure over `passes` (one per run); undefined when there is none. */
export function summarizeNova(passes: readonly NovaPass[]): NovaSummary | undefined {
  if (passes.length === 0) return undefined;
  const m = (f: (p: NovaPass) => number): number => median(passes.map(f));
  return {
    runs: passes.length,
    reads: m((p) => p.requests.GET),
    writes: m((p) => writesOf(p.requests)),
    conflicts: m((p) => p.conflicts),
    attempts: m((p) => p.attempts),
    wallMs: m((p) => p.wallMs),
    cpuMs: m((p) => p.cpuMs),
    rcOnlyRequests: m((p) => totalRequests(p.rcOnly.requests)),
    rcOnlyWallMs: m((p) => p.rcOnly.wallMs),
  };
}

/**
 * `ours / theirs` as `0.54x`; a side that sent nothing makes no ratio, and says so.
 */
export function ratio(ours: number, theirs: number): string {
  if (!Number.isFinite(ours) || !Number.isFinite(theirs)) return 'n/a';
  if (theirs === 0) return ours === 0 ? '1x (both 0)' : 'n/a (nova 0)';
  const r = ours / theirs;
  return `${r >= 0.1 ? round(r, 2) : round(r, 3)}x`;
}

/** Goals printed beside the tracker's requests and beside the ratio. */
export interface SideGoals {
  readonly requests?: string;
  readonly ratio?: string;
}

/**
 * The rows of one scenario: requests, wall and CPU with nova's figures beside them, and the ratio
 * row; `nova` is the reason when its side did not run.
 */
export function sideBySideRows(scenario: string, t: TrackerMeasure, nova: NovaSummary | string, goals: SideGoals = {}): BenchRow[] {
  const ours = t.reads + t.writes;
  const requestsGoal = goals.requests ? { goal: goals.requests } : {};
  const goal = goals.ratio;
  if (typeof nova === 'string') {
    return [
      { scenario, metric: 'requests (reads/writes/409)', value: `${t.reads}/${t.writes}/${t.conflicts}`, ...requestsGoal, baseline: `skipped: ${nova}` },
      { scenario, metric: 'wall', value: round(t.wallMs), unit: 'ms' },
      { scenario, metric: 'agent CPU', value: round(t.cpuMs), unit: 'ms' },
      { scenario, metric: 'tracker / nova RT: requests, wall', value: 'n/a (nova skipped)', ...(goal ? { goal } : {}) },
    ];
  }
  const theirs = nova.reads + nova.writes;
  const attempts = nova.attempts === 1 ? '1 attempt' : `${nova.attempts} attempts`;
  return [
    {
      scenario,
      metric: 'requests (reads/writes/409)',
      value: `${t.reads}/${t.writes}/${t.conflicts}`,
      ...requestsGoal,
      baseline: `nova RT ${nova.reads}/${nova.writes}/${nova.conflicts} = ${theirs} (${attempts}); RC only ${nova.rcOnlyRequests}`,
    },
    { scenario, metric: 'wall', value: round(t.wallMs), unit: 'ms', baseline: `nova RT ${round(nova.wallMs)} ms; RC only ${round(nova.rcOnlyWallMs)} ms` },
    { scenario, metric: 'agent CPU', value: round(t.cpuMs), unit: 'ms', baseline: `nova client ${round(nova.cpuMs)} ms` },
    { scenario, metric: 'tracker / nova RT: requests, wall', value: `${ratio(ours, theirs)}, ${ratio(t.wallMs, nova.wallMs)}`, ...(goal ? { goal } : {}) },
  ];
}
