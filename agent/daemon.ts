/**
 * The agent process: wiring, start-up in a safe order, and an orderly stop.
 *
 * Start: Placement answers with a usable microversion -> the virt
 * driver initialises -> the journal is recovered from disk -> the tracker syncs Placement once (the
 * host's truth is there before any request is taken) -> the broker connection opens -> requests
 * the journal holds unfinished are finished or rolled back -> RPC consuming -> the audit is
 * scheduled -> READY=1 to systemd. Each external dependency gets bounded retries; a failure is a
 * `StartupError` with one line naming what and why.
 *
 * Stop (SIGTERM): STOPPING=1; consuming stops and operations in flight get
 * `graceful_shutdown_timeout` to finish (unfinished messages stay unacknowledged and are
 * redelivered; the journal has them anyway); the audit stops; connections close.
 *
 * Reload (SIGHUP): the new configuration's tunables apply on the next sync and the Placement cache
 * is dropped, as nova-compute does.
 *
 * Not here: argument parsing and exit codes (`cli/`).
 */
import { randomUUID } from 'node:crypto';
import type { AgentConfig } from '../config/schema';
import type { PlacementClient } from '../tracker/placement/client';
import { PlacementAuthError, PlacementUnavailableError } from '../tracker/placement/errors';
import { formatMicroversion } from '../tracker/placement/version';
import { auditInterval } from '../tracker/schedule';
import type { VirtDriver } from '../virt-drivers/driver';
import { ComputeManager } from './compute/manager';
import { computeMethods } from './compute/methods';
import { recover } from './compute/recovery';
import { registerMethods } from './compute/register';
import { DurableJournal } from './journal/durable';
import type { Logger } from '../lib/logging/logger';
import { AgentMetrics } from './ops/metrics';
import { notifierFor, type ServiceNotifier } from './ops/notify';
import { OpsServer } from './ops/server';
import { WatchdogLoop } from './ops/watchdog';
import { BrokerUnreachableError } from './rpc/amqp/broker';
import { RpcComputePeers } from './compute/adapters/peers';
import { RpcNotifier } from './compute/adapters/notifier';
import { RpcService } from './rpc/service';
import { procUptimeProvider } from './compute/adapters/host-uptime';
import { hostMethods } from './compute/adapters/host-methods';
import { COMPUTE_TOPIC } from './compute/method-table';
import { Dispatcher } from './rpc/endpoint/dispatcher';
import { backoffDelay } from '../lib/backoff';
import { systemClock, type Clock } from '../lib/clock';
import type { NovaParts } from './nova/wiring';
import { createDriver, createTracker, glanceWritesFromConfig, type TrackerParts } from './wiring';
import type { GlanceImageWrites } from '../virt-drivers/glance/api';
import { cinderFromConfig } from './volume/factory';
import { networkFromConfig } from './network/factory';

/** nova mode's wiring, loaded on first use: a standalone agent would hold its modules for nothing. */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a synchronous load on first use
const novaWiring = (): typeof import('./nova/wiring') => require('./nova/wiring') as typeof import('./nova/wiring');

/** Start-up could not reach a dependency within the allowed attempts. */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}

export interface DaemonDeps {
  readonly config: AgentConfig;
  readonly logger: Logger;
  readonly placement: PlacementClient;
  readonly clock?: Clock;
  /** Attempts per dependency at start-up before giving up. */
  readonly startupAttempts?: number;
  /** The process environment (NOTIFY_SOCKET, WATCHDOG_USEC). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly metrics?: AgentMetrics;
}

export class Daemon {
  readonly metrics: AgentMetrics;
  private rpc: RpcService | undefined;
  private driver: VirtDriver | undefined;
  private journal: DurableJournal | undefined;
  private parts: TrackerParts | undefined;
  private manager: ComputeManager | undefined;
  private nova: NovaParts | undefined;
  private ops: OpsServer | undefined;
  private watchdog: WatchdogLoop | undefined;
  private readonly periodics: Array<ReturnType<typeof setInterval>> = [];
  private readonly notifier: ServiceNotifier;
  private readonly clock: Clock;
  private readonly stopping = new AbortController();

  constructor(private readonly deps: DaemonDeps) {
    this.clock = deps.clock ?? systemClock;
    this.metrics = deps.metrics ?? new AgentMetrics();
    this.notifier = notifierFor(deps.env ?? {}, deps.logger);
  }

  /** The compute manager, once started (tests, diagnostics). */
  get compute(): ComputeManager | undefined {
    return this.manager;
  }

