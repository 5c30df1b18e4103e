/**
 * The claim service: the one owner of what an instance claims on this host. It turns a flavor into
 * a resource request (`request.ts`), places it on the host's provider tree (`place.ts`), keeps the
 * in-flight book that makes the cached view count claims Placement does not show yet (`book.ts`),
 * and makes every allocation write a compute flow needs (`allocations.ts`), named by intent:
 * a build's claim, a move's destination claim, confirm, revert, release, forced delete, restore.
 *
 * Contracts: a claim is recorded in the book before its write and released when the write fails;
 * every write reads the consumer generations right before it; a consumer-generation conflict is
 * an `AllocationConflictError`, never retried; provider-generation conflicts are retried. While
 * Placement is unreachable or answers 5xx, every operation is run again, reads and write, until
 * the `[placement] retry_deadline` passes (`retry.ts`; then `PlacementOutageError`); a claim or
 * swap run again may find its own earlier write landed and adopts it. It is not: the instance's
 * state or records (the compute flows), nor the sync of inventories.
 */
import type { Flavor, InstanceRecord } from '../../model/instance';
import type { ProviderSnapshot, Resources } from '../../model/provider-types';
import type { PlacementApi } from '../placement/api';
import type { PlacementView } from '../sync/view';
import { AllocationWriter, flatten, type Allocs } from './allocations';
import { ClaimBook } from './book';
import { placeRequest } from './place';
import { requestFromFlavor, totalsOf } from './request';
import { OutageRetry, type OutageRetryOptions } from './retry';

/** The host's providers as the tracker last knew them. */
export interface ClaimScope {
  /** This host's providers, root first, parents before children. */
  ourProviders(): readonly ProviderSnapshot[];
  /** Sharing providers serving this host. */
  sharingProviders(): readonly ProviderSnapshot[];
  /**
   * Providers in this host's tree that another service created under our root (Neutron's
   * bandwidth and packet-rate providers, Cyborg's devices), as last listed. An instance's
   * allocations may span them: the scheduler fulfils a port's resource request there.
   */
  othersInTree(): ReadonlySet<string>;
  /** The same, from a fresh listing of the tree (for a claim naming one the last listing lacked). */
  listOthersInTree(): Promise<ReadonlySet<string>>;
}

export interface ClaimServiceDeps {
  readonly api: PlacementApi;
  /** The cached Placement view the in-flight claims are counted on top of. */
  readonly view: PlacementView;
  readonly scope: ClaimScope;
  readonly now?: () => number;
  /** How operations ride out a Placement outage; without it, an outage fails the operation at once. */
  readonly retry?: OutageRetryOptions;
}

/** How a claim is made. */
export interface ClaimOptions {
  /** The scheduler claimed already (nova mode, or a selection for this host): verify, never write. */
  readonly schedulerClaimed: boolean;
  /** A replay after a crash: a write made before the crash may be there already. */
  readonly resuming?: boolean;
  /** The caller's global request id, sent to Placement. */
  readonly requestId?: string;
}

/** A move's claim on this (destination) host. */
export interface MoveClaim {
  /** What the instance holds on this host now. */
  readonly dest: Allocs;
  /** What the migration consumer holds (the source's), when this claim swapped; absent when a scheduler's claim was verified. */
  readonly source?: Allocs;
}

/** The instance fields a build's claim needs. */
export type ClaimingInstance = Pick<InstanceRecord, 'uuid' | 'flavor' | 'project_id' | 'user_id'>;

export class ClaimService {
  private readonly book: ClaimBook;
  private readonly writes: AllocationWriter;
  private readonly retry: OutageRetry;

  constructor(private readonly deps: ClaimServiceDeps) {
    this.book = new ClaimBook(deps.view, deps.now);
    this.retry = new OutageRetry(deps.retry ?? { deadlineMs: 0 });
    this.writes = new AllocationWriter(deps.api, (rp) => deps.scope.sharingProviders().some((p) => p.uuid === rp));
  }

