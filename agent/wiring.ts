/**
 * Building the agent's parts from the configuration: the virt driver (through the registry, with
 * the real host ports), the resource tracker and its auditor. Shared by the daemon and the one-shot
 * commands (`discover`, `sync --once`, `plan`), so every entry point builds them the same way.
 */
import type { AgentConfig } from '../config/schema';
import type { PlacementApi } from '../tracker/placement/api';
import { glanceAuthFromConfig } from '../tracker/placement/factory';
import { Auditor, type AuditDeps } from '../tracker/audit';
import { loadOrCreateComputeId } from '../tracker/identity';
import { initialRatiosFrom, ResourceTracker } from '../tracker/tracker';
import type { VirtDriver } from '../virt-drivers/driver';
import { StaticGlanceAuth, type GlanceAuth, type GlanceImageWrites } from '../virt-drivers/glance/api';
import { GlanceHttpClient } from '../virt-drivers/glance/http';
import { ProcessExec, type Exec } from '../virt-drivers/host/exec';
import { RootedHostFs, type HostFs } from '../virt-drivers/host/host-fs';
import { builtinDrivers, type DriverRegistry } from '../virt-drivers/registry';
import { DriverNotChosenError, UnknownDriverError } from '../virt-drivers/errors';
import type { Logger } from '../lib/logging/logger';
import { systemClock, type Clock } from '../lib/clock';

export interface DriverDeps {
  readonly config: AgentConfig;
  readonly logger: Logger;
  readonly clock?: Clock;
  readonly exec?: Exec;
  readonly fs?: HostFs;
  readonly registry?: DriverRegistry;
}

/**
 * Why the configuration names no usable driver (`[DEFAULT] compute_driver` unset or unknown), as
 * the one line to show; undefined when it names a registered driver. Checked before anything
 * else starts, so `run` without a driver fails at once instead of after reaching Placement.
 */
export function driverChoiceProblem(config: AgentConfig, registry: DriverRegistry = builtinDrivers()): string | undefined {
  const name = config.DEFAULT.compute_driver;
  if (name === undefined) return new DriverNotChosenError(registry.names()).message;
  if (!registry.names().includes(name)) return new UnknownDriverError(name, registry.names()).message;
  return undefined;
}

/** A new, uninitialised driver named by `[DEFAULT] compute_driver`. @throws DriverNotChosenError, UnknownDriverError */
export function createDriver(d: DriverDeps): VirtDriver {
  return (d.registry ?? builtinDrivers()).create(d.config.DEFAULT.compute_driver, {
    config: d.config,
    logger: d.logger,
    clock: d.clock ?? systemClock,
    exec: d.exec ?? new ProcessExec(),
    fs: d.fs ?? new RootedHostFs('/'),
    ...withGlanceAuth(d.config),
  });
}

/**
 * Glance's image writes for the compute manager (snapshots, backups), with the agent's own
 * credentials as the driver's image cache reads Glance: keystone's catalog, or `[glance]
 * endpoint_override` without a token. Undefined when neither is configured.
 */
export function glanceWritesFromConfig(config: AgentConfig, clock: Clock = systemClock): GlanceImageWrites | undefined {
  const override = config.glance.endpoint_override;
  const auth = glanceAuthFromConfig(config) ?? (override ? new StaticGlanceAuth(override) : undefined);
  return auth ? new GlanceHttpClient({ auth, numRetries: config.glance.num_retries, timeoutMs: config.glance.timeout * 1000, clock }) : undefined;
}

/** The agent's keystone auth for Glance, when it has keystone auth (see glanceAuthFromConfig). */
function withGlanceAuth(config: AgentConfig): { glanceAuth?: GlanceAuth } {
  const auth = glanceAuthFromConfig(config);
  return auth ? { glanceAuth: auth } : {};
}

export interface TrackerParts {
  readonly rootUuid: string;
  readonly tracker: ResourceTracker;
  readonly auditor: Auditor;
}

/**
 * The tracker (root uuid from `state_path/compute_id`, ownership record in `state_path`) and the
 * auditor over an initialised driver.
 * @throws ComputeIdError
 */
export async function createTracker(
  config: AgentConfig,
  api: PlacementApi,
  driver: VirtDriver,
  logger: Logger,
  opts: { inFlight?: () => ReadonlySet<string>; persistOwnership?: boolean; onAudit?: AuditDeps['onAudit']; preferredRootUuid?: string } = {},
): Promise<TrackerParts> {
  const rootUuid = await loadOrCreateComputeId(config.DEFAULT.state_path, opts.preferredRootUuid);
  const tracker = new ResourceTracker({
    api,
    driver,
    nodename: config.DEFAULT.host,
    rootUuid,
    ...(opts.persistOwnership === false ? {} : { statePath: config.DEFAULT.state_path }),
    initialRatios: initialRatiosFrom(config.DEFAULT),
    associationRefreshSeconds: config.compute.resource_provider_association_refresh,
    retryDeadlineSeconds: config.placement.retry_deadline,
    logger,
  });
  await tracker.init();
  const auditor = new Auditor({
    tracker,
    api,
    logger,
    heal: config.compute.heal_allocations,
    healGraceMs: config.compute.heal_allocations_grace * 1000,
    instances: { listInstances: async () => (await driver.listInstances()).map((i) => ({ uuid: i.uuid })) },
    ...(opts.inFlight ? { inFlight: opts.inFlight } : {}),
    ...(opts.onAudit ? { onAudit: opts.onAudit } : {}),
  });
  return { rootUuid, tracker, auditor };
}
