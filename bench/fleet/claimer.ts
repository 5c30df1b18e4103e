/**
 * A scheduler-style claimer, as nova's scheduler claims: `GET /allocation_candidates` for a flavor,
 * weigh the candidates (most free memory first, like nova's RAM weigher spreading load), pick one at
 * random among the best `subset` (nova's `host_subset_size`), and `PUT /allocations/{consumer}`
 * with `consumer_generation: null`; a 409 (another claim took the room, or a concurrent provider
 * update) is retried from the candidates, up to `attempts` times, as the scheduler moves on to an
 * alternate. Several workers claim at once, like several scheduler processes.
 *
 * It speaks to Placement through the project's client (`tracker/placement/`): `PlacementHttp` for the
 * candidates query, which the agent itself never needs, and `PlacementClient` for the claim.
 */
import { randomUUID } from 'node:crypto';
import { PlacementClient } from '../../tracker/placement/client';
import { PlacementError } from '../../tracker/placement/errors';
import type { PlacementHttp } from '../../tracker/placement/http';
import type { Resources } from '../../model/provider-types';
import { median, percentile, round } from '../lib';

/** A flavor as a candidates query: the unnumbered group, plus one numbered group for a port. */
export interface Flavor {
  readonly name: string;
  readonly resources: Resources;
  /** An SR-IOV port's request (`resources1`), satisfied by a NIC provider. */
  readonly port?: Resources;
}

/** Three fit a fleet host (memory bound), so filling a fleet races for every host's last slots. */
export const FLAVORS: readonly Flavor[] = [
  { name: 'm1.xlarge', resources: { VCPU: 8, MEMORY_MB: 16384, DISK_GB: 160 } },
  { name: 'm1.xlarge+vf', resources: { VCPU: 8, MEMORY_MB: 16384, DISK_GB: 160 }, port: { SRIOV_NET_VF: 1, NET_BW_EGR_KILOBIT_PER_SEC: 1000000 } },
];

export interface ClaimerOptions {
  readonly http: PlacementHttp;
  readonly workers: number;
  /**
   * `limit` of the candidates query (nova's `[scheduler] max_placement_results`, 1000 by default,
   * which large clouds lower: the answer's size, not the database, is most of Placement's work).
   */
  readonly limit?: number;
  readonly subset?: number;
  readonly attempts?: number;
  readonly flavors?: readonly Flavor[];
  readonly random?: () => number;
}

export interface ClaimerStats {
  readonly claimed: number;
  /** Claims abandoned after `attempts` conflicts in a row. */
  readonly gaveUp: number;
  /** Allocation writes and how many of them answered 409. */
  readonly puts: number;
  readonly conflicts: number;
  /** Other failures (5xx, no answer). */
  readonly errors: number;
  /** Candidate queries that came back empty. */
  readonly empty: number;
  /** Median and 99th percentile of `GET /allocation_candidates` and of the allocation writes (ms). */
  readonly candidatesMs: { readonly p50: number; readonly p99: number };
  readonly putMs: { readonly p50: number; readonly p99: number };
}

interface Candidate {
  readonly allocations: Readonly<Record<string, { readonly resources: Resources }>>;
}

interface CandidatesAnswer {
  readonly allocation_requests: readonly Candidate[];
  readonly provider_summaries: Readonly<Record<string, { readonly resources: Readonly<Record<string, { capacity: number; used: number }>> }>>;
}

const query = (r: Resources): string =>
  Object.entries(r)
    .map(([rc, n]) => `${rc}:${n}`)
    .join(',');

export class Claimer {
  private readonly api: PlacementClient;
  private readonly project = randomUUID();
  private readonly user = randomUUID();
  private readonly consumersClaimed: string[] = [];
  private stats = { claimed: 0, gaveUp: 0, puts: 0, conflicts: 0, errors: 0, empty: 0 };
  private readonly candidateTimes: number[] = [];
  private readonly putTimes: number[] = [];
  private running = false;
  private fleetReady = false;
  private workers: Promise<void>[] = [];
  private fullSignal: (() => void) | undefined;
  /** Resolves once the fleet is full: the first flavor finds no candidate after `ready()`. */
  readonly full: Promise<void>;

