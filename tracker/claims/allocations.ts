/**
 * Allocation writes for instances and moves, with consumer generations, as nova settled them:
 * - a spawn without a scheduler claim writes `PUT /allocations/{instance}` with
 *   `consumer_generation: null`, so an existing consumer is a hard failure, never overwritten;
 * - a move swaps in ONE `POST /allocations`: the migration uuid takes the source allocations and
 *   the instance uuid the destination's, each with its generation; an allocation on a sharing
 *   provider (DISK_GB on shared storage) stays with the instance;
 * - confirm empties the migration consumer with its generation; revert moves it back in one POST;
 * - a consumer-generation conflict fails the operation (`AllocationConflictError`, no blind retry);
 *   a provider-generation conflict is retried; delete of an instance is forced (generations
 *   ignored: the user's intent is "gone").
 * Generations are read right before each write.
 *
 * Not here: the in-flight book and the choice of providers; `service.ts` puts them together.
 */
import type { AllocationWrite, ConsumerAllocations, PlacementApi } from '../placement/api';
import { ConsumerGenerationConflictError, ProviderGenerationConflictError } from '../placement/errors';
import type { Resources } from '../../model/provider-types';
import { AllocationConflictError, ClaimMismatchError } from './errors';
import { sumAllocations } from './request';

/** Allocations of one consumer: provider uuid -> resources. */
export type Allocs = Readonly<Record<string, Resources>>;

const body = (allocs: Allocs, project: string, user: string, gen: number | null): AllocationWrite => ({
  allocations: Object.fromEntries(Object.entries(allocs).map(([rp, resources]) => [rp, { resources }])),
  project_id: project,
  user_id: user,
  consumer_generation: gen,
});

/** Whether a consumer exists in Placement and holds any allocation. */
const holdsAllocations = (c: ConsumerAllocations): boolean => c.consumer_generation !== undefined && Object.keys(c.allocations).length > 0;

export const flatten = (a: ConsumerAllocations): Record<string, Resources> =>
  Object.fromEntries(Object.entries(a.allocations).map(([rp, v]) => [rp, v.resources]));

export class AllocationWriter {
  constructor(
    private readonly api: PlacementApi,
    /** Providers that are sharing providers (their allocations stay with the instance on moves). */
    private readonly isSharing: (rp: string) => boolean,
  ) {}

