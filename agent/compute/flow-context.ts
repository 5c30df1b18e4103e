/**
 * What a compute flow works with, and nothing more: this host's name, the instance records (the
 * durable store, written before the side effect a new state describes), per-instance locks, the
 * claim service (every claim and allocation write), the virt driver, the other compute hosts, the
 * control plane that hears about each step, a logger, the clock and the timeout of agent-to-agent
 * calls. Each flow file takes the `Pick<FlowContext, ...>` it uses; `ComputeManager` builds the one
 * context (`ComputeFlowContext`) and hands it out.
 *
 * It is not: a flow, a place for flow logic, or a way to reach the manager.
 */
import type { Logger } from '../../lib/logging/logger';
import { InstanceNotFoundError, type InstanceRecord } from '../../model/instance';
import type { ClaimService } from '../../tracker/claims/service';
import type { VirtDriver } from '../../virt-drivers/driver';
import type { ControlPlane, FlowStep } from './control-plane';
import type { InstanceLocks } from './locks';
import type { ComputePeers, RecordStore, RequestContext } from './ports';

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

export interface FlowContextParts {
  readonly host: string;
  readonly store: RecordStore;
  readonly locks: InstanceLocks;
  readonly claims: ClaimService;
  readonly driver: VirtDriver;
  readonly peers: ComputePeers;
  readonly controlPlane: ControlPlane;
  readonly log: Logger;
  readonly callTimeoutMs: number;
  /** Milliseconds since the epoch. */
  readonly clock: () => number;
}

/** The flow context over the journal's record store. */
export class ComputeFlowContext implements FlowContext {
  readonly host: string;
  readonly locks: InstanceLocks;
  readonly claims: ClaimService;
  readonly driver: VirtDriver;
  readonly peers: ComputePeers;
  readonly controlPlane: ControlPlane;
  readonly log: Logger;
  readonly callTimeoutMs: number;
  private readonly store: RecordStore;
  private readonly clock: () => number;

  constructor(parts: FlowContextParts) {
    this.host = parts.host;
    this.locks = parts.locks;
    this.claims = parts.claims;
    this.driver = parts.driver;
    this.peers = parts.peers;
    this.controlPlane = parts.controlPlane;
    this.log = parts.log;
    this.callTimeoutMs = parts.callTimeoutMs;
    this.store = parts.store;
    this.clock = parts.clock;
  }

  now(): string {
    return new Date(this.clock()).toISOString();
  }

  record(uuid: string): InstanceRecord | undefined {
    return this.store.get<InstanceRecord>(INSTANCE, uuid);
  }

  require(uuid: string): InstanceRecord {
    const r = this.record(uuid);
    if (!r) throw new InstanceNotFoundError(uuid);
    return r;
  }

  async save(rec: InstanceRecord): Promise<InstanceRecord> {
    rec.updated_at = this.now();
    await this.store.put(INSTANCE, rec.uuid, rec);
    return rec;
  }

  async forget(uuid: string): Promise<void> {
    await this.store.del(INSTANCE, uuid);
  }

  instances(): InstanceRecord[] {
    return this.store.list<InstanceRecord>(INSTANCE).map(([, r]) => r);
  }

  notify(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault?: string): Promise<void> {
    return this.controlPlane.step(rec, step, ctx, fault);
  }
}
