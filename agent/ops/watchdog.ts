/**
 * Watchdog keep-alives that mean something: WATCHDOG=1 is sent only while the event loop is
 * responsive, the broker connection is up and the audit is not overdue. If any of those fails for
 * longer than `WatchdogSec`, systemd kills and restarts the agent (`Restart=on-failure`): a wedged
 * daemon is worse than a restarted one. Failing conditions are logged once per change.
 *
 * Event-loop health is measured by the drift of this loop's own timer: a probe that blocks the
 * loop delays the tick, and a tick later than `maxLagMs` withholds the keep-alive.
 */
import type { Logger } from '../../lib/logging/logger';
import type { ServiceNotifier } from './notify';

export interface WatchdogCondition {
  readonly name: string;
  /** undefined when healthy, else the reason. */
  readonly failing: () => string | undefined;
}

export class WatchdogLoop {
  private timer: NodeJS.Timeout | undefined;
  private expected = 0;
  private lastReason: string | undefined;

  constructor(
    private readonly notifier: ServiceNotifier,
    private readonly conditions: readonly WatchdogCondition[],
    private readonly logger: Logger,
    private readonly maxLagMs = 2000,
  ) {}

  /** Starts pinging at the notifier's interval; does nothing without a watchdog. */
  start(): void {
    const every = this.notifier.watchdogIntervalMs;
    if (every === undefined || this.timer) return;
    this.expected = Date.now() + every;
    this.timer = setInterval(() => this.tick(every), every);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One keep-alive decision (exposed for tests). */
  tick(every: number): void {
    const now = Date.now();
    const lag = this.expected === 0 ? 0 : now - this.expected;
    this.expected = now + every;
    const reasons: string[] = [];
    if (lag > this.maxLagMs) reasons.push(`event loop stalled ${lag} ms`);
    for (const c of this.conditions) {
      const why = c.failing();
      if (why) reasons.push(`${c.name}: ${why}`);
    }
    const reason = reasons.join('; ') || undefined;
    if (reason !== this.lastReason) {
      if (reason) this.logger.warn({ reason }, 'withholding watchdog keep-alive');
      else this.logger.info('watchdog keep-alives resumed');
      this.lastReason = reason;
    }
    if (!reason) void this.notifier.watchdog();
  }
}