  constructor(private readonly opts: ClaimerOptions) {
    this.api = new PlacementClient(opts.http);
    this.full = new Promise((r) => (this.fullSignal = r));
  }

  /** Starts the workers. Before `ready()`, no candidates means "hosts still coming": try again. */
  start(): void {
    this.running = true;
    this.workers = Array.from({ length: this.opts.workers }, (_, w) => this.work(w));
  }

  /** Every host is in Placement: from now on, no candidates means the fleet is full. */
  ready(): void {
    this.fleetReady = true;
  }

  /** Stops after the claims in flight; the counts so far. */
  async stop(): Promise<ClaimerStats> {
    this.running = false;
    await Promise.all(this.workers);
    return this.snapshot();
  }

  snapshot(): ClaimerStats {
    const spread = (ms: readonly number[]): { p50: number; p99: number } => ({ p50: round(median(ms)), p99: round(percentile(ms, 99)) });
    return { ...this.stats, candidatesMs: spread(this.candidateTimes), putMs: spread(this.putTimes) };
  }

  consumers(): readonly string[] {
    return this.consumersClaimed;
  }

  private async work(worker: number): Promise<void> {
    const flavors = this.opts.flavors ?? FLAVORS;
    for (let i = worker; this.running; i++) {
      const flavor = flavors[i % flavors.length] ?? FLAVORS[0];
      if (!flavor) return;
      const outcome = await this.claim(flavor);
      if (outcome === 'none') {
        if (this.fleetReady && flavor === flavors[0]) {
          this.fullSignal?.();
          return;
        }
        if (!this.fleetReady) await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** One claim with its retries: 'ok', 'none' (no candidate), or 'failed'. */
  private async claim(flavor: Flavor): Promise<'ok' | 'none' | 'failed'> {
    const attempts = this.opts.attempts ?? 3;
    for (let a = 1; a <= attempts; a++) {
      if (!this.running) return 'failed';
      let answer: CandidatesAnswer;
      const asked = Date.now();
      try {
        answer = await this.candidates(flavor);
        this.candidateTimes.push(Date.now() - asked);
      } catch {
        this.stats.errors++;
        return 'failed';
      }
      const choice = this.pick(answer);
      if (!choice) {
        this.stats.empty++;
        return 'none';
      }
      const consumer = randomUUID();
      this.stats.puts++;
      const put = Date.now();
      try {
        await this.api.putAllocations(consumer, { allocations: choice.allocations, project_id: this.project, user_id: this.user, consumer_generation: null });
        this.putTimes.push(Date.now() - put);
        this.stats.claimed++;
        this.consumersClaimed.push(consumer);
        return 'ok';
      } catch (e) {
        if (!(e instanceof PlacementError) || e.status !== 409) {
          this.stats.errors++;
          return 'failed';
        }
        this.stats.conflicts++;
      }
    }
    this.stats.gaveUp++;
    return 'failed';
  }

  private async candidates(flavor: Flavor): Promise<CandidatesAnswer> {
    let path = `/allocation_candidates?resources=${query(flavor.resources)}&limit=${this.opts.limit ?? 50}`;
    if (flavor.port) path += `&resources1=${query(flavor.port)}`;
    const res = await this.opts.http.request<CandidatesAnswer>({ method: 'GET', path, microversion: '1.36' });
    return res.data;
  }

  /** Most free memory on the candidate's providers first; a random one of the best `subset`. */
  private pick(answer: CandidatesAnswer): Candidate | undefined {
    const freeMemory = (c: Candidate): number => {
      let free = 0;
      for (const rp of Object.keys(c.allocations)) {
        const m = answer.provider_summaries[rp]?.resources.MEMORY_MB;
        if (m) free += m.capacity - m.used;
      }
      return free;
    };
    const ranked = [...answer.allocation_requests].map((c) => ({ c, free: freeMemory(c) })).sort((a, b) => b.free - a.free);
    const best = ranked.slice(0, Math.max(1, this.opts.subset ?? 3));
    if (best.length === 0) return undefined;
    return best[Math.floor((this.opts.random ?? Math.random)() * best.length)]?.c;
  }
}