  /** @throws StartupError */
  async start(): Promise<void> {
    const { config, logger, placement } = this.deps;
    const host = config.DEFAULT.host;
    // Refused credentials are not an outage: waiting does not make keystone accept them.
    const endpoint = await this.retry(
      'placement',
      async () => {
        const v = await placement.assertUsable();
        return { endpoint: await placement.http.endpoint(), max: formatMicroversion(v.max) };
      },
      (e) => !(e instanceof PlacementAuthError),
    );
    logger.info({ endpoint: endpoint.endpoint, max_version: endpoint.max }, 'placement reachable');

    const driver = createDriver({ config, logger, clock: this.clock });
    this.driver = driver;
    await this.step('virt driver', () => driver.init(host));
    const journal = await this.step('journal', () => DurableJournal.open(config.DEFAULT.state_path, { logger }));
    this.journal = journal;
    const attempts = Math.max(1, this.deps.startupAttempts ?? 5);
    // The host methods first; the instance methods once the compute manager exists, before consuming starts.
    const dispatcher = registerMethods(new Dispatcher(), hostMethods({ hostUptime: procUptimeProvider('/', () => new Date(), () => driver.getHostUptime()) }));
    const rpc = new RpcService({ config, logger, journal, dispatcher, topic: COMPUTE_TOPIC, connectAttempts: attempts, onOutcome: (method, outcome, seconds) => this.metrics.rpcMessage(method, outcome, seconds), onRecovery: (r) => this.metrics.brokerRecovered(r.outageMs / 1000, r.sinceLastFailureMs / 1000), clock: this.clock });
    this.rpc = rpc;
    // nova mode: the conductor must be reachable first, because an existing compute node's uuid
    // becomes the root provider's uuid (the scheduler maps Placement candidates to nodes by it).
    let adopted: string | undefined;
    if (config.DEFAULT.control_plane === 'nova') {
      await this.connect(rpc, attempts);
      const nova = novaWiring().createNovaParts(config, rpc.client, logger);
      this.nova = nova;
      adopted = await this.step('nova service registration', () => nova.service.register());
    }
    const parts = await this.step('resource tracker', () => createTracker(config, placement, driver, logger, {
        inFlight: () => this.manager?.inFlight() ?? new Set(),
        onAudit: (outcome, seconds, r) => {
          this.metrics.audit(outcome, seconds, this.clock.now());
          if (r) this.metrics.sync('ok', seconds, r.sync.reshaped);
        },
        ...(adopted ? { preferredRootUuid: adopted } : {}),
      }));
    this.parts = parts;
    if (adopted && adopted !== parts.rootUuid) {
      throw new StartupError(`nova has compute node ${adopted} for ${host} but ${config.DEFAULT.state_path}/compute_id holds ${parts.rootUuid}; they must be one uuid (remove the file to adopt nova's, or delete the nova compute node)`);
    }
    // Sync only: the allocation audit waits until recovery has told which consumers are in flight.
    const first = await this.retry('first Placement sync', () => parts.tracker.updateFromDriver(), unreachable);
    logger.info({ root_provider: parts.rootUuid, ...first.stats, created: first.created.length }, 'Placement synced');
    const nova = this.nova;
    if (nova) await this.step('nova compute node registration', () => nova.service.registerNode(parts.rootUuid, novaWiring().computeNodeFacts(config, parts.tracker, driver)));

    const manager = new ComputeManager({
      host,
      driver,
      claims: parts.tracker.claims,
      store: journal,
      peers: new RpcComputePeers(rpc.client),
      notifier: new RpcNotifier(rpc.broker, config.DEFAULT.control_exchange, host, logger),
      logger,
      callTimeoutMs: config.DEFAULT.rpc_response_timeout * 1000,
      network: networkFromConfig(config, logger, this.clock, { onAnswer: (method, route, status, seconds) => this.metrics.neutronRequest(method, route, status, seconds) }),
      shelvedOffloadTimeS: config.DEFAULT.shelved_offload_time,
      reclaimIntervalS: config.DEFAULT.reclaim_instance_interval,
      consoles: {
        novncBaseUrl: config.vnc.enabled ? config.vnc.novncproxy_base_url : null,
        serialBaseUrl: config.serial_console.enabled ? config.serial_console.base_url : null,
        tokenTtlS: config.consoleauth.token_ttl,
      },
      vifPlugging: { timeoutS: config.DEFAULT.vif_plugging_timeout, fatal: config.DEFAULT.vif_plugging_is_fatal, onWait: (outcome, seconds) => this.metrics.vifPlugWait(outcome, seconds) },
      volumes: {
        cinder: cinderFromConfig(config, this.clock),
        ip: config.DEFAULT.my_ip ?? '127.0.0.1',
        allocateRetries: config.DEFAULT.block_device_allocate_retries,
        allocateIntervalS: config.DEFAULT.block_device_allocate_retries_interval,
      },
      ...withImages(config, this.clock),
      ...(nova ? { controlPlane: nova.controlPlane } : {}),
    });
    this.manager = manager;
    const methods = computeMethods(manager);
    registerMethods(dispatcher, methods, (uuid, method, ctx) => manager.controlPlane.lost(uuid, method, ctx));
    if (this.stopping.signal.aborted) throw new StartupError('stopping before the RPC server started');
    if (!nova) await this.connect(rpc, attempts);
    await recover(manager.context, journal, methods);
    manager.attachmentDeletes.start();
    await parts.auditor.runLogged();
    await this.step('RPC server', () => rpc.serve());
    if (nova) {
      nova.service.startHeartbeat();
      const report = (): void => void nova.service.reportUsage(novaWiring().usageOf(manager.instances()));
      nova.controlPlane.onUsageChanged = report;
      report();
    }

    const every = auditInterval(config.DEFAULT.update_resources_interval);
    if (every !== undefined) parts.auditor.start(every, host);
    // nova's `_sync_power_states` every sync_power_state_interval (0: 60; negative: never).
    const sync = config.DEFAULT.sync_power_state_interval;
    if (sync >= 0) this.periodic((sync || 60) * 1000, () => manager.power.syncPowerStates({ request_id: `req-${randomUUID()}` }));
    // nova's `_poll_shelved_instances`, at nova's default periodic spacing.
    if (config.DEFAULT.shelved_offload_time > 0) this.periodic(60_000, () => manager.shelving.offloadExpired({ request_id: `req-${randomUUID()}` }));
    // nova's `_reclaim_queued_deletes` runs every 60 s; a shorter interval is checked as often as it is long.
    const reclaim = config.DEFAULT.reclaim_instance_interval;
    if (reclaim > 0) this.periodic(Math.min(reclaim, 60) * 1000, () => manager.softDeletes.reclaimExpired({ request_id: `req-${randomUUID()}` }));
    await this.startOps();
    const summary = `${host}: ${parts.tracker.view.size} providers in Placement, consuming compute.${host}`;
    await this.notifier.ready(summary);
    logger.info({ driver: config.DEFAULT.compute_driver, instances: manager.instances().length }, 'compute-agent up');
  }

