/** The fleet scenario's arithmetic: capacity rule, counts, rates and the nova estimate. */
import {
  measuredPerHostPerMinute,
  novaEstimate,
  overAllocations,
  percent,
  perHostPerMinute,
  providersWithoutRoom,
  sumCounts,
  traffic,
  type ProviderUsage,
} from '../../../bench/fleet/report';

const inv = (total: number, reserved = 0, allocation_ratio = 1): { total: number; reserved: number; allocation_ratio: number } => ({ total, reserved, allocation_ratio });

const host = (usages: Record<string, number>): ProviderUsage => ({
  uuid: 'r1',
  name: 'h1',
  inventories: { VCPU: inv(16, 0, 4), MEMORY_MB: inv(65536, 512), DISK_GB: inv(1000) },
  usages,
});

describe('overAllocations', () => {
  test('usage up to (total - reserved) x ratio is within capacity', () => {
    expect(overAllocations([host({ VCPU: 64, MEMORY_MB: 65024, DISK_GB: 1000 })])).toEqual([]);
  });

  test('one unit over capacity is reported with the numbers', () => {
    expect(overAllocations([host({ VCPU: 65, MEMORY_MB: 65025, DISK_GB: 0 })])).toEqual([
      { provider: 'r1', name: 'h1', resourceClass: 'VCPU', used: 65, capacity: 64 },
      { provider: 'r1', name: 'h1', resourceClass: 'MEMORY_MB', used: 65025, capacity: 65024 },
    ]);
  });

  test('a fractional ratio is applied as Placement does, without rounding', () => {
    const p: ProviderUsage = { uuid: 'r', name: 'n', inventories: { VCPU: inv(3, 0, 1.5) }, usages: { VCPU: 4.5 } };
    expect(overAllocations([p])).toEqual([]);
    expect(overAllocations([{ ...p, usages: { VCPU: 5 } }])).toHaveLength(1);
  });

  test('usage of a class the provider has no inventory of is over capacity; zero usage is not', () => {
    const p: ProviderUsage = { uuid: 'n1', name: 'nic', inventories: {}, usages: { SRIOV_NET_VF: 1, VGPU: 0 } };
    expect(overAllocations([p])).toEqual([{ provider: 'n1', name: 'nic', resourceClass: 'SRIOV_NET_VF', used: 1, capacity: 0 }]);
  });
});

describe('providersWithoutRoom', () => {
  const flavor = { VCPU: 8, MEMORY_MB: 16384, DISK_GB: 160 };
  test('a host is full when one more flavor does not fit in some class', () => {
    expect(providersWithoutRoom([host({ VCPU: 24, MEMORY_MB: 49152, DISK_GB: 480 })], flavor)).toBe(1);
    expect(providersWithoutRoom([host({ VCPU: 16, MEMORY_MB: 32768, DISK_GB: 320 })], flavor)).toBe(0);
  });
  test('providers without the classes (NICs) are not hosts', () => {
    expect(providersWithoutRoom([{ uuid: 'n', name: 'nic', inventories: { SRIOV_NET_VF: inv(16) }, usages: {} }], flavor)).toBe(0);
  });
});

describe('counts and rates', () => {
  test('sumCounts adds snapshots key by key; traffic splits reads, writes, 409s and failures', () => {
    const sum = sumCounts([
      [
        ['GET /resource_providers 200', 3],
        ['PUT /resource_providers/{uuid}/inventories 409', 1],
      ],
      [
        ['GET /resource_providers 200', 2],
        ['PUT /resource_providers/{uuid}/inventories 200', 4],
        ['GET /resource_providers/{uuid}/allocations error', 1],
      ],
    ]);
    expect(sum.get('GET /resource_providers 200')).toBe(5);
    expect(traffic(sum)).toEqual({ requests: 11, reads: 6, writes: 5, conflicts: 1, errors: 1 });
  });

  test('percent has one decimal and is 0 of nothing', () => {
    expect(percent(1, 3)).toBe(33.3);
    expect(percent(0, 0)).toBe(0);
  });

  test('requests per host per minute: per audit run, at one audit a minute', () => {
    // 200 hosts auditing every 10 s for 30 s: 600 audits, one GET each.
    expect(perHostPerMinute(600, 600)).toBe(1);
    expect(perHostPerMinute(900, 600)).toBe(1.5);
    // The same per-audit traffic at a 30 s interval is twice as much per minute.
    expect(perHostPerMinute(600, 600, 30)).toBe(2);
    expect(perHostPerMinute(10, 0)).toBeNaN();
    // Unscaled: 600 requests from 200 hosts in 30 s.
    expect(measuredPerHostPerMinute(600, 200, 30)).toBe(6);
  });
});

describe('novaEstimate', () => {
  const host = { providers: 3, consumers: 4, steady: 7, refresh: 17 };

  test('four steady passes and one refresh pass per 300 s, per minute', () => {
    // (4 x 7 + 17) / 5 minutes
    expect(novaEstimate(host, 1).perHostPerMinute).toBeCloseTo(9);
  });

  test('scales with hosts, names the measured counts, and says it is an estimate', () => {
    const e = novaEstimate(host, 200);
    expect(e.fleetPerMinute).toBeCloseTo(1800);
    expect(e.derivation).toMatch(/^estimate from nova's report client measured in this run/);
    expect(e.derivation).toContain('3-provider host with 4 instances');
    expect(e.derivation).toContain('4 steady passes x 7 + 1 refresh pass x 17');
  });

  test('a host whose passes send nothing estimates nothing', () => {
    expect(novaEstimate({ providers: 1, consumers: 0, steady: 0, refresh: 0 }, 10).fleetPerMinute).toBe(0);
  });
});
