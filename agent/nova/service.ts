/**
 * The agent as a nova-compute service, through nova-conductor (control_plane = nova), in the order
 * nova-compute does it (`docs/nova-control-plane.md#registration`):
 *
 * - `ping` until a conductor answers;
 * - `Service.get_minimum_version("nova-conductor")`: the release the control plane runs, from which
 *   the release to register as is chosen (`releases.ts`; `[DEFAULT] nova_service_version`), and
 *   with it the object manifest every later call sends;
 * - `Service.get_by_host_and_binary(host, "nova-compute")`, else `Service.create` with topic
 *   `compute` and that release's service version (nova gates features and caps RPC by it);
 * - `ComputeNode.get_by_host_and_nodename(host, host)`: an existing node's uuid is adopted as the
 *   root provider uuid (the scheduler maps Placement candidates to compute nodes by that uuid);
 *   otherwise `ComputeNode.create` with our root provider uuid, the host's real capacity, CPU and
 *   hypervisor version, `host_ip` (`my_ip`) and the Service's id (`service_id`, which nova from
 *   2023.2 on sets on every node of a compute, and corrects on an existing one);
 * - `Service.save` with `report_count` + 1 every `report_interval`: the heartbeat that makes nova
 *   call the service up (nova sets `last_seen_up` when the count grows).
 *
 * A failed heartbeat is logged and retried on the next tick; it never stops the agent.
 */
import type { Logger } from '../../lib/logging/logger';
import { ConductorError, type CallBound, type Conductor } from './conductor';
import { serviceContext } from '../rpc/oslo/context';
import type { RpcContext } from '../rpc/oslo/messages';
import { RpcTimeoutError } from '../rpc/oslo/errors';
import { applyUpdates, dataOf, isPrimitive, primitive, type Primitive } from './objects';
import { chooseRelease, type NovaRelease } from './releases';

export const COMPUTE_BINARY = 'nova-compute';

/** The host's capacity as nova's ComputeNode reports it. */
export interface ComputeNodeFacts {
  readonly vcpus: number;
  readonly memory_mb: number;
  readonly local_gb: number;
  readonly cpu_allocation_ratio: number;
  readonly ram_allocation_ratio: number;
  readonly disk_allocation_ratio: number;
  /** e.g. "QEMU" or "fake". */
  readonly hypervisor_type: string;
  /** nova's integer form of the hypervisor's version (QEMU 7.2.0: 7002000). */
  readonly hypervisor_version: number;
  /** JSON, shaped as nova's libvirt driver shapes it (`cpu-info.ts`). */
  readonly cpu_info: string;
}

/** What the instances on this host use, as nova's ComputeNode counts it. */
export interface NodeUsage {
  readonly vcpus_used: number;
  readonly memory_mb_used: number;
  readonly local_gb_used: number;
  readonly running_vms: number;
}

export interface NovaServiceOptions {
  readonly conductor: Conductor;
  readonly host: string;
  /** `[DEFAULT] nova_service_version`: auto, or the service version to register as. */
  readonly serviceVersion: 'auto' | number;
  /** `[DEFAULT] my_ip`: the ComputeNode's host_ip. */
  readonly hostIp: string;
  readonly reportIntervalMs: number;
  readonly logger: Logger;
  /** `rpc_response_timeout`: how long each start-up ping waits for a conductor's answer before it is sent again, and the longest a heartbeat waits. */
  readonly pingTimeoutMs?: number;
}

/** Registration could not complete; names the step. */
export class NovaRegistrationError extends Error {
  constructor(step: string, options: { cause: unknown }) {
    super(`nova registration failed at ${step}: ${options.cause instanceof Error ? options.cause.message : String(options.cause)}`, options);
    this.name = 'NovaRegistrationError';
  }
}

/** Ownership: owns the heartbeat timer. Call `register`, then `registerNode`, then `startHeartbeat`. */
export class NovaService {
  private service: Primitive | undefined;
  private chosen: NovaRelease | undefined;
  private node: Primitive | undefined;
  private facts: ComputeNodeFacts | undefined;
  private usageSaving: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private beating = false;
  private readonly log: Logger;

  constructor(private readonly o: NovaServiceOptions) {
    this.log = o.logger.child({ component: 'nova-service' });
  }

  /** The registered Service record (after `register`). */
  get record(): Readonly<Record<string, unknown>> | undefined {
    return this.service ? dataOf(this.service, 'Service') : undefined;
  }

  /** The release registered as (after `register`). */
  get release(): NovaRelease | undefined {
    return this.chosen;
  }

  /** The id of this host's ComputeNode in nova (after `registerNode`): Instance.compute_id, Migration.dest_compute_id. */
  get computeNodeId(): number | undefined {
    const id = this.node ? dataOf(this.node, 'ComputeNode').id : undefined;
    return typeof id === 'number' ? id : undefined;
  }