  /** Runs `task` every `ms`, one pass at a time (a pass still running skips the tick). */
  private periodic(ms: number, task: () => Promise<unknown>): void {
    let running = false;
    const timer = setInterval(() => {
      if (running) return;
      running = true;
      void task()
        .catch((e: unknown) => this.deps.logger.warn({ reason: e instanceof Error ? e.message : String(e) }, 'a periodic task failed'))
        .finally(() => {
          running = false;
        });
    }, ms);
    timer.unref();
    this.periodics.push(timer);
  }

  private async startOps(): Promise<void> {
    const { config, logger } = this.deps;
    const rpc = this.rpc;
    const auditor = this.parts?.auditor;
    const every = (auditInterval(config.DEFAULT.update_resources_interval) ?? 60) * 1000;
    const auditAge = (): number | undefined => (auditor?.lastSuccess === undefined ? undefined : this.clock.now() - auditor.lastSuccess);
    this.metrics.onCollect(() => {
      const byState: Record<string, number> = {};
      for (const r of this.manager?.instances() ?? []) byState[r.vm_state] = (byState[r.vm_state] ?? 0) + 1;
      this.metrics.setInstances(byState);
      this.metrics.setInFlight(this.manager?.locks.busy().length ?? 0);
      if (this.manager) this.metrics.setOwed({ allocation_removal: this.manager.removals.pending().length, attachment_delete: this.manager.attachmentDeletes.pending().length });
    });
    const checks = {
      broker: () => ({ ok: rpc?.broker.isConnected ?? false, ...(rpc?.broker.isConnected ? {} : { detail: 'not connected to RabbitMQ' }) }),
      audit: () => {
        const age = auditAge();
        const ok = age !== undefined && age < 3 * every;
        return { ok, age_seconds: age === undefined ? null : Math.round(age / 1000), ...(ok ? {} : { detail: auditor?.lastFailure ?? 'no successful audit recently' }) };
      },
      placement: () => ({ ok: auditor?.lastFailure === undefined, ...(auditor?.lastFailure ? { detail: auditor.lastFailure } : {}) }),
    };
    if (config.metrics.listen) {
      this.ops = new OpsServer({ listen: config.metrics.listen, metrics: this.metrics, checks, logger });
      await this.step('metrics endpoint', async () => {
        await this.ops?.start();
      });
    }
    this.watchdog = new WatchdogLoop(
      this.notifier,
      [
        { name: 'broker', failing: () => (rpc?.broker.isConnected ? undefined : 'disconnected') },
        { name: 'audit', failing: () => ((auditAge() ?? Infinity) < 3 * every ? undefined : 'overdue') },
      ],
      logger,
    );
    this.watchdog.start();
  }

