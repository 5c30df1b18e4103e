/**
 * The agent's Prometheus metrics, in a registry of its own (never prom-client's global one, so
 * tests and embedded agents stay isolated). Components report through the narrow methods here;
 * nothing else imports prom-client.
 *
 * Series (prefix `compute_agent_`): Placement requests by method, route and status; 409s by kind;
 * sync and audit durations; age of the last good audit; reshapes; RPC messages by method and
 * outcome, and their handling time; Neutron requests by method, route and status, and their
 * latency; a build's wait for network-vif-plugged by outcome; operations in flight; instances by state; broker outages (their length, and the time
 * from the broker's return to consuming again); plus Node's default process metrics, which
 * include event-loop lag (`nodejs_eventloop_lag_seconds`), the signal of a blocking probe.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export type ConflictKind = 'provider' | 'consumer';

export class AgentMetrics {
  readonly registry = new Registry();
  private readonly placementRequests: Counter<'method' | 'route' | 'status'>;
  private readonly placementSeconds: Histogram<'method'>;
  private readonly conflicts: Counter<'kind'>;
  private readonly syncSeconds: Histogram<'outcome'>;
  private readonly auditSeconds: Histogram<'outcome'>;
  private readonly reshapes: Counter;
  private readonly rpcMessages: Counter<'method' | 'outcome'>;
  private readonly rpcSeconds: Histogram<'method' | 'outcome'>;
  private readonly neutronRequests: Counter<'method' | 'route' | 'status'>;
  private readonly neutronSeconds: Histogram<'method'>;
  private readonly vifWaitSeconds: Histogram<'outcome'>;
  private readonly inFlight: Gauge;
  private readonly instances: Gauge<'state'>;
  private readonly owed: Gauge<'kind'>;
  private readonly brokerOutageSeconds: Histogram;
  private readonly brokerBackToConsumingSeconds: Histogram;
  private lastAuditSuccess: number | undefined;
  private readonly collectors: Array<() => void> = [];

  constructor(now: () => number = Date.now, defaults = true) {
    const registers = [this.registry];
    const p = 'compute_agent_';
    this.placementRequests = new Counter({ name: `${p}placement_requests_total`, help: 'Placement requests by method, route and HTTP status (status "error" = no answer).', labelNames: ['method', 'route', 'status'], registers });
    this.placementSeconds = new Histogram({ name: `${p}placement_request_seconds`, help: 'Placement request latency.', labelNames: ['method'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers });
    this.conflicts = new Counter({ name: `${p}placement_conflicts_total`, help: '409 concurrent_update answers by kind (provider generation: routine after scheduler claims; consumer generation: fails the operation).', labelNames: ['kind'], registers });
    this.syncSeconds = new Histogram({ name: `${p}sync_duration_seconds`, help: 'Duration of Placement sync cycles.', labelNames: ['outcome'], buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers });
    this.auditSeconds = new Histogram({ name: `${p}audit_duration_seconds`, help: 'Duration of periodic audits.', labelNames: ['outcome'], buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers });
    this.reshapes = new Counter({ name: `${p}reshapes_total`, help: 'POST /reshaper calls that succeeded.', registers });
    this.rpcMessages = new Counter({ name: `${p}rpc_messages_total`, help: 'RPC messages by method and outcome.', labelNames: ['method', 'outcome'], registers });
    this.rpcSeconds = new Histogram({ name: `${p}rpc_method_seconds`, help: 'Time from taking an RPC request up to its end (a build: to ACTIVE or ERROR), by method and outcome.', labelNames: ['method', 'outcome'], buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300], registers });
    this.neutronRequests = new Counter({ name: `${p}neutron_requests_total`, help: 'Neutron requests by method, route (ids as {id}) and HTTP status (status "error" = no answer).', labelNames: ['method', 'route', 'status'], registers });
    this.neutronSeconds = new Histogram({ name: `${p}neutron_request_seconds`, help: 'Neutron request latency.', labelNames: ['method'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers });
    this.vifWaitSeconds = new Histogram({ name: `${p}vif_plug_wait_seconds`, help: 'How long a build waited for network-vif-plugged of its ports, by outcome (completed, failed, timeout).', labelNames: ['outcome'], buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300], registers });
    this.inFlight = new Gauge({ name: `${p}operations_in_flight`, help: 'Compute operations accepted and not yet finished.', registers });
    this.instances = new Gauge({ name: `${p}instances`, help: 'Instances on this host by vm_state.', labelNames: ['state'], registers });
    this.owed = new Gauge({ name: `${p}owed_work`, help: 'Work owed to a service that did not answer, retried in the background (allocation_removal: Placement; attachment_delete: Cinder).', labelNames: ['kind'], registers });
    const outageBuckets = [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300];
    this.brokerOutageSeconds = new Histogram({ name: `${p}broker_outage_seconds`, help: 'Broker outages: from the loss of the connection to consuming again.', buckets: outageBuckets, registers });
    this.brokerBackToConsumingSeconds = new Histogram({ name: `${p}broker_back_to_consuming_seconds`, help: "From the broker's return (the last failed connection attempt) to consuming again, per outage.", buckets: outageBuckets, registers });
    const lastAuditAge = (): number => (this.lastAuditSuccess === undefined ? -1 : (now() - this.lastAuditSuccess) / 1000);
    new Gauge({
      name: `${p}audit_last_success_age_seconds`,
      help: 'Seconds since the last audit that completed without error (-1: none yet).',
      registers,
      collect() {
        this.set(lastAuditAge());
      },
    });
    if (defaults) collectDefaultMetrics({ register: this.registry, prefix: p, eventLoopMonitoringPrecision: 10 });
  }

  placementRequest(method: string, route: string, status: number | 'error', seconds: number): void {
    this.placementRequests.inc({ method, route, status: String(status) });
    this.placementSeconds.observe({ method }, seconds);
  }

  neutronRequest(method: string, route: string, status: number | 'error', seconds: number): void {
    this.neutronRequests.inc({ method, route, status: String(status) });
    this.neutronSeconds.observe({ method }, seconds);
  }

  vifPlugWait(outcome: string, seconds: number): void {
    this.vifWaitSeconds.observe({ outcome }, seconds);
  }

  conflict(kind: ConflictKind): void {
    this.conflicts.inc({ kind });
  }

  sync(outcome: 'ok' | 'error', seconds: number, reshaped: boolean): void {
    this.syncSeconds.observe({ outcome }, seconds);
    if (reshaped) this.reshapes.inc();
  }

  /** An audit ended; `observe` false only updates the last-success time (no duration sample). */
  audit(outcome: 'ok' | 'error', seconds: number, at: number, observe = true): void {
    if (observe) this.auditSeconds.observe({ outcome }, seconds);
    if (outcome === 'ok') this.lastAuditSuccess = at;
  }

  /** Runs `fn` before every scrape (to refresh gauges from live state). */
  onCollect(fn: () => void): void {
    this.collectors.push(fn);
  }

  rpcMessage(method: string, outcome: string, seconds?: number): void {
    this.rpcMessages.inc({ method, outcome });
    if (seconds !== undefined) this.rpcSeconds.observe({ method, outcome }, seconds);
  }

  /** A broker outage ended: the agent consumes again. */
  brokerRecovered(outageSeconds: number, backToConsumingSeconds: number): void {
    this.brokerOutageSeconds.observe(outageSeconds);
    this.brokerBackToConsumingSeconds.observe(backToConsumingSeconds);
  }

  setInFlight(n: number): void {
    this.inFlight.set(n);
  }

  /** How many items of each kind of owed work are waiting (`agent/compute/owed-work.ts`). */
  setOwed(byKind: Readonly<Record<string, number>>): void {
    for (const [kind, n] of Object.entries(byKind)) this.owed.set({ kind }, n);
  }

  setInstances(byState: Readonly<Record<string, number>>): void {
    this.instances.reset();
    for (const [state, n] of Object.entries(byState)) this.instances.set({ state }, n);
  }

  /** The exposition text and its content type. */
  async render(): Promise<{ body: string; contentType: string }> {
    for (const fn of this.collectors) fn();
    return { body: await this.registry.metrics(), contentType: this.registry.contentType };
  }
}
