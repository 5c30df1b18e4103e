/**
 * ResourceTracker: the one owner of this host's view of Placement. It runs sync cycles (driver ->
 * tree -> Placement), answers capacity questions from its cache, and holds the claim service
 * (`claims/service.ts`), which counts in-flight claims on top of that cache and makes the
 * instances' allocation writes.
 *
 * Concurrency: cycles are serialized by a mutex (a periodic audit and an on-demand sync never
 * interleave); in-flight claims are synchronous bookkeeping and may happen during a cycle.
 *
 * Not here: the schedule (`audit.ts`).
 */
import { Mutex } from 'async-mutex';
import type { Logger } from '../lib/logging/logger';
import type { Clock } from '../lib/clock';
import type { PlacementApi } from './placement/api';
import type { ProviderTree } from '../model/provider-tree';
import type { AllocationsByConsumer, ConsumerAllocations, MoveInstruction, ProviderSnapshot } from '../model/provider-types';
import type { SyncResult } from './sync/context';
import { readAspect, SyncError, type SyncContext } from './sync/context';
import { PlacementError } from './placement/errors';
import type { InitialRatios } from './sync/diff';
import { treeForDriver } from './sync/driver-tree';
import { KnownNames } from './sync/names';
import { Ownership } from './sync/ownership';
import { Syncer } from './sync/syncer';
import { PlacementView } from './sync/view';
import { RecordedWrites } from './sync/writes';
import { SharingProviders } from './sync/sharing';
import { AssociationRefresh } from './sync/drift';
import { systemClock } from '../lib/clock';
import { ClaimService } from './claims/service';

/** What the tracker needs from a virt driver. */
export interface TreeSource {
  /**
   * Edits `tree` (a private copy) to the host's current shape; returns how inventory moved when the
   * shape changed (and, given `allocations`, whose allocations move).
   */
  updateProviderTree(tree: ProviderTree, nodename: string, allocations?: AllocationsByConsumer): Promise<readonly MoveInstruction[]>;
}

export interface TrackerDeps {
  readonly api: PlacementApi;
  readonly driver: TreeSource;
  /** The compute node name (`[DEFAULT] host`): the root provider's name. */
  readonly nodename: string;
  /** The root provider's uuid (`state_path/compute_id`). */
  readonly rootUuid: string;
  /** How long a claim-service operation rides out a Placement outage (`[placement] retry_deadline`); 0 when absent. */
  readonly retryDeadlineSeconds?: number;
  /** Where the ownership record is kept; undefined keeps it in memory. */
  readonly statePath?: string;
  readonly initialRatios: InitialRatios;
  readonly logger: Logger;
  readonly clock?: Clock;
  readonly random?: () => number;
  /**
   * `[compute] resource_provider_association_refresh` (default 300): at most this often, our
   * providers whose generation moved are re-read so outside changes get repaired, and sharing
   * providers are looked up again; 0 = read once (sharing providers: when the root's aggregates change).
   */
  readonly associationRefreshSeconds?: number;
}

/** `initial_*_allocation_ratio` by resource class. */
export function initialRatiosFrom(cfg: { initial_cpu_allocation_ratio: number; initial_ram_allocation_ratio: number; initial_disk_allocation_ratio: number }): InitialRatios {
  return { VCPU: cfg.initial_cpu_allocation_ratio, MEMORY_MB: cfg.initial_ram_allocation_ratio, DISK_GB: cfg.initial_disk_allocation_ratio };
}

export class ResourceTracker {
  readonly view = new PlacementView();
  readonly ownership: Ownership;
  readonly names = new KnownNames();
  readonly claims: ClaimService;
  private readonly syncer: Syncer;
  private readonly sharing: SharingProviders;
  private readonly associations: AssociationRefresh;
  private readonly cycle = new Mutex();

