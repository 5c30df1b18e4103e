/**
 * What this agent put into Placement: the providers it created or manages, and per provider the
 * traits and aggregates it added. The sync removes only what is recorded here, so a trait or an
 * aggregate that an operator or another service (Cyborg, neutron) added to our providers survives
 * every sync, and a provider someone else created inside our tree is never deleted.
 *
 * Persisted as a checkpoint in `state_path` (written only when it changes). If the file is lost or
 * corrupt the agent starts owning nothing: it then never removes anything it cannot prove it added,
 * which can leave a stale trait behind but never destroys someone else's.
 */
import { join } from 'node:path';
import type { Logger } from '../../lib/logging/logger';
import { readCheckpoint, writeCheckpoint, type CheckpointSpec } from '../../lib/checkpoint';

export interface OwnedState {
  providers: string[];
  traits: Record<string, string[]>;
  aggregates: Record<string, string[]>;
}

function isOwnedState(d: unknown): d is OwnedState {
  if (typeof d !== 'object' || d === null) return false;
  const o = d as Record<string, unknown>;
  const listOfStrings = (v: unknown): boolean => Array.isArray(v) && v.every((x) => typeof x === 'string');
  const mapOfLists = (v: unknown): boolean =>
    typeof v === 'object' && v !== null && Object.values(v as Record<string, unknown>).every(listOfStrings);
  return listOfStrings(o.providers) && mapOfLists(o.traits) && mapOfLists(o.aggregates);
}

export const OWNERSHIP_FILE = 'placement-ownership.json';

export class Ownership {
  private state: OwnedState = { providers: [], traits: {}, aggregates: {} };
  private dirty = false;
  private readonly spec: CheckpointSpec<OwnedState> | undefined;

  /** `statePath` undefined keeps ownership in memory only (tests, `plan`). */
  constructor(statePath: string | undefined, private readonly logger?: Logger) {
    this.spec = statePath
      ? { path: join(statePath, OWNERSHIP_FILE), kind: 'compute-agent/placement-ownership', version: 1, validate: isOwnedState }
      : undefined;
  }

  /** Loads the checkpoint; a missing or corrupt file starts empty (logged). */
  async load(): Promise<void> {
    if (!this.spec) return;
    try {
      this.state = (await readCheckpoint(this.spec)) ?? this.state;
    } catch (e) {
      this.logger?.warn({ reason: (e as Error).message }, 'ownership record unusable; starting with nothing owned');
    }
  }

  /** Writes the checkpoint if anything changed since the last save. */
  async save(): Promise<void> {
    if (!this.spec || !this.dirty) return;
    await writeCheckpoint(this.spec, this.state);
    this.dirty = false;
  }

  ownsProvider(uuid: string): boolean {
    return this.state.providers.includes(uuid);
  }

  addProvider(uuid: string): void {
    if (this.ownsProvider(uuid)) return;
    this.state.providers.push(uuid);
    this.dirty = true;
  }

  forgetProvider(uuid: string): void {
    const before = this.state.providers.length;
    this.state.providers = this.state.providers.filter((u) => u !== uuid);
    delete this.state.traits[uuid];
    delete this.state.aggregates[uuid];
    if (this.state.providers.length !== before) this.dirty = true;
  }

  owned(kind: 'traits' | 'aggregates', uuid: string): readonly string[] {
    return this.state[kind][uuid] ?? [];
  }

  setOwned(kind: 'traits' | 'aggregates', uuid: string, values: readonly string[]): void {
    const next = [...values].sort();
    const prev = this.state[kind][uuid] ?? [];
    if (prev.length === next.length && prev.every((v, i) => v === next[i])) return;
    this.state[kind][uuid] = next;
    this.dirty = true;
  }
}
