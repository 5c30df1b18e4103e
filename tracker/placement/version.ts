/**
 * Placement microversions: parsing, comparing, and the minimum this agent needs.
 *
 * The agent pins a microversion per call (1.14 trees, 1.19 aggregates, 1.20 create, 1.26
 * inventories, 1.28+ allocations, 1.30 reshaper) and refuses to start against a Placement whose
 * `max_version` is below the highest of those, because a partial feature set would make it write
 * unsafely (no consumer generations, no atomic reshape).
 */

export interface Microversion {
  readonly major: number;
  readonly minor: number;
}

/** The lowest `max_version` the agent can work with: POST /reshaper. */
export const MIN_PLACEMENT_MICROVERSION: Microversion = { major: 1, minor: 30 };

export function parseMicroversion(text: string): Microversion | undefined {
  const m = /^(\d+)\.(\d+)$/.exec(text.trim());
  return m ? { major: Number(m[1]), minor: Number(m[2]) } : undefined;
}

export function formatMicroversion(v: Microversion): string {
  return `${v.major}.${v.minor}`;
}

/** Negative, zero or positive, like a sort comparator. */
export function compareMicroversion(a: Microversion, b: Microversion): number {
  return a.major !== b.major ? a.major - b.major : a.minor - b.minor;
}

export interface PlacementVersions {
  readonly min: Microversion;
  readonly max: Microversion;
}
