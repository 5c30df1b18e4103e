/**
 * What a compute flow works with, and nothing more: this host's name, the instance records (the
 * durable store, written before the side effect a new state describes), per-instance locks, the
 * claim service (every claim and allocation write), the removals deletes owe, the virt driver, the other compute hosts, the
 * control plane that hears about each step, a logger, the clock and the timeout of agent-to-agent
 * calls. Each flow file takes the `Pick<FlowContext, ...>` it uses; `ComputeManager` builds the one
 * context (`flowContext`) and hands it out.
 *
 * It is not: a flow, a place for flow logic, or a way to reach the manager.
 */
import type { Logger } from '../../lib/logging/logger';
import { InstanceNotFoundError, type InstanceRecord } from '../../model/instance';
import type { ClaimService } from '../../tracker/claims/service';
import type { VirtDriver } from '../../virt-drivers/driver';
import type { ControlPlane } from './control-plane';
import type { InstanceLocks } from './locks';
import type { ComputePeers, RecordStore, RequestContext } from './ports';
import type { AllocationRemovals } from './removals';
import type { FlowStep } from './transitions';

/** The record kind instances are stored under. */
export const INSTANCE = 'instance';

/** This host's instance records. */
export interface InstanceRecords {
  record(uuid: string): InstanceRecord | undefined;
  /** @throws InstanceNotFoundError */
  require(uuid: string): InstanceRecord;
  /** Records the instance durably (stamping `updated_at`); call before the side effect the new state describes. */
  save(rec: InstanceRecord): Promise<InstanceRecord>;
  forget(uuid: string): Promise<void>;
  instances(): InstanceRecord[];
}

export interface FlowContext extends InstanceRecords {
  readonly host: string;
  /** Every step runs holding its instance's lock. */
  readonly locks: InstanceLocks;
  readonly claims: ClaimService;
  /** Allocation removals a delete owes Placement, retried until done (`removals.ts`). */
  readonly removals: AllocationRemovals;
  readonly driver: VirtDriver;
  readonly peers: ComputePeers;
  readonly controlPlane: ControlPlane;
  readonly log: Logger;
  /** Timeout of agent-to-agent calls (live-migration checks), in milliseconds. */
  readonly callTimeoutMs: number;
  /** The current time as an ISO 8601 string, for records. */
  now(): string;
  /** Reports a flow step to the control plane (notification, or nova's saves). Never throws. */
  notify(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault?: string): Promise<void>;
}

/** What the flow context is built from: the shared parts as they are, the store and a clock. */
export type FlowContextParts = Omit<FlowContext, keyof InstanceRecords | 'now' | 'notify'> & {
  readonly store: RecordStore;
  /** Milliseconds since the epoch. */
  readonly clock: () => number;
};

/** The flow context over the journal's record store. */
export function flowContext(parts: FlowContextParts): FlowContext {
  const { store, clock, ...shared } = parts;
  const now = (): string => new Date(clock()).toISOString();
  const record = (uuid: string): InstanceRecord | undefined => store.get<InstanceRecord>(INSTANCE, uuid);
  return {
    ...shared,
    now,
    record,
    require(uuid) {
      const r = record(uuid);
      if (!r) throw new InstanceNotFoundError(uuid);
      return r;
    },
    async save(rec) {
      rec.updated_at = now();
      await store.put(INSTANCE, rec.uuid, rec);
      return rec;
    },
    async forget(uuid) {
      await store.del(INSTANCE, uuid);
    },
    instances: () => store.list<InstanceRecord>(INSTANCE).map(([, r]) => r),
    notify: (rec, step, ctx, fault) => shared.controlPlane.step(rec, step, ctx, fault),
  };
}
