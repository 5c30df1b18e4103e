/**
 * One sync of the driver's provider tree into Placement.
 *
 * Order (each step only where something differs): ensure custom resource classes and traits;
 * create new providers top-down; one atomic reshape if the driver moved inventory, or, for a host
 * none of whose providers existed, every inventory in one `POST /reshaper` (`first-registration.ts`);
 * delete removed providers bottom-up; then each provider's inventories, aggregates and traits. The
 * cycle starts with one `GET /resource_providers?in_tree=<root>`: every provider's generation in one
 * read, which is all a steady-state cycle needs (zero writes, one read).
 *
 * Ownership: only providers, traits and aggregates this agent put there are removed (see
 * `ownership.ts`); a provider the driver no longer reports that still holds allocations is kept
 * and reported, and retried next cycle.
 *
 * Errors: Placement unreachable, a failed reshape, or conflicts that persist end the cycle with a
 * `SyncError` (the next cycle starts from a fresh listing); a refusal that concerns one provider
 * (e.g. an unknown resource class) is reported as a problem and the other providers still sync.
 */
import type { Logger } from '../../lib/logging/logger';
import { systemClock, type Clock } from '../../lib/clock';
import type { PlacementApi } from '../placement/api';
import { CannotDeleteParentError, DuplicateNameError, PlacementError, PlacementUnavailableError, ProviderInUseError } from '../placement/errors';
import type { ProviderTree } from '../../model/provider-tree';
import type { MoveInstruction, ProviderSnapshot } from '../../model/provider-types';
import { ReshapeError, SyncError, type SyncContext, type SyncResult } from './context';
import type { InitialRatios } from './diff';
import { registerInventories } from './first-registration';
import { ensureNames, type KnownNames } from './names';
import type { Ownership } from './ownership';
import { syncInventories, syncOwnedSet } from './provider-sync';
import { buildReshape } from './reshape';
import type { PlacementView } from './view';
import { PlacementWrites, RecordedWrites } from './writes';

export interface SyncerDeps {
  readonly api: PlacementApi;
  readonly view: PlacementView;
  readonly ownership: Ownership;
  readonly names: KnownNames;
  readonly logger: Logger;
  readonly initialRatios: InitialRatios;
  readonly clock?: Clock;
  readonly random?: () => number;
  readonly conflictAttempts?: number;
}

export interface SyncOptions {
  /** Record the writes instead of making them (`compute-agent plan`). */
  readonly dryRun?: boolean;
  /** The caller listed the tree already in this cycle; skip the opening listing. */
  readonly listed?: boolean;
  /** This host's root provider (default: the tree's first root). */
  readonly rootUuid?: string;
}

export class Syncer {
  constructor(private readonly deps: SyncerDeps) {}

  /** Reads the tree's providers and generations into the view (one GET). */
  async list(rootUuid: string): Promise<void> {
    this.deps.view.applyListing(await this.deps.api.providersInTree(rootUuid));
  }

  /**
   * Makes Placement match `desired` (a tree with exactly one root), moving inventory and
   * allocations as `moves` say in one reshape.
   * @throws SyncError when the cycle cannot complete
   */
  async sync(desired: ProviderTree, moves: readonly MoveInstruction[], opts: SyncOptions = {}): Promise<SyncResult> {
    const { view, ownership, api } = this.deps;
    const rootUuid = opts.rootUuid ?? desired.rootUuids()[0];
    if (!rootUuid || !desired.exists(rootUuid)) throw new SyncError(`the driver's tree lacks this host's root provider ${String(rootUuid)}`);
    const sink = opts.dryRun ? new RecordedWrites() : new PlacementWrites(api);
    const recorded = sink instanceof RecordedWrites ? sink.writes : [];
    const ctx: SyncContext = {
      api,
      sink,
      view,
      ownership,
      logger: this.deps.logger,
      clock: this.deps.clock ?? systemClock,
      random: this.deps.random ?? Math.random,
      initialRatios: this.deps.initialRatios,
      conflictAttempts: this.deps.conflictAttempts ?? 4,
      stats: { reads: 0, writes: 0, conflicts: 0 },
      problems: [],
      writes: recorded,
    };
    const created: string[] = [];
    const deleted: string[] = [];
    let reshaped = false;
    // Other roots in the tree are sharing providers (storage pools): read, never written.
    const wanted = desired.snapshot(rootUuid);
    try {
      if (!opts.listed) {
        ctx.stats.reads++;
        await this.list(rootUuid);
      }
      // None of this host's providers exist (the listing of its root is empty): a new host.
      const newHost = ctx.view.size === 0;
      const missingTraits = await ensureNames(ctx, this.deps.names, wanted);
      for (const p of wanted) await this.create(ctx, p, created);
      if (moves.length > 0) {
        await this.reshape(ctx, desired, moves, rootUuid);
        reshaped = true;
      } else if (newHost) {
        await registerInventories(ctx, wanted, new Set(created), () => this.list(rootUuid));
      }
      await this.deleteRemoved(ctx, desired, deleted);
      for (const p of [...wanted].reverse()) {
        await this.syncProvider(ctx, {
          ...p,
          traits: missingTraits.size ? p.traits.filter((t) => !missingTraits.has(t)) : p.traits,
        });
      }
      if (!sink.dryRun) await ownership.save();
    } catch (e) {
      if (e instanceof SyncError) throw e;
      throw new SyncError(`sync with ${await this.endpointLabel()} failed: ${(e as Error).message}`, { cause: e });
    }
    return { stats: { ...ctx.stats }, created, deleted, reshaped, problems: ctx.problems, writes: sink instanceof RecordedWrites ? sink.writes : [] };
  }

