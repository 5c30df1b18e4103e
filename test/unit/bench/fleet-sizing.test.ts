/** Sizing Placement from a fleet run: CPU per request and per claim, cores, and the claim-rate ratio row. */
import { claimRateRows } from '../../../bench/fleet';
import type { FleetOutcome } from '../../../bench/fleet/run';
import { busyCores, coresNeeded, placementCost } from '../../../bench/fleet/sizing';

describe('placementCost', () => {
  test('a steady request costs the steady CPU over its requests; a claim what the claim phase used beyond the agents', () => {
    // 600 steady requests in 3 CPU seconds: 5 ms each. The claim phase: 1000 agent requests (5 s at
    // that price) and 100 claims in 25 CPU seconds: 20 s for the claims, 200 ms each.
    expect(placementCost({ cpuSeconds: 3, agentRequests: 600 }, { cpuSeconds: 25, agentRequests: 1000, claims: 100 })).toEqual({ perAgentRequestMs: 5, perClaimMs: 200 });
  });

  test('nothing to divide by gives NaN, not a number that looks measured', () => {
    const c = placementCost({ cpuSeconds: 1, agentRequests: 0 }, { cpuSeconds: 2, agentRequests: 10, claims: 0 });
    expect(c.perAgentRequestMs).toBeNaN();
    expect(c.perClaimMs).toBeNaN();
  });

  test('agents costing more than the phase used leave the claims at zero, never below', () => {
    expect(placementCost({ cpuSeconds: 10, agentRequests: 100 }, { cpuSeconds: 1, agentRequests: 100, claims: 5 }).perClaimMs).toBe(0);
  });
});

describe('coresNeeded', () => {
  test('1000 hosts at one request a minute at 6 ms, and 10 claims/s at 150 ms, keep 1.6 cores busy', () => {
    expect(coresNeeded({ perAgentRequestMs: 6, perClaimMs: 150 }, 1000, 1, 10)).toBeCloseTo(0.1 + 1.5, 6);
  });
});

describe('busyCores', () => {
  test('CPU seconds over wall seconds; no wall time is NaN', () => {
    expect(busyCores(30, 60)).toBe(0.5);
    expect(busyCores(1, 0)).toBeNaN();
  });
});

describe('claimRateRows', () => {
  const run = (hosts: number, claimed: number, seconds: number, cpu?: { steady: number; claiming: number }): FleetOutcome =>
    ({
      hosts,
      claimer: { claimed },
      claimPhase: { seconds, placementCpu: cpu?.claiming ?? NaN, agents: { requests: 1000 } },
      steady: { placementCpu: cpu?.steady ?? NaN, audits: 1000, agents: { requests: 1000 } },
    }) as unknown as FleetOutcome;

  test('each larger fleet against the first size, with both rates', () => {
    expect(claimRateRows([run(200, 540, 60), run(1000, 360, 60)])).toEqual([
      { scenario: 'fleet, 1000 vs 200 hosts', metric: 'claims/s, ratio (the claimer kept fed as the fleet grows)', value: '0.67 (6 / 9 claims/s)', goal: '>= 0.8' },
    ]);
  });

  test("with Placement's CPU measured, the cores the larger fleet needs at the smaller one's claim rate", () => {
    // Steady: 1000 requests in 6 CPU s, 6 ms each, one per host per minute. Claiming: 30 CPU s less
    // the agents' 6 s over 120 claims, 200 ms each. At 9 claims/s: 1000/60 x 6 ms + 9 x 200 ms.
    const rows = claimRateRows([run(200, 540, 60), run(1000, 120, 60, { steady: 6, claiming: 30 })]);
    expect(rows[1]).toEqual({ scenario: 'fleet, 1000 vs 200 hosts', metric: expect.stringContaining('at 9 claims/s'), value: 1.9 });
  });

  test('one size alone has nothing to compare with', () => {
    expect(claimRateRows([run(200, 540, 60)])).toEqual([]);
  });
});
