/**
 * The agent process: wiring, start-up checks, and an orderly stop.
 *
 * Start-up (this part of the flow in `../shared/architecture.md`): confirm that Placement
 * answers with a usable microversion, then start the RPC service (connect to a broker of
 * transport_url, declare the compute topology, consume), each with bounded retries, then report
 * "up". Stop lets RPC requests in progress finish within graceful_shutdown_timeout. Later stages
 * (driver, journal recovery, first audit) hang off the same `start`/`stop` pair.
 *
 * Not here: argument parsing and exit codes (`cli/`), or anything protocol-specific.
 */
import type { AgentConfig } from '../config/schema';
import type { PlacementClient } from '../tracker/placement/client';
import { formatMicroversion } from '../tracker/placement/version';
import type { Logger } from './logging/logger';
import { BrokerUnreachableError } from './rpc/broker';
import { RpcService } from './rpc/service';
import { backoffDelay } from './util/backoff';
import { systemClock, type Clock } from './util/clock';

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
  /** Builds the RPC side (broker, server, client); defaults to one from `config`. */
  readonly createRpc?: (connectAttempts: number) => RpcService;
  readonly clock?: Clock;
  /** Attempts per dependency at start-up before giving up. */
  readonly startupAttempts?: number;
}

export class Daemon {
  private rpc: RpcService | undefined;
  private readonly clock: Clock;
  private readonly stopping = new AbortController();

  constructor(private readonly deps: DaemonDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** @throws StartupError when Placement or the broker stays unreachable. */
  async start(): Promise<void> {
    const { config, logger, placement } = this.deps;
    const endpoint = await this.retry('placement', async () => {
      const v = await placement.assertUsable();
      return { endpoint: await placement.http.endpoint(), max: formatMicroversion(v.max) };
    });
    logger.info({ endpoint: endpoint.endpoint, max_version: endpoint.max }, 'placement reachable');

    const attempts = Math.max(1, this.deps.startupAttempts ?? 5);
    const rpc = this.deps.createRpc?.(attempts) ?? new RpcService({ config, logger, connectAttempts: attempts });
    this.rpc = rpc;
    if (this.stopping.signal.aborted) throw new StartupError('stopping before the RPC server started');
    try {
      await rpc.start();
    } catch (e) {
      const reason = e instanceof Error ? e.message : String(e);
      if (e instanceof BrokerUnreachableError) throw new StartupError(`broker unreachable after ${attempts} attempt(s): ${reason}`, { cause: e });
      throw new StartupError(`RPC server could not start: ${reason}`, { cause: e });
    }
    logger.info({ driver: config.DEFAULT.compute_driver }, 'compute-agent up');
  }

  /** Closes connections; safe to call more than once and before `start` finished. */
  async stop(reason: string): Promise<void> {
    if (this.stopping.signal.aborted) return;
    this.stopping.abort(new StartupError(`stopping: ${reason}`));
    this.deps.logger.info({ reason }, 'compute-agent stopping');
    const rpc = this.rpc;
    this.rpc = undefined;
    if (rpc) await rpc.stop(this.deps.config.DEFAULT.graceful_shutdown_timeout * 1000).catch(() => undefined);
    this.deps.logger.info('compute-agent stopped');
  }

  private async retry<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const attempts = Math.max(1, this.deps.startupAttempts ?? 5);
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (e) {
        const reason = e instanceof Error ? e.message : String(e);
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