  /**
   * A build's claim. With `schedulerClaimed`, reads the consumer and verifies it (nothing written).
   * Otherwise places the flavor here, records it in flight and writes `PUT /allocations/{uuid}`
   * with consumer_generation null (the in-flight claim is released if the write fails); when
   * `resuming`, a consumer already holding the flavor's size on this host is adopted instead.
   * @returns the allocations the instance holds
   * @throws InvalidExtraSpecError, InsufficientResourcesError, InvalidClaimError, ClaimMismatchError,
   *   AllocationConflictError (the consumer exists), PlacementOutageError, Placement errors
   */
  claimForBuild(inst: ClaimingInstance, opts: ClaimOptions): Promise<Allocs> {
    return this.retry.run(`claim for ${inst.uuid}`, (attempt) => this.claimForBuildOnce(inst, attempt > 1 ? { ...opts, resuming: true } : opts));
  }

  private async claimForBuildOnce(inst: ClaimingInstance, opts: ClaimOptions): Promise<Allocs> {
    if (opts.schedulerClaimed || opts.resuming) {
      // A scheduler's claim is verified. When resuming, the claim may have been written before the
      // crash: if the consumer holds what this flavor asks, on this host, it is ours: adopt it
      // rather than fail on it.
      const want = totalsOf(requestFromFlavor(inst.flavor));
      const existing = await this.readOnce(inst.uuid);
      if (opts.schedulerClaimed || Object.keys(existing).length > 0) {
        await this.verify(inst.uuid, existing, want);
        return existing;
      }
    }
    const plan = this.claimInFlight(inst.uuid, inst.flavor);
    try {
      await this.writes.claimNew(inst.uuid, plan, inst.project_id, inst.user_id, opts.requestId);
    } catch (e) {
      this.book.release(inst.uuid);
      throw e;
    }
    return plan;
  }

  /**
   * A move's claim on this (destination) host. With `schedulerClaimed`, verifies that the
   * instance's allocations are on this host and of the flavor's size (nothing written). Otherwise
   * places the flavor here, records it in flight, and swaps in ONE `POST /allocations`: the
   * migration takes the instance's (source) allocations, the instance takes ours (its
   * sharing-provider allocations stay). `resuming`: a replay that finds the swap done keeps it.
   * The in-flight claim stays recorded when the swap fails; the caller releases it.
   * @throws InvalidExtraSpecError, InsufficientResourcesError, InvalidClaimError, ClaimMismatchError,
   *   AllocationConflictError (the instance holds nothing, or changed), PlacementOutageError, Placement errors
   */
  claimMoveDestination(instance: string, migration: string, flavor: Flavor, opts: ClaimOptions): Promise<MoveClaim> {
    return this.retry.run(`move claim for ${instance}`, (attempt) =>
      this.claimMoveDestinationOnce(instance, migration, flavor, attempt > 1 ? { ...opts, resuming: true } : opts),
    );
  }

  private async claimMoveDestinationOnce(instance: string, migration: string, flavor: Flavor, opts: ClaimOptions): Promise<MoveClaim> {
    if (opts.schedulerClaimed) {
      const have = await this.readOnce(instance);
      await this.verify(instance, have, totalsOf(requestFromFlavor(flavor)));
      return { dest: have };
    }
    const plan = this.claimInFlight(instance, flavor);
    const source = await this.writes.swapForMove(instance, migration, plan, opts.requestId, opts.resuming ?? false);
    return { dest: plan, source };
  }

  /**
   * Confirms a move (resize confirmed, live migration done): empties the migration consumer with
   * its generation; nothing when it is already gone.
   * @throws AllocationConflictError, PlacementOutageError, Placement errors
   */
  confirmMove(migration: string, requestId?: string): Promise<void> {
    return this.retry.run(`confirm of migration ${migration}`, () => this.writes.dropMigration(migration, requestId));
  }

  /**
   * Reverts a move: the migration's (source) allocations go back to the instance in ONE
   * `POST /allocations` (sharing-provider allocations stay); nothing when the migration holds none
   * (already reverted, or a step interrupted before it swapped).
   * @throws AllocationConflictError, PlacementOutageError, Placement errors
   */
  revertMove(instance: string, migration: string, requestId?: string): Promise<void> {
    return this.retry.run(`revert of migration ${migration}`, async () => {
      const back = await this.writes.revertMove(instance, migration, requestId);
      // The providers the instance left keep their generation: the cache must drop it there.
      if (back) this.deps.view.dropConsumer(instance, new Set(Object.keys(back)));
    });
  }