  private async endpointLabel(): Promise<string> {
    try {
      return `Placement at ${await this.deps.api.endpoint()}`;
    } catch {
      return 'Placement';
    }
  }

  private async create(ctx: SyncContext, p: ProviderSnapshot, created: string[]): Promise<void> {
    if (!ctx.sink.dryRun) ctx.ownership.addProvider(p.uuid);
    const have = ctx.view.get(p.uuid);
    if (have) {
      if (have.parent_provider_uuid !== p.parent_provider_uuid) {
        ctx.problems.push({ provider: p.uuid, message: `${p.name} has parent ${String(have.parent_provider_uuid)} in Placement, ${String(p.parent_provider_uuid)} in the driver's tree; left as it is` });
      } else if (have.name !== p.name) {
        // A device renamed (same identity, new name): Placement keeps its uuid, inventory and allocations.
        await ctx.sink.renameProvider(p.uuid, p.name, have.parent_provider_uuid);
        ctx.stats.writes++;
        ctx.view.rename(p.uuid, p.name);
      }
      return;
    }
    try {
      const record = await ctx.sink.createProvider({ uuid: p.uuid, name: p.name, parent_provider_uuid: p.parent_provider_uuid });
      ctx.stats.writes++;
      ctx.view.addCreated(record);
      created.push(p.uuid);
    } catch (e) {
      if (e instanceof DuplicateNameError) {
        throw new SyncError(
          `cannot create provider ${p.name} (${p.uuid}): Placement already has a provider with that name or uuid outside this host's tree; ` +
            'delete or rename it (openstack resource provider list --name ...) or check [DEFAULT] host and state_path/compute_id',
          { cause: e },
        );
      }
      throw e;
    }
  }

  private async reshape(ctx: SyncContext, desired: ProviderTree, moves: readonly MoveInstruction[], rootUuid: string): Promise<void> {
    try {
      const req = await buildReshape(ctx, desired, moves, rootUuid);
      await ctx.sink.reshape(req);
      ctx.stats.writes++;
      ctx.logger.info(
        { providers: Object.keys(req.inventories).length, consumers: Object.keys(req.allocations).length },
        'reshaped: inventory and allocations moved in one transaction',
      );
      if (ctx.sink.dryRun) {
        for (const [uuid, v] of Object.entries(req.inventories)) ctx.view.setWritten(uuid, 'inventories', v.resource_provider_generation, v.resource_provider_generation + 1, v.inventories);
        return;
      }
      // The reshape moved every touched provider's generation by an amount Placement does not tell.
      for (const uuid of Object.keys(req.inventories)) ctx.view.invalidate(uuid);
      ctx.stats.reads++;
      await this.list(rootUuid);
    } catch (e) {
      const why = e instanceof ReshapeError || e instanceof PlacementError ? e.message : String(e);
      throw new SyncError(`reshape failed, Placement is unchanged and it is retried next cycle: ${why}`, { cause: e });
    }
  }

  private async deleteRemoved(ctx: SyncContext, desired: ProviderTree, deleted: string[]): Promise<void> {
    for (const uuid of ctx.view.uuids().reverse()) {
      if (desired.exists(uuid)) continue;
      const name = ctx.view.get(uuid)?.name ?? uuid;
      if (!ctx.ownership.ownsProvider(uuid)) {
        ctx.logger.debug({ provider: uuid, name }, 'provider in our tree not created by this agent; left alone');
        continue;
      }
      const used = ctx.view.fresh(uuid, 'allocations');
      if (used && Object.keys(used).length > 0) {
        ctx.problems.push({ provider: uuid, message: `kept ${name}: the driver no longer reports it but it still holds allocations of ${Object.keys(used).length} consumer(s)` });
        continue;
      }
      try {
        await ctx.sink.deleteProvider(uuid);
        ctx.stats.writes++;
        ctx.view.remove(uuid);
        if (!ctx.sink.dryRun) ctx.ownership.forgetProvider(uuid);
        deleted.push(uuid);
      } catch (e) {
        if (e instanceof ProviderInUseError) {
          ctx.problems.push({ provider: uuid, message: `kept ${name}: the driver no longer reports it but it still holds allocations` });
        } else if (e instanceof CannotDeleteParentError) {
          ctx.problems.push({ provider: uuid, message: `kept ${name}: it has children this agent did not create` });
        } else {
          throw e;
        }
      }
    }
  }

  private async syncProvider(ctx: SyncContext, p: ProviderSnapshot): Promise<void> {
    try {
      await syncInventories(ctx, p);
      await syncOwnedSet(ctx, 'aggregates', p);
      await syncOwnedSet(ctx, 'traits', p);
    } catch (e) {
      if (e instanceof PlacementUnavailableError || e instanceof SyncError || !(e instanceof PlacementError)) throw e;
      ctx.problems.push({ provider: p.uuid, message: `${p.name}: ${e.message}` });
      ctx.view.invalidate(p.uuid);
    }
  }
}