  /**
   * Waits for a conductor, chooses the release to register as, then finds or creates this host's Service.
   * @returns the uuid of an existing ComputeNode for this host, to adopt as the root provider uuid
   * @throws NovaRegistrationError (its cause a ServiceVersionError when no release fits)
   */
  async register(): Promise<string | undefined> {
    const { conductor, host } = this.o;
    const ctx = serviceContext();
    await this.step('ping', () => this.waitForConductor(ctx));
    const release = await this.step('service version', () => this.negotiate());
    this.chosen = release;
    conductor.useObjectVersions(release.objects);
    const version = release.serviceVersion;
    const found = await this.step('Service.get_by_host_and_binary', () => conductor.classAction(ctx, 'Service', 'get_by_host_and_binary', [host, COMPUTE_BINARY]));
    if (isPrimitive(found, 'Service')) {
      this.service = found;
      const data = dataOf(found, 'Service');
      if (data.version !== version) await this.saveService({ version });
      this.log.info({ service_id: data.id }, 'nova service found');
    } else {
      const created = primitive('Service', { host, binary: COMPUTE_BINARY, topic: 'compute', report_count: 0, version }, conductor.objectVersions);
      const reply = await this.step('Service.create', () => conductor.objectAction(ctx, created, 'create'));
      this.service = applyUpdates(created, reply.updates);
      this.log.info({ service_id: dataOf(this.service, 'Service').id }, 'nova service created');
    }
    const node = await this.step('ComputeNode.get_by_host_and_nodename', () =>
      conductor.classAction(ctx, 'ComputeNode', 'get_by_host_and_nodename', [host, host]).catch((e: unknown) => {
        if (e instanceof ConductorError && e.novaClass === 'ComputeHostNotFound') return null;
        throw e;
      }),
    );
    if (!isPrimitive(node, 'ComputeNode')) return undefined;
    const uuid = dataOf(node, 'ComputeNode').uuid;
    return typeof uuid === 'string' ? uuid : undefined;
  }

  /**
   * Creates this host's ComputeNode with `rootUuid` (our root provider), unless one exists; an
   * existing one gets the current capacity.
   * @throws NovaRegistrationError
   */
  async registerNode(rootUuid: string, facts: ComputeNodeFacts): Promise<void> {
    const { conductor, host } = this.o;
    const ctx = serviceContext();
    const serviceId = this.service ? dataOf(this.service, 'Service').id : undefined;
    const usage = { ...facts, host_ip: this.o.hostIp, vcpus_used: 0, memory_mb_used: 0, local_gb_used: 0, free_ram_mb: facts.memory_mb, free_disk_gb: facts.local_gb, running_vms: 0, current_workload: 0, disk_available_least: facts.local_gb };
    const existing = await this.step('ComputeNode.get_by_host_and_nodename', () =>
      conductor.classAction(ctx, 'ComputeNode', 'get_by_host_and_nodename', [host, host]).catch((e: unknown) => {
        if (e instanceof ConductorError && e.novaClass === 'ComputeHostNotFound') return null;
        throw e;
      }),
    );
    this.facts = facts;
    if (isPrimitive(existing, 'ComputeNode')) {
      const current = dataOf(existing, 'ComputeNode');
      const fields = typeof serviceId === 'number' && current.service_id !== serviceId ? { ...usage, service_id: serviceId } : usage;
      const saved = { ...existing, 'nova_object.data': { ...current, ...fields }, 'nova_object.changes': Object.keys(fields) };
      const reply = await this.step('ComputeNode.save', () => conductor.objectAction(ctx, saved, 'save'));
      this.node = applyUpdates(saved, reply.updates);
      this.log.info({ compute_node: dataOf(existing, 'ComputeNode').uuid }, 'nova compute node updated');
      return;
    }
    const versions = conductor.objectVersions;
    const hvSpec = primitive('HVSpec', { arch: 'x86_64', hv_type: facts.hypervisor_type.toLowerCase(), vm_mode: 'hvm' }, versions);
    const node = primitive(
      'ComputeNode',
      {
        uuid: rootUuid,
        host,
        hypervisor_hostname: host,
        ...(typeof serviceId === 'number' ? { service_id: serviceId } : {}),
        supported_hv_specs: [hvSpec],
        numa_topology: null,
        pci_device_pools: null,
        stats: {},
        ...usage,
      },
      versions,
    );
    const reply = await this.step('ComputeNode.create', () => conductor.objectAction(ctx, node, 'create'));
    this.node = applyUpdates(node, reply.updates);
    this.log.info({ compute_node: rootUuid, id: reply.updates.id }, 'nova compute node created');
  }

