/**
 * Sizing Placement for a fleet from what one run measured, kept free of I/O so it is unit-tested:
 * Placement's CPU per agent request (from the steady window, where agents' audits are its only
 * traffic) and per claim (the claim phase's CPU less the agents' share at that price), and the
 * cores those prices come to for a fleet at the real audit interval and a wanted claim rate.
 */

export interface PhaseCpu {
  /** CPU seconds Placement used in the phase. */
  readonly cpuSeconds: number;
  /** Requests the agents made in the phase. */
  readonly agentRequests: number;
}

export interface PlacementCost {
  /** Placement CPU per agent request (ms). */
  readonly perAgentRequestMs: number;
  /** Placement CPU per landed claim, its candidates query, write and retries included (ms). */
  readonly perClaimMs: number;
}

/** NaN where the run gave nothing to divide by (no requests, no claims, CPU not measured). */
export function placementCost(steady: PhaseCpu, claiming: PhaseCpu & { readonly claims: number }): PlacementCost {
  const perAgentRequestMs = steady.agentRequests > 0 ? (steady.cpuSeconds * 1000) / steady.agentRequests : NaN;
  const agentsShare = (claiming.agentRequests * perAgentRequestMs) / 1000;
  const perClaimMs = claiming.claims > 0 ? (Math.max(0, claiming.cpuSeconds - agentsShare) * 1000) / claiming.claims : NaN;
  return { perAgentRequestMs, perClaimMs };
}

/**
 * Cores Placement keeps busy serving `hosts` hosts at `requestsPerHostPerMinute` each while
 * `claimsPerSecond` claims land, at the measured prices. A floor: a core runs Placement well
 * below full, so an operator provisions above it.
 */
export function coresNeeded(cost: PlacementCost, hosts: number, requestsPerHostPerMinute: number, claimsPerSecond: number): number {
  return ((hosts * requestsPerHostPerMinute) / 60) * (cost.perAgentRequestMs / 1000) + claimsPerSecond * (cost.perClaimMs / 1000);
}

/** How busy Placement kept the machine: CPU seconds per wall second. */
export function busyCores(cpuSeconds: number, wallSeconds: number): number {
  return wallSeconds > 0 ? cpuSeconds / wallSeconds : NaN;
}
