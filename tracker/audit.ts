/**
 * The periodic audit: rediscover through the driver and sync Placement (`ResourceTracker`), then
 * compare the allocations on this host's providers with the instances the driver knows.
 *
 * - orphaned: a consumer holds resources on our providers but no instance here has that uuid and
 *   no operation is in flight for it (a leftover of a crash, an evacuation, a failed cleanup);
 * - missing: an instance the driver runs has no allocation on our providers.
 * "Our providers" are the root and those the agent created: an instance's allocation on a provider
 * another service created under our root (a port's bandwidth on Neutron's) is neither looked at
 * nor ever removed here.
 * With `[compute] heal_allocations = report` (the default) both are logged; with `heal`, orphaned
 * allocations are removed from our providers (with the consumer's generation: a concurrent change
 * wins) and missing ones are written from what the driver says the instance uses. Consumers with
 * an operation in flight are never touched.
 *
 * Runs are scheduled with node-cron and never overlap; a failed run (Placement unreachable, say) is
 * one log line naming the endpoint and the cause, and the next run starts afresh.
 */
import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from '../lib/logging/logger';
import type { PlacementApi } from './placement/api';
import { ConsumerGenerationConflictError, malformedFields, PlacementError } from './placement/errors';
import type { SyncResult } from './sync/context';
import type { ResourceTracker } from './tracker';
import type { Resources } from '../model/provider-types';
import { cronFor } from './schedule';

/** An instance as the driver reports it; `allocations` lets `heal` recreate a missing allocation. */
export interface InstanceInfo {
  readonly uuid: string;
  readonly allocations?: Readonly<Record<string, Resources>>;
  readonly project_id?: string;
  readonly user_id?: string;
}

export interface InstanceSource {
  listInstances(): Promise<readonly InstanceInfo[]>;
}

export interface AuditResult {
  readonly sync: SyncResult;
  readonly orphaned: readonly string[];
  readonly missing: readonly string[];
  readonly healed: readonly string[];
}

export interface AuditDeps {
  readonly tracker: ResourceTracker;
  readonly api: PlacementApi;
  readonly instances: InstanceSource;
  readonly logger: Logger;
  readonly heal: 'report' | 'heal';
  /** How long (ms) a mismatch must persist before heal acts on it. */
  readonly healGraceMs?: number;
  /** Consumers the compute manager is working on (builds, moves, migration records). */
  readonly inFlight?: () => ReadonlySet<string>;
  readonly now?: () => number;
  /** Told how each audit ended and how long it took (for metrics). */
  readonly onAudit?: (outcome: 'ok' | 'error', seconds: number, result: AuditResult | undefined) => void;
}

export class Auditor {
  private task: ScheduledTask | undefined;
  private running: Promise<AuditResult | undefined> | undefined;
  private lastSuccessAt: number | undefined;
  private lastError: string | undefined;
  /** consumer -> when it was first seen orphaned or missing (consecutively). */
  private readonly mismatchSince = new Map<string, number>();

  constructor(private readonly deps: AuditDeps) {}

  /** When the last audit completed without error (epoch ms), if ever. */
  get lastSuccess(): number | undefined {
    return this.lastSuccessAt;
  }

  get lastFailure(): string | undefined {
    return this.lastError;
  }

  /**
   * One audit. Concurrent calls share the run in progress.
   * @throws SyncError and Placement errors; `runLogged` is the form for schedules.
   */
  run(): Promise<AuditResult> {
    const p = (this.running ??= this.once().finally(() => {
      this.running = undefined;
    }));
    return p as Promise<AuditResult>;
  }

  /** One audit whose failure becomes one log line; resolves undefined on failure. */
  async runLogged(): Promise<AuditResult | undefined> {
    const t0 = process.hrtime.bigint();
    const took = (): number => Number(process.hrtime.bigint() - t0) / 1e9;
    try {
      const r = await this.run();
      this.deps.onAudit?.('ok', took(), r);
      return r;
    } catch (e) {
      this.lastError = (e as Error).message;
      this.deps.logger.error({ reason: this.lastError, ...malformedFields(e) }, 'audit failed; the next run retries');
      this.deps.onAudit?.('error', took(), undefined);
      return undefined;
    }
  }

  /** Schedules `runLogged` every `seconds` (offset per host); never two runs at once. */
  start(seconds: number, host: string): void {
    this.stop();
    cron.setLogger({
      info: (m) => this.deps.logger.debug({ scheduler: 'node-cron' }, m),
      warn: (m) => this.deps.logger.warn({ scheduler: 'node-cron' }, m),
      error: (m) => this.deps.logger.error({ scheduler: 'node-cron' }, String(m)),
      debug: (m) => this.deps.logger.debug({ scheduler: 'node-cron' }, String(m)),
    });
    this.task = cron.schedule(cronFor(seconds, host), () => this.runLogged(), { name: 'audit', noOverlap: true });
  }

  /** Stops the schedule; a run in progress finishes. */
  stop(): void {
    void this.task?.destroy();
    this.task = undefined;
  }