  /**
   * Forgets `consumer`'s in-flight claim (a failed build, a move claim dropped or reverted at the
   * destination, an instance gone). Writes nothing; never throws.
   */
  release(consumer: string): void {
    this.book.release(consumer);
  }

  /**
   * Removes every allocation of `consumer`, whatever its generation. Writes `DELETE
   * /allocations/{consumer}` (idempotent: nothing held is success), and drops the consumer from
   * the cached allocations of every provider.
   * @throws PlacementOutageError, Placement errors
   */
  forceDelete(consumer: string, requestId?: string): Promise<void> {
    return this.retry.run(`removal of ${consumer}'s allocations`, () => this.forceDeleteOnce(consumer, requestId));
  }

  /**
   * `forceDelete` with one attempt (the transport's own retries only), for callers that keep
   * their own durable retry. @throws Placement errors
   */
  async forceDeleteOnce(consumer: string, requestId?: string): Promise<void> {
    await this.writes.forceDelete(consumer, requestId);
    // A DELETE moves no provider's generation: without this, the cached allocations would still
    // show the consumer as fresh and the audit would call it orphaned.
    this.deps.view.dropConsumer(consumer);
  }

  /**
   * Writes back allocations a consumer is known to hold but Placement lost (`PUT` with
   * consumer_generation null, so nothing is overwritten). Records nothing in flight. Run again
   * after an outage, a consumer that holds allocations by then is left as it is.
   * @throws AllocationConflictError (the consumer exists), PlacementOutageError, Placement errors
   */
  restore(consumer: string, allocs: Allocs, project: string, user: string): Promise<void> {
    return this.retry.run(`restore of ${consumer}'s allocations`, async (attempt) => {
      if (attempt > 1 && Object.keys((await this.writes.read(consumer)).allocations).length > 0) return;
      await this.writes.claimNew(consumer, allocs, project, user);
    });
  }

  /** What `consumer` holds in Placement now: provider uuid -> resources (empty when nothing). Writes nothing. @throws PlacementOutageError, Placement errors */
  async read(consumer: string): Promise<Record<string, Resources>> {
    return this.retry.run(`read of ${consumer}'s allocations`, () => this.readOnce(consumer));
  }

  /** `read` with one attempt, for steps that run under a retry already. */
  private async readOnce(consumer: string): Promise<Record<string, Resources>> {
    return flatten(await this.writes.read(consumer));
  }

  /** Whether `consumer` has a claim in flight. */
  has(consumer: string): boolean {
    return this.book.has(consumer);
  }

  /** Consumers with a claim in flight: the audit must not call them orphaned. */
  consumers(): Set<string> {
    return this.book.consumers();
  }

  /** Takes a fresh read of a provider's allocations (see `ClaimBook.reconcile`). */
  reconcile(provider: string, allocations: Readonly<Record<string, Resources>>): void {
    this.book.reconcile(provider, allocations);
  }

  /** Places `flavor` on this host and records it in flight. @throws InvalidExtraSpecError, InsufficientResourcesError, InvalidClaimError */
  private claimInFlight(consumer: string, flavor: Flavor): Record<string, Record<string, number>> {
    const { scope } = this.deps;
    const plan = placeRequest(requestFromFlavor(flavor), { providers: scope.ourProviders(), sharing: scope.sharingProviders(), claims: this.book });
    this.book.claim(consumer, plan);
    return plan;
  }

  /**
   * Checks a scheduler's claim against this host. A provider neither ours, nor a sharing one, nor
   * one the last listing showed in our tree may be one another service added since (Neutron
   * reports its providers when its agent starts): the tree is listed again, once, before the
   * claim is called foreign.
   * @throws ClaimMismatchError
   */
  private async verify(consumer: string, existing: Allocs, want: Readonly<Record<string, number>>): Promise<void> {
    const { scope } = this.deps;
    const ours = new Set(scope.ourProviders().map((p) => p.uuid));
    const sharing = new Set(scope.sharingProviders().map((p) => p.uuid));
    let others = scope.othersInTree();
    if (Object.keys(existing).some((rp) => !ours.has(rp) && !sharing.has(rp) && !others.has(rp))) others = await scope.listOthersInTree();
    this.writes.verifyClaim(consumer, existing, { ours, others }, want);
  }
}