  constructor(private readonly deps: TrackerDeps) {
    this.ownership = new Ownership(deps.statePath, deps.logger);
    const now = (): number => (deps.clock ?? systemClock).now();
    const refreshSeconds = deps.associationRefreshSeconds ?? 300;
    this.sharing = new SharingProviders(deps.api, refreshSeconds * 1000, now);
    this.associations = new AssociationRefresh(refreshSeconds, now);
    this.claims = new ClaimService({
      api: deps.api,
      view: this.view,
      scope: {
        ourProviders: () => this.ourProviders(),
        sharingProviders: () => this.sharingProviders(),
        othersInTree: () => this.othersInTree(this.view.uuids()),
        listOthersInTree: async () => this.othersInTree((await deps.api.providersInTree(deps.rootUuid)).map((p) => p.uuid)),
      },
      now,
      retry: {
        deadlineMs: (deps.retryDeadlineSeconds ?? 0) * 1000,
        ...(deps.clock ? { clock: deps.clock } : {}),
        onRetry: (what, attempt, delayMs, cause) => deps.logger.warn({ attempt, retry_in_ms: delayMs, reason: cause.message }, `Placement unavailable during ${what}; retrying`),
      },
    });
    this.syncer = new Syncer({
      api: deps.api,
      view: this.view,
      ownership: this.ownership,
      names: this.names,
      logger: deps.logger,
      initialRatios: deps.initialRatios,
      ...(deps.clock ? { clock: deps.clock } : {}),
      ...(deps.random ? { random: deps.random } : {}),
    });
  }

  get rootUuid(): string {
    return this.deps.rootUuid;
  }

  /** Loads the ownership record. */
  async init(): Promise<void> {
    await this.ownership.load();
  }

  /**
   * This host's providers as last known from Placement (root first, parents before children), for
   * placing claims. Inventories and traits may be a cycle old; Placement checks every claim again.
   */
  ourProviders(): ProviderSnapshot[] {
    const root = this.deps.rootUuid;
    const out: ProviderSnapshot[] = [];
    for (const uuid of this.ownedUuids()) {
      const p = this.view.get(uuid);
      if (!p) continue;
      out.push({
        uuid,
        name: p.name,
        parent_provider_uuid: p.parent_provider_uuid,
        root_provider_uuid: root,
        generation: p.generation,
        inventories: this.view.known(uuid, 'inventories') ?? {},
        traits: this.view.known(uuid, 'traits') ?? [],
        aggregates: this.view.known(uuid, 'aggregates') ?? [],
      });
    }
    return out.sort((a, b) => (a.uuid === root ? -1 : b.uuid === root ? 1 : 0));
  }

  /**
   * Of `uuids` (a listing of this host's tree), the providers another service created under our
   * root: Neutron's bandwidth providers, say. Never written, never counted as ours.
   */
  private othersInTree(uuids: readonly string[]): Set<string> {
    return new Set(uuids.filter((uuid) => uuid !== this.deps.rootUuid && !this.ownership.ownsProvider(uuid)));
  }

  /** Sharing providers serving this host, as last looked up. */
  sharingProviders(): readonly ProviderSnapshot[] {
    return this.sharing.last();
  }

  /** Forgets everything cached about Placement (SIGHUP, as nova does); the next cycle re-reads. */
  clearCache(): void {
    this.view.clear();
    this.names.clear();
    this.sharing.clear();
    this.associations.clear();
  }

  /**
   * One cycle: list the tree, let the driver describe the host, sync. With `dryRun`, nothing is
   * written and the result lists the writes the cycle would make.
   * @throws SyncError
   */
  updateFromDriver(opts: { dryRun?: boolean } = {}): Promise<SyncResult> {
    return this.cycle.runExclusive(async () => {
      try {
        return await this.runCycle(opts.dryRun ?? false);
      } catch (e) {
        if (e instanceof SyncError || !(e instanceof PlacementError)) throw e;
        throw new SyncError(`sync with Placement at ${await this.deps.api.endpoint().catch(() => '?')} failed: ${e.message}`, { cause: e });
      }
    });
  }