  /** The next scheduled run, if scheduled. */
  nextRun(): Date | null {
    return this.task?.getNextRun() ?? null;
  }

  /** Waits for a run in progress, if any. */
  async settle(): Promise<void> {
    await this.running?.catch(() => undefined);
  }

  private async once(): Promise<AuditResult> {
    const { tracker, logger } = this.deps;
    const sync = await tracker.updateFromDriver();
    for (const p of sync.problems) logger.warn({ provider: p.provider }, p.message);
    if (sync.stats.writes > 0 || sync.created.length || sync.deleted.length) {
      logger.info({ ...sync.stats, created: sync.created.length, deleted: sync.deleted.length, reshaped: sync.reshaped }, 'Placement updated');
    }
    const onProviders = await tracker.refreshAllocations();
    const instances = await this.deps.instances.listInstances();
    const busy = new Set([...(this.deps.inFlight?.() ?? []), ...tracker.claims.consumers()]);
    const known = new Map(instances.map((i) => [i.uuid, i]));
    const orphaned = [...onProviders.keys()].filter((c) => !known.has(c) && !busy.has(c)).sort();
    const missing = instances.filter((i) => !onProviders.has(i.uuid) && !busy.has(i.uuid)).map((i) => i.uuid).sort();
    const healed: string[] = [];
    const now = (this.deps.now ?? Date.now)();
    const mismatched = new Set([...orphaned, ...missing]);
    for (const c of [...this.mismatchSince.keys()]) if (!mismatched.has(c)) this.mismatchSince.delete(c);
    for (const c of mismatched) if (!this.mismatchSince.has(c)) this.mismatchSince.set(c, now);
    // Hysteresis: only what stayed mismatched for the grace period is healed (a move between hosts
    // looks orphaned on the source for a moment).
    const ripe = (c: string): boolean => now - (this.mismatchSince.get(c) ?? now) >= (this.deps.healGraceMs ?? 600000);
    if (orphaned.length || missing.length) {
      logger.warn({ orphaned, missing, mode: this.deps.heal }, 'allocations do not match the instances on this host');
      if (this.deps.heal === 'heal') {
        for (const c of orphaned.filter(ripe)) if (await this.removeOrphan(c, onProviders.get(c) ?? new Set())) healed.push(c);
        for (const u of missing.filter(ripe)) if (await this.writeMissing(known.get(u))) healed.push(u);
        for (const c of healed) this.mismatchSince.delete(c);
      }
    }
    this.lastSuccessAt = (this.deps.now ?? Date.now)();
    this.lastError = undefined;
    return { sync, orphaned, missing, healed };
  }

  /** Removes a consumer's allocations from our providers, keeping the rest, with its generation. */
  private async removeOrphan(consumer: string, ours: ReadonlySet<string>): Promise<boolean> {
    const { api, logger } = this.deps;
    try {
      const cur = await api.consumerAllocations(consumer);
      if (cur.consumer_generation === undefined || !cur.project_id || !cur.user_id) return false;
      const keep = Object.fromEntries(Object.entries(cur.allocations).filter(([rp]) => !ours.has(rp)).map(([rp, v]) => [rp, { resources: v.resources }]));
      await api.putAllocations(consumer, { allocations: keep, project_id: cur.project_id, user_id: cur.user_id, consumer_generation: cur.consumer_generation });
      // Our providers, left out of the write, keep their generation: the cache must drop it there.
      this.deps.tracker.view.dropConsumer(consumer, new Set(Object.keys(keep)));
      logger.info({ consumer }, 'healed: orphaned allocation removed from this host');
      // What it holds elsewhere stays, on a sharing provider as on one Neutron created under our
      // root (a port's bandwidth): not the agent's to remove, and not seen by the next audit.
      const left = Object.keys(keep).sort();
      if (left.length) logger.warn({ consumer, left_on: left }, "the orphan still holds allocations on providers that are not this agent's; remove them with nova-manage placement audit --delete if the instance is gone");
      return true;
    } catch (e) {
      if (e instanceof ConsumerGenerationConflictError) logger.info({ consumer }, 'not healed: the consumer changed meanwhile');
      else if (e instanceof PlacementError) logger.warn({ consumer, reason: e.message, ...malformedFields(e) }, 'not healed');
      else throw e;
      return false;
    }
  }

  private async writeMissing(instance: InstanceInfo | undefined): Promise<boolean> {
    if (!instance?.allocations || !instance.project_id || !instance.user_id) return false;
    try {
      await this.deps.api.putAllocations(instance.uuid, {
        allocations: Object.fromEntries(Object.entries(instance.allocations).map(([rp, resources]) => [rp, { resources }])),
        project_id: instance.project_id,
        user_id: instance.user_id,
        consumer_generation: null,
      });
      this.deps.logger.info({ consumer: instance.uuid }, 'healed: missing allocation written');
      return true;
    } catch (e) {
      if (!(e instanceof PlacementError)) throw e;
      this.deps.logger.warn({ consumer: instance.uuid, reason: e.message }, 'not healed');
      return false;
    }
  }
}
