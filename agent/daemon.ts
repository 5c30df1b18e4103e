/**
 * The agent process: wiring, start-up checks, and an orderly stop.
 *
 * Start-up (this part of the flow in `../shared/architecture.md`): confirm that Placement
 * answers with a usable microversion and that a broker accepts the connection, each with bounded
 * retries, then report "up". Later stages (driver, journal recovery, first audit, RPC consumers)
 * hang off the same `start`/`stop` pair.
 *
 * Not here: argument parsing and exit codes (`cli/`), or anything protocol-specific.
 */
import type { AgentConfig } from '../config/schema';
import type { PlacementClient } from '../tracker/placement/client';
import { formatMicroversion } from '../tracker/placement/version';
import type { Logger } from './logging/logger';
import { connectFirst, type BrokerConnection } from './rpc/connection';
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
  readonly connectBroker?: () => Promise<BrokerConnection>;
  readonly clock?: Clock;
  /** Attempts per dependency at start-up before giving up. */
  readonly startupAttempts?: number;
}

export class Daemon {
  private broker: BrokerConnection | undefined;
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

    const connectBroker = this.deps.connectBroker ?? (() => connectFirst(config.DEFAULT.transport_url, config.oslo_messaging_rabbit));
    this.broker = await this.retry('broker', connectBroker);
    this.broker.model.on('error', (err: Error) => logger.warn({ err: err.message }, 'broker connection error'));
    logger.info({ broker: this.broker.label, vhost: config.DEFAULT.transport_url.virtualHost }, 'broker connected');
    logger.info({ driver: config.DEFAULT.compute_driver }, 'compute-agent up');
  }

  /** Closes connections; safe to call more than once and before `start` finished. */
  async stop(reason: string): Promise<void> {
    if (this.stopping.signal.aborted) return;
    this.stopping.abort(new StartupError(`stopping: ${reason}`));
    this.deps.logger.info({ reason }, 'compute-agent stopping');
    const broker = this.broker;
    this.broker = undefined;
    if (broker) await broker.model.close().catch(() => undefined);
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