  private async retryProvider<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (e) {
        if (!(e instanceof ProviderGenerationConflictError) || attempt >= 4) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * 50 * attempt));
      }
    }
  }

  private conflict(consumer: string, what: string, e: unknown): never {
    throw new AllocationConflictError(consumer, `${what}: consumer ${consumer} was changed by someone else (${(e as Error).message})`, { cause: e });
  }

  read(consumer: string): Promise<ConsumerAllocations> {
    return this.api.consumerAllocations(consumer);
  }

  /** Claims for a new consumer. @throws AllocationConflictError when the consumer already exists */
  async claimNew(consumer: string, allocs: Allocs, project: string, user: string, requestId?: string): Promise<void> {
    try {
      await this.retryProvider(() => this.api.putAllocations(consumer, body(allocs, project, user, null), requestId ? { requestId } : undefined));
    } catch (e) {
      if (e instanceof ConsumerGenerationConflictError) this.conflict(consumer, 'claim', e);
      throw e;
    }
  }

  /**
   * Checks a scheduler's claim: every provider is this host's (ours, a sharing provider of ours, or
   * one another service created in our tree) and the totals per class on our and sharing providers
   * equal what the flavor asks. What the instance holds on another service's providers (a port's
   * bandwidth on Neutron's) answers that service's request, not the flavor: it is accepted as the
   * scheduler placed it and not counted against the flavor.
   * @throws ClaimMismatchError
   */
  verifyClaim(consumer: string, existing: Allocs, tree: { ours: ReadonlySet<string>; others: ReadonlySet<string> }, want: Readonly<Record<string, number>>): void {
    const foreign = Object.keys(existing).filter((rp) => !tree.ours.has(rp) && !this.isSharing(rp) && !tree.others.has(rp));
    if (foreign.length) throw new ClaimMismatchError(consumer, `the claim for ${consumer} is on providers that are not this host's: ${foreign.join(', ')}`);
    const have = sumAllocations(Object.fromEntries(Object.entries(existing).filter(([rp]) => !tree.others.has(rp) || tree.ours.has(rp))));
    const diff = [...new Set([...Object.keys(have), ...Object.keys(want)])].filter((rc) => (have[rc] ?? 0) !== (want[rc] ?? 0));
    if (diff.length) {
      throw new ClaimMismatchError(consumer, `the claim for ${consumer} does not match the flavor: ${diff.map((rc) => `${rc} ${have[rc] ?? 0} claimed, ${want[rc] ?? 0} asked`).join('; ')}`);
    }
  }

  /** Removes every allocation of `consumer`, whatever its generation. */
  forceDelete(consumer: string, requestId?: string): Promise<void> {
    return this.api.deleteAllocations(consumer, requestId ? { requestId } : undefined);
  }

  /**
   * The move's one write: the migration takes the instance's current (source) allocations, the
   * instance takes `dest` (plus its sharing-provider allocations, which do not move).
   * @returns the source allocations the migration now holds
   * @throws AllocationConflictError
   */
  async swapForMove(instance: string, migration: string, dest: Allocs, requestId?: string, resuming = false): Promise<Allocs> {
    if (resuming) {
      // A replay after a crash: if the migration already holds the source, the swap happened.
      const held = await this.read(migration);
      if (holdsAllocations(held)) return flatten(held);
    }
    const cur = await this.read(instance);
    if (cur.consumer_generation === undefined || !cur.project_id || !cur.user_id) {
      throw new AllocationConflictError(instance, `move: instance ${instance} holds no allocations to move`);
    }
    const source: Record<string, Resources> = {};
    const keep: Record<string, Resources> = {};
    for (const [rp, res] of Object.entries(flatten(cur))) (this.isSharing(rp) ? keep : source)[rp] = res;
    const destWithShared = { ...dest, ...keep };
    try {
      await this.retryProvider(() =>
        this.api.postAllocations(
          {
            [migration]: body(source, cur.project_id ?? '', cur.user_id ?? '', null),
            [instance]: body(destWithShared, cur.project_id ?? '', cur.user_id ?? '', cur.consumer_generation ?? null),
          },
          requestId ? { requestId } : undefined,
        ),
      );
    } catch (e) {
      if (e instanceof ConsumerGenerationConflictError) this.conflict(instance, 'move', e);
      throw e;
    }
    return source;
  }

  /** Empties the migration consumer with its generation (confirm, live migration done). */
  async dropMigration(migration: string, requestId?: string): Promise<void> {
    const cur = await this.read(migration);
    if (cur.consumer_generation === undefined || !cur.project_id || !cur.user_id) return; // already gone
    try {
      await this.retryProvider(() => this.api.putAllocations(migration, body({}, cur.project_id ?? '', cur.user_id ?? '', cur.consumer_generation ?? null), requestId ? { requestId } : undefined));
    } catch (e) {
      if (e instanceof ConsumerGenerationConflictError) this.conflict(migration, 'confirm', e);
      throw e;
    }
  }

  /**
   * Moves the migration's (source) allocations back to the instance in one POST (revert, rollback).
   * @returns what the instance holds now; undefined when nothing was written
   */
  async revertMove(instance: string, migration: string, requestId?: string): Promise<Allocs | undefined> {
    const [inst, mig] = await Promise.all([this.read(instance), this.read(migration)]);
    // Nothing held by the migration: already reverted, or a step interrupted before its swap.
    if (!holdsAllocations(mig)) return undefined;
    const shared = Object.fromEntries(Object.entries(flatten(inst)).filter(([rp]) => this.isSharing(rp)));
    const project = mig.project_id ?? inst.project_id ?? '';
    const user = mig.user_id ?? inst.user_id ?? '';
    const back = { ...flatten(mig), ...shared };
    try {
      await this.retryProvider(() =>
        this.api.postAllocations(
          {
            [instance]: body(back, project, user, inst.consumer_generation ?? null),
            [migration]: body({}, project, user, mig.consumer_generation ?? null),
          },
          requestId ? { requestId } : undefined,
        ),
      );
    } catch (e) {
      if (e instanceof ConsumerGenerationConflictError) this.conflict(instance, 'revert', e);
      throw e;
    }
    return back;
  }
}