  /** Applies a reloaded configuration (SIGHUP): new tunables on the next sync, Placement cache dropped. */
  reload(config: AgentConfig): void {
    this.driver?.reconfigure?.(config);
    this.parts?.tracker.clearCache();
    this.deps.logger.info('configuration reloaded; Placement cache cleared');
  }

  /** Stops taking requests, lets operations finish, closes everything. Safe to call more than once. */
  async stop(reason: string): Promise<void> {
    if (this.stopping.signal.aborted) return;
    this.stopping.abort(new StartupError(`stopping: ${reason}`));
    const { logger, config } = this.deps;
    logger.info({ reason }, 'compute-agent stopping');
    await this.notifier.stopping(`stopping: ${reason}`);
    this.watchdog?.stop();
    for (const timer of this.periodics) clearInterval(timer);
    this.nova?.service.stopHeartbeat();
    const rpc = this.rpc;
    this.rpc = undefined;
    if (rpc) await rpc.stop(config.DEFAULT.graceful_shutdown_timeout * 1000).catch(() => undefined);
    await this.manager?.removals.stop();
    await this.manager?.attachmentDeletes.stop();
    this.parts?.auditor.stop();
    await this.parts?.auditor.settle();
    await this.driver?.cleanupHost(config.DEFAULT.host).catch(() => undefined);
    await this.journal?.close().catch(() => undefined);
    await this.ops?.stop();
    logger.info('compute-agent stopped');
  }

  /** @throws StartupError */
  private async connect(rpc: RpcService, attempts: number): Promise<void> {
    try {
      await rpc.connect();
    } catch (e) {
      const reason = e instanceof Error ? e.message : String(e);
      if (e instanceof BrokerUnreachableError) throw new StartupError(`broker unreachable after ${attempts} attempt(s): ${reason}`, { cause: e });
      throw new StartupError(`RPC could not start: ${reason}`, { cause: e });
    }
  }

  private async step<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw new StartupError(`${what} could not start: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }

  /** Runs `fn` with bounded retries; `retryable` says which failures are worth another try. */
  private async retry<T>(what: string, fn: () => Promise<T>, retryable: (e: unknown) => boolean = () => true): Promise<T> {
    const attempts = Math.max(1, this.deps.startupAttempts ?? 5);
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (e) {
        const reason = e instanceof Error ? e.message : String(e);
        if (!retryable(e)) throw new StartupError(`${what} failed: ${reason}`, { cause: e });
        if (attempt >= attempts || this.stopping.signal.aborted) {
          throw new StartupError(`${what} unreachable after ${attempt} attempt(s): ${reason}`, { cause: e });
        }
        const delay = backoffDelay(attempt, { initialMs: 1000, maxMs: 8000 });
        this.deps.logger.warn({ attempt, retry_in_ms: delay, reason }, `${what} not ready; retrying`);
        await this.clock.sleep(delay, this.stopping.signal);
      }
    }
  }
}

/** Whether an error (or one of its causes) is Placement not answering: worth retrying. */
function unreachable(e: unknown): boolean {
  for (let x: unknown = e; x instanceof Error; x = x.cause) if (x instanceof PlacementUnavailableError) return true;
  return false;
}

/** The manager's Glance writes, when Glance is configured. */
function withImages(config: AgentConfig, clock: Clock): { images?: GlanceImageWrites } {
  const images = glanceWritesFromConfig(config, clock);
  return images ? { images } : {};
}
