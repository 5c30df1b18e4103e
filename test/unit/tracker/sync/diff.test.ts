import { mergeOwned, resolveInventories, sameFullInventories } from '../../../../tracker/sync/diff';
import { PlacementView } from '../../../../tracker/sync/view';

describe('mergeOwned: the agent removes only what it added', () => {
  test.each([
    ['adds what it wants', [], [], ['A'], ['A']],
    ['keeps what others added', ['X'], [], ['A'], ['A', 'X']],
    ['removes what it owned and no longer wants', ['A', 'B', 'X'], ['A', 'B'], ['A'], ['A', 'X']],
    ['never removes what it did not own', ['A', 'X'], ['A'], [], ['X']],
  ])('%s', (_n, current, owned, desired, expected) => {
    expect(mergeOwned(current, owned, desired)).toEqual(expected);
  });
});

describe('resolveInventories', () => {
  test('an absent ratio keeps Placement\'s, or takes the initial one for a new class', () => {
    const current = { VCPU: { total: 8, reserved: 0, min_unit: 1, max_unit: 8, step_size: 1, allocation_ratio: 6 } };
    const out = resolveInventories({ VCPU: { total: 16 }, MEMORY_MB: { total: 100 } }, current, { VCPU: 4, MEMORY_MB: 1.5 });
    expect(out.VCPU).toEqual({ total: 16, reserved: 0, min_unit: 1, max_unit: 16, step_size: 1, allocation_ratio: 6 });
    expect(out.MEMORY_MB?.allocation_ratio).toBe(1.5);
    expect(sameFullInventories(out, { ...out })).toBe(true);
    expect(sameFullInventories(out, current)).toBe(false);
  });
});

describe('PlacementView generations', () => {
  const U = 'u1';
  const listing = (generation: number) => [{ uuid: U, name: 'n', generation, parent_provider_uuid: null, root_provider_uuid: U }];

  test('an aspect read at the current generation is fresh; a moved generation makes it stale but known', () => {
    const v = new PlacementView();
    v.applyListing(listing(1));
    v.setRead(U, 'traits', 1, ['A']);
    expect(v.fresh(U, 'traits')).toEqual(['A']);
    expect(v.applyListing(listing(2)).bumped).toEqual([U]);
    expect(v.fresh(U, 'traits')).toBeUndefined();
    expect(v.known(U, 'traits')).toEqual(['A']);
  });

  test('our own write keeps other aspects that were fresh at the same generation fresh', () => {
    const v = new PlacementView();
    v.applyListing(listing(3));
    v.setRead(U, 'traits', 3, ['A']);
    v.setRead(U, 'aggregates', 3, []);
    v.setWritten(U, 'inventories', 3, 4, {});
    expect(v.get(U)?.generation).toBe(4);
    expect(v.fresh(U, 'traits')).toEqual(['A']);
    expect(v.fresh(U, 'inventories')).toEqual({});
  });

  test('providers gone from the listing leave the view', () => {
    const v = new PlacementView();
    v.applyListing(listing(1));
    expect(v.applyListing([]).removed).toEqual([U]);
    expect(v.has(U)).toBe(false);
  });
});