  private async runCycle(dryRun: boolean): Promise<SyncResult> {
    const { driver, nodename, rootUuid } = this.deps;
    const ctx = this.readContext();
    ctx.stats.reads++;
    await this.syncer.list(rootUuid);
    const owned = this.ownedUuids();
    const refreshed = await this.associations.refresh(ctx, owned);
    for (const [provider, aspects] of Object.entries(refreshed.drifted)) {
      this.deps.logger.info({ provider, name: this.view.get(provider)?.name, aspects }, 'changed in Placement by someone else; the sync repairs what this agent owns');
    }
    // The driver compares its layout with the inventories it is given; read any not yet known.
    for (const uuid of owned) {
      if (!this.view.known(uuid, 'inventories')) await readAspect(ctx, uuid, 'inventories');
    }
    const root = { uuid: rootUuid, name: nodename };
    const sharing = await this.sharing.get(this.view.known(rootUuid, 'aggregates') ?? [], ctx.stats);
    const forDriver = (): ProviderTree => {
      const t = treeForDriver(this.view, this.ownership, root);
      SharingProviders.addTo(t, sharing);
      return t;
    };
    let tree = forDriver();
    let moves = await driver.updateProviderTree(tree, nodename);
    if (moves.length > 0 && moves.every((m) => m.consumers === undefined)) {
      const allocations = await this.allocationsOn(ctx, [...new Set(moves.map((m) => m.from))]);
      if (Object.keys(allocations).length > 0) {
        tree = forDriver();
        moves = await driver.updateProviderTree(tree, nodename, allocations);
      }
    }
    const result = await this.syncer.sync(tree, moves, { dryRun, listed: true, rootUuid });
    this.associations.held(this.ownedUuids());
    return { ...result, stats: { ...result.stats, reads: result.stats.reads + ctx.stats.reads }, refreshed };
  }

  /** The root and the providers this agent created, in the listing's order. */
  private ownedUuids(): string[] {
    return this.view.uuids().filter((uuid) => uuid === this.deps.rootUuid || this.ownership.ownsProvider(uuid));
  }

  /**
   * Reads the allocations of every provider of ours whose generation moved since they were last
   * read (none in a quiet period), updates the claims, and returns consumer -> our providers it uses.
   */
  refreshAllocations(): Promise<Map<string, Set<string>>> {
    return this.cycle.runExclusive(async () => {
      const ctx = this.readContext();
      const out = new Map<string, Set<string>>();
      for (const uuid of this.ownedUuids()) {
        const on = this.view.fresh(uuid, 'allocations') ?? (await readAspect(ctx, uuid, 'allocations'));
        this.claims.reconcile(uuid, on);
        for (const c of Object.keys(on)) {
          const s = out.get(c) ?? new Set<string>();
          s.add(uuid);
          out.set(c, s);
        }
      }
      return out;
    });
  }

  /** Full allocations of every consumer holding anything on `providers`, as nova gives drivers. */
  private async allocationsOn(ctx: SyncContext, providers: readonly string[]): Promise<AllocationsByConsumer> {
    const consumers = new Set<string>();
    for (const uuid of providers) {
      if (!this.view.has(uuid)) continue;
      const on = this.view.fresh(uuid, 'allocations') ?? (await readAspect(ctx, uuid, 'allocations'));
      for (const c of Object.keys(on)) consumers.add(c);
    }
    const out: Record<string, ConsumerAllocations> = {};
    for (const c of [...consumers].sort()) {
      ctx.stats.reads++;
      const a = await this.deps.api.consumerAllocations(c);
      out[c] = Object.fromEntries(Object.entries(a.allocations).map(([rp, v]) => [rp, v.resources]));
    }
    return out;
  }

  private readContext(): SyncContext {
    return {
      api: this.deps.api,
      sink: new RecordedWrites(),
      view: this.view,
      ownership: this.ownership,
      logger: this.deps.logger,
      clock: { now: () => 0, sleep: () => Promise.resolve() },
      random: Math.random,
      initialRatios: this.deps.initialRatios,
      conflictAttempts: 1,
      stats: { reads: 0, writes: 0, conflicts: 0 },
      problems: [],
      writes: [],
    };
  }
}