  /**
   * Saves what the instances use on the ComputeNode (what nova-compute's resource tracker writes
   * after claims and periodically), only the fields that changed. Saves run one at a time, in
   * order. Never throws: a failed save is logged and the next report carries the numbers.
   */
  reportUsage(u: NodeUsage): Promise<void> {
    this.usageSaving = this.usageSaving.then(async () => {
      const base = this.node;
      const facts = this.facts;
      if (!base || !facts) return;
      const want: Record<string, number> = { ...u, free_ram_mb: facts.memory_mb - u.memory_mb_used, free_disk_gb: facts.local_gb - u.local_gb_used };
      const have = dataOf(base, 'ComputeNode');
      const changed = Object.fromEntries(Object.entries(want).filter(([k, v]) => have[k] !== v));
      if (Object.keys(changed).length === 0) return;
      try {
        const obj = { ...base, 'nova_object.data': { ...have, ...changed }, 'nova_object.changes': Object.keys(changed) };
        const reply = await this.o.conductor.objectAction(serviceContext(), obj, 'save');
        this.node = applyUpdates(obj, reply.updates);
      } catch (e) {
        this.log.warn({ reason: e instanceof Error ? e.message : String(e) }, 'compute node usage not saved; the next report carries it');
      }
    });
    return this.usageSaving;
  }

  /** Starts the `Service.save` heartbeat every `report_interval`. Idempotent. */
  startHeartbeat(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.beat(), this.o.reportIntervalMs);
    this.timer.unref();
    void this.beat();
  }

  stopHeartbeat(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * One heartbeat: `report_count` + 1. Never throws; a missed beat is logged. Its call waits at
   * most one `report_interval` (or `rpc_response_timeout`, if shorter): a reply lost while the
   * conductor restarts must not hold the next beat back until nova counts the host down.
   */
  async beat(): Promise<void> {
    if (this.beating || !this.service) return;
    this.beating = true;
    try {
      const count = Number(dataOf(this.service, 'Service').report_count ?? 0);
      const timeoutMs = Math.min(this.o.reportIntervalMs, this.o.pingTimeoutMs ?? Number.POSITIVE_INFINITY);
      await this.saveService({ report_count: count + 1 }, { timeoutMs });
    } catch (e) {
      this.log.warn({ reason: e instanceof Error ? e.message : String(e) }, 'service heartbeat failed; retrying on the next interval');
    } finally {
      this.beating = false;
    }
  }

  /** The release to register as, from what nova-conductor runs and the configured version. @throws ServiceVersionError */
  private async negotiate(): Promise<NovaRelease> {
    const reported = await this.o.conductor.classAction(serviceContext(), 'Service', 'get_minimum_version', ['nova-conductor']).catch((e: unknown) => {
      // A configured version does not need the answer; auto does (chooseRelease says so).
      this.log.warn({ reason: e instanceof Error ? e.message : String(e) }, 'nova-conductor did not report its service version');
      return undefined;
    });
    const controlPlane = typeof reported === 'number' && Number.isInteger(reported) ? reported : undefined;
    const { release, warning } = chooseRelease(this.o.serviceVersion, controlPlane);
    if (warning) this.log.warn({ control_plane_version: controlPlane, service_version: release.serviceVersion }, warning);
    this.log.info({ release: release.name, service_version: release.serviceVersion, compute_rpc: release.computeRpc, control_plane_version: controlPlane, configured: this.o.serviceVersion }, 'nova release chosen');
    return release;
  }

  private async saveService(updates: Readonly<Record<string, unknown>>, bound: CallBound = {}): Promise<void> {
    const base = this.service;
    if (!base) return;
    const obj = { ...base, 'nova_object.data': { ...dataOf(base, 'Service'), ...updates }, 'nova_object.changes': Object.keys(updates) };
    const reply = await this.o.conductor.objectAction(serviceContext(), obj, 'save', [], {}, bound);
    this.service = applyUpdates({ ...obj, 'nova_object.changes': [] }, reply.updates);
  }

  /**
   * Pings until a conductor answers, as nova-compute waits at start: a ping that times out (no
   * conductor yet, or one too busy to answer in time) is logged and sent again; any other failure
   * ends registration.
   */
  private async waitForConductor(ctx: RpcContext): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.o.conductor.ping(ctx, this.o.pingTimeoutMs);
        return;
      } catch (e) {
        if (!(e instanceof RpcTimeoutError)) throw e;
        this.log.warn({ attempt, waited_ms: e.waitedMs }, 'timed out waiting for nova-conductor; asking again (is it running?)');
      }
    }
  }

  private async step<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw new NovaRegistrationError(what, { cause: e });
    }
  }
}
