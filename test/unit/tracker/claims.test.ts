import cron from 'node-cron';
import { ClaimBook, InsufficientResourcesError, InvalidClaimError } from '../../../tracker/claims';
import { cronFor, auditInterval, ScheduleError } from '../../../tracker/schedule';
import { PlacementView } from '../../../tracker/sync/view';

const RP = '00000000-0000-0000-0000-0000000000aa';

function view(): PlacementView {
  const v = new PlacementView();
  v.applyListing([{ uuid: RP, name: 'h', generation: 5, parent_provider_uuid: null, root_provider_uuid: RP }]);
  v.setRead(RP, 'inventories', 5, {
    VCPU: { total: 8, reserved: 0, min_unit: 1, max_unit: 16, step_size: 1, allocation_ratio: 2 },
    MEMORY_MB: { total: 4096, reserved: 512, min_unit: 1, max_unit: 4096, step_size: 1, allocation_ratio: 1 },
    VGPU: { total: 4, reserved: 0, min_unit: 1, max_unit: 2, step_size: 1, allocation_ratio: 1 },
  });
  v.setRead(RP, 'allocations', 5, { existing: { VCPU: 4, MEMORY_MB: 1024 } });
  return v;
}

describe('ClaimBook', () => {
  test('free capacity counts Placement usage and other in-flight claims', () => {
    const book = new ClaimBook(view());
    expect(book.free(RP, 'VCPU')).toBe(12); // (8-0)*2 - 4
    book.claim('a', { [RP]: { VCPU: 10, MEMORY_MB: 1024 } });
    expect(book.free(RP, 'VCPU')).toBe(2);
    expect(() => book.claim('b', { [RP]: { VCPU: 3 } })).toThrow(InsufficientResourcesError);
    expect(() => book.claim('b', { [RP]: { MEMORY_MB: 1600 } })).toThrow(/not enough MEMORY_MB .* 1600 requested, 1536 free/);
  });

  test('a refreshed view that predates the claim does not make the host look emptier (bug 1341420)', () => {
    const v = view();
    const book = new ClaimBook(v);
    book.claim('a', { [RP]: { VCPU: 10 } });
    // A read whose generation moved but which does not show consumer a yet (it started earlier).
    v.setRead(RP, 'allocations', 6, { existing: { VCPU: 4 } });
    book.reconcile(RP, { existing: { VCPU: 4 } });
    expect(book.free(RP, 'VCPU')).toBe(2);
    expect(book.has('a')).toBe(true);
    // Once a read shows it, it is counted once, from Placement, and the claim is done.
    v.setRead(RP, 'allocations', 7, { existing: { VCPU: 4 }, a: { VCPU: 10 } });
    book.reconcile(RP, { existing: { VCPU: 4 }, a: { VCPU: 10 } });
    expect(book.has('a')).toBe(false);
    expect(book.free(RP, 'VCPU')).toBe(2);
  });

  test('release frees the claim; re-claiming the same consumer replaces it', () => {
    const book = new ClaimBook(view());
    book.claim('a', { [RP]: { VCPU: 10 } });
    book.claim('a', { [RP]: { VCPU: 12 } });
    expect(book.free(RP, 'VCPU')).toBe(0);
    book.release('a');
    expect(book.free(RP, 'VCPU')).toBe(12);
  });

  test('inventory rules and unknown providers are refused clearly', () => {
    const book = new ClaimBook(view());
    expect(() => book.claim('a', { [RP]: { VGPU: 3 } })).toThrow(InvalidClaimError);
    expect(() => book.claim('a', { [RP]: { PCPU: 1 } })).toThrow(/no PCPU inventory/);
    expect(() => book.claim('a', { other: { VCPU: 1 } })).toThrow(/not part of this host's tree/);
  });
});

describe('audit schedule', () => {
  test('0 means 60 s; negative disables', () => {
    expect(auditInterval(0)).toBe(60);
    expect(auditInterval(-1)).toBeUndefined();
    expect(auditInterval(300)).toBe(300);
  });

  test.each([10, 30, 60, 120, 300, 600, 3600, 7200, 86400])('every %i s is a valid cron step, offset per host', (s) => {
    const a = cronFor(s, 'compute-1');
    expect(cron.validate(a)).toBe(true);
    const task = cron.createTask(a, () => undefined);
    const runs = task.getNextRuns(3).map((d) => d.getTime());
    void task.destroy();
    expect((runs[1] ?? 0) - (runs[0] ?? 0)).toBe(s * 1000);
    expect((runs[2] ?? 0) - (runs[1] ?? 0)).toBe(s * 1000);
  });

  test('hosts get different offsets, so a fleet does not audit in the same second', () => {
    const offsets = new Set(Array.from({ length: 50 }, (_, i) => cronFor(60, `compute-${i}`)));
    expect(offsets.size).toBeGreaterThan(30);
  });

  test('an interval cron cannot step evenly is refused with a hint', () => {
    expect(() => cronFor(90, 'h')).toThrow(ScheduleError);
    expect(() => cronFor(90, 'h')).toThrow(/e\.g\. 30, 60, 120/);
  });
});
