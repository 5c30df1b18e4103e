/**
 * The audit's schedule as a node-cron expression. Seconds-level cron cannot express every interval,
 * so the accepted intervals are those that divide a minute, an hour or a day evenly (30, 60, 120,
 * 300, 600, 3600, ...). Each host gets a fixed offset within the interval, derived from its name,
 * so a fleet does not audit in the same second and hit Placement together.
 */
import { createHash } from 'node:crypto';

export const DEFAULT_AUDIT_INTERVAL = 60;

/** The interval cannot be written as a cron step. */
export class ScheduleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScheduleError';
  }
}

/** Stable per-host number in [0, mod). */
export function hostOffset(host: string, mod: number): number {
  return createHash('sha256').update(host).digest().readUInt32BE(0) % mod;
}

/**
 * `[DEFAULT] update_resources_interval` as seconds: 0 is the default 60, negative disables.
 * @returns undefined when disabled
 */
export function auditInterval(configured: number): number | undefined {
  if (configured < 0) return undefined;
  return configured === 0 ? DEFAULT_AUDIT_INTERVAL : configured;
}

/**
 * A six-field cron expression firing every `seconds`, offset for `host`.
 * @throws ScheduleError for an interval cron cannot step evenly
 */
export function cronFor(seconds: number, host: string): string {
  const off = hostOffset(host, Math.min(seconds, 3600));
  if (seconds >= 1 && seconds <= 60 && 60 % seconds === 0) {
    return seconds === 60 ? `${off} * * * * *` : `${off % seconds}-59/${seconds} * * * * *`;
  }
  if (seconds % 60 === 0 && seconds <= 3600 && 3600 % seconds === 0) {
    const minutes = seconds / 60;
    return `${off % 60} ${Math.floor(off / 60) % minutes}-59/${minutes} * * * *`;
  }
  if (seconds % 3600 === 0 && 86400 % seconds === 0) {
    const hours = seconds / 3600;
    return `${off % 60} ${Math.floor(off / 60)} ${hostOffset(host, hours)}-23/${hours} * * *`;
  }
  throw new ScheduleError(
    `update_resources_interval = ${seconds} cannot be scheduled evenly; use a value that divides a minute, an hour or a day (e.g. 30, 60, 120, 300, 600, 3600)`,
  );
}
