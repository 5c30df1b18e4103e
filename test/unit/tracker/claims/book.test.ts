// The in-flight claim book: free capacity counts Placement's usage and claims it does not show yet.
import { ClaimBook } from '../../../../tracker/claims/book';
import { InsufficientResourcesError, InvalidClaimError } from '../../../../tracker/claims/errors';
import { PlacementView } from '../../../../tracker/sync/view';

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
