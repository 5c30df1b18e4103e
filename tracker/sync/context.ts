/**
 * What one sync cycle works with: the Placement port for reads, the write sink, the cache, the
 * ownership record, and counters. Also the cycle's result, and the errors a cycle can end with.
 */
import type { Logger } from '../../lib/logging/logger';
import type { Clock } from '../../lib/clock';
import type { PlacementApi } from '../placement/api';
import type { InitialRatios } from './diff';
import type { Ownership } from './ownership';
import type { Aspect, AspectData, PlacementView } from './view';
import type { PlannedWrite, WriteSink } from './writes';

/** Something the cycle could not do but worked around; reported, not fatal. */
export interface SyncProblem {
  readonly provider?: string;
  readonly message: string;
}

export interface SyncStats {
  reads: number;
  writes: number;
  /** 409 concurrent_update answers met (and handled) during the cycle. */
  conflicts: number;
}

/** What one association refresh (`drift.ts`) re-read and what it found changed. */
export interface RefreshReport {
  /** Reads the refresh made (one per stale aspect re-read). */
  readonly reads: number;
  /** Providers re-read. */
  readonly providers: readonly string[];
  /** Per provider, the aspects whose content differed from the cache: the outside changes found. */
  readonly drifted: Readonly<Record<string, readonly Aspect[]>>;
}

export interface SyncResult {
  readonly stats: Readonly<SyncStats>;
  readonly created: readonly string[];
  readonly deleted: readonly string[];
  readonly reshaped: boolean;
  readonly problems: readonly SyncProblem[];
  /** The writes made (or, in a dry run, that would be made), in order. */
  readonly writes: readonly PlannedWrite[];
  /** The association refresh of the cycle (the tracker's cycles only); its reads are in `stats.reads`. */
  readonly refreshed?: RefreshReport;
}

export interface SyncContext {
  readonly api: PlacementApi;
  readonly sink: WriteSink;
  readonly view: PlacementView;
  readonly ownership: Ownership;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly random: () => number;
  readonly initialRatios: InitialRatios;
  /** Attempts per write when Placement answers 409 concurrent_update. */
  readonly conflictAttempts: number;
  readonly stats: SyncStats;
  readonly problems: SyncProblem[];
  readonly writes: PlannedWrite[];
}

/** The cycle could not converge: Placement unreachable, a write refused, conflicts that persist. */
export class SyncError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SyncError';
  }
}

/** The driver's move instructions cannot be turned into a valid reshape. Placement is unchanged. */
export class ReshapeError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReshapeError';
  }
}

/** Reads one aspect of a provider from Placement into the view. */
export async function readAspect<A extends Aspect>(ctx: SyncContext, uuid: string, aspect: A): Promise<AspectData[A]> {
  ctx.stats.reads++;
  let gen: number;
  let data: AspectData[Aspect];
  switch (aspect) {
    case 'inventories': {
      const r = await ctx.api.getInventories(uuid);
      [gen, data] = [r.resource_provider_generation, r.inventories];
      break;
    }
    case 'traits': {
      const r = await ctx.api.getTraits(uuid);
      [gen, data] = [r.resource_provider_generation, [...r.traits].sort()];
      break;
    }
    case 'aggregates': {
      const r = await ctx.api.getAggregates(uuid);
      [gen, data] = [r.resource_provider_generation, [...r.aggregates].sort()];
      break;
    }
    default: {
      const r = await ctx.api.providerAllocations(uuid);
      const out: Record<string, Readonly<Record<string, number>>> = {};
      for (const [c, v] of Object.entries(r.allocations)) out[c] = v.resources;
      [gen, data] = [r.resource_provider_generation, out];
    }
  }
  ctx.view.setRead(uuid, aspect, gen, data as AspectData[A]);
  return data as AspectData[A];
}

/** The aspect from the cache when fresh, else read from Placement. */
export async function freshAspect<A extends Aspect>(ctx: SyncContext, uuid: string, aspect: A): Promise<AspectData[A]> {
  return ctx.view.fresh(uuid, aspect) ?? readAspect(ctx, uuid, aspect);
}

/** A short random pause before redoing a write that met a 409 (spreads racing writers apart). */
export function conflictPause(ctx: SyncContext, attempt: number): Promise<void> {
  return ctx.clock.sleep(Math.round(ctx.random() * 25 * attempt));
}
