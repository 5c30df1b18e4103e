/**
 * The sink for the sync's writes: either Placement itself, or (for `compute-agent plan`) a recorder
 * that answers as Placement would, so a dry run walks exactly the code path of a real sync and
 * lists exactly the writes it would make.
 */
import type { AllocationWrite, PlacementApi, ProviderRecord, ReshapeRequest } from '../placement/api';
import type { FullInventoryRecord } from '../../model/provider-types';

/** A write the sync made, or would make. */
export interface PlannedWrite {
  readonly method: 'PUT' | 'POST' | 'DELETE';
  readonly path: string;
  readonly body?: unknown;
}

export interface WriteSink {
  readonly dryRun: boolean;
  ensureResourceClass(name: string): Promise<void>;
  ensureTrait(name: string): Promise<void>;
  createProvider(p: { uuid: string; name: string; parent_provider_uuid: string | null }): Promise<ProviderRecord>;
  deleteProvider(uuid: string): Promise<void>;
  renameProvider(uuid: string, name: string, parent: string | null): Promise<void>;
  putInventories(uuid: string, generation: number, inv: Readonly<Record<string, FullInventoryRecord>>): Promise<number>;
  putTraits(uuid: string, generation: number, traits: readonly string[]): Promise<number>;
  putAggregates(uuid: string, generation: number, aggregates: readonly string[]): Promise<number>;
  reshape(req: ReshapeRequest): Promise<void>;
  postAllocations(bodies: Readonly<Record<string, AllocationWrite>>): Promise<void>;
}

const rp = (u: string, rest: string): string => `/resource_providers/${u}${rest}`;

/** Writes to Placement; returns the generations Placement answers with. */
export class PlacementWrites implements WriteSink {
  readonly dryRun = false;
  constructor(private readonly api: PlacementApi) {}
  ensureResourceClass(name: string): Promise<void> {
    return this.api.ensureResourceClass(name);
  }
  ensureTrait(name: string): Promise<void> {
    return this.api.ensureTrait(name);
  }
  createProvider(p: { uuid: string; name: string; parent_provider_uuid: string | null }): Promise<ProviderRecord> {
    return this.api.createProvider(p);
  }
  deleteProvider(uuid: string): Promise<void> {
    return this.api.deleteProvider(uuid);
  }
  async renameProvider(uuid: string, name: string, parent: string | null): Promise<void> {
    await this.api.renameProvider(uuid, name, parent);
  }
  async putInventories(uuid: string, generation: number, inv: Readonly<Record<string, FullInventoryRecord>>): Promise<number> {
    return (await this.api.putInventories(uuid, generation, inv)).resource_provider_generation;
  }
  async putTraits(uuid: string, generation: number, traits: readonly string[]): Promise<number> {
    return (await this.api.putTraits(uuid, generation, traits)).resource_provider_generation;
  }
  async putAggregates(uuid: string, generation: number, aggregates: readonly string[]): Promise<number> {
    return (await this.api.putAggregates(uuid, generation, aggregates)).resource_provider_generation;
  }
  reshape(req: ReshapeRequest): Promise<void> {
    return this.api.reshape(req);
  }
  postAllocations(bodies: Readonly<Record<string, AllocationWrite>>): Promise<void> {
    return this.api.postAllocations(bodies);
  }
}

/** Records writes and answers as Placement would (a new provider at generation 0, +1 per write). */
export class RecordedWrites implements WriteSink {
  readonly dryRun = true;
  readonly writes: PlannedWrite[] = [];
  ensureResourceClass(name: string): Promise<void> {
    this.writes.push({ method: 'PUT', path: `/resource_classes/${name}` });
    return Promise.resolve();
  }
  ensureTrait(name: string): Promise<void> {
    this.writes.push({ method: 'PUT', path: `/traits/${name}` });
    return Promise.resolve();
  }
  createProvider(p: { uuid: string; name: string; parent_provider_uuid: string | null }): Promise<ProviderRecord> {
    this.writes.push({ method: 'POST', path: '/resource_providers', body: p });
    return Promise.resolve({ ...p, generation: 0, root_provider_uuid: p.parent_provider_uuid ?? p.uuid });
  }
  deleteProvider(uuid: string): Promise<void> {
    this.writes.push({ method: 'DELETE', path: rp(uuid, '') });
    return Promise.resolve();
  }
  renameProvider(uuid: string, name: string, parent: string | null): Promise<void> {
    this.writes.push({ method: 'PUT', path: rp(uuid, ''), body: parent ? { name, parent_provider_uuid: parent } : { name } });
    return Promise.resolve();
  }
  putInventories(uuid: string, generation: number, inventories: Readonly<Record<string, FullInventoryRecord>>): Promise<number> {
    this.writes.push({ method: 'PUT', path: rp(uuid, '/inventories'), body: { resource_provider_generation: generation, inventories } });
    return Promise.resolve(generation + 1);
  }
  putTraits(uuid: string, generation: number, traits: readonly string[]): Promise<number> {
    this.writes.push({ method: 'PUT', path: rp(uuid, '/traits'), body: { resource_provider_generation: generation, traits } });
    return Promise.resolve(generation + 1);
  }
  putAggregates(uuid: string, generation: number, aggregates: readonly string[]): Promise<number> {
    this.writes.push({ method: 'PUT', path: rp(uuid, '/aggregates'), body: { resource_provider_generation: generation, aggregates } });
    return Promise.resolve(generation + 1);
  }
  reshape(req: ReshapeRequest): Promise<void> {
    this.writes.push({ method: 'POST', path: '/reshaper', body: req });
    return Promise.resolve();
  }
  postAllocations(bodies: Readonly<Record<string, AllocationWrite>>): Promise<void> {
    this.writes.push({ method: 'POST', path: '/allocations', body: bodies });
    return Promise.resolve();
  }
}
