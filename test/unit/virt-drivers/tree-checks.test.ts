import { ProviderTree } from '../../../model/provider-tree';
import { checkMoves, checkProviderTree } from '../../../virt-drivers/tree-checks';

const R = '10000000-0000-4000-8000-000000000001';
const A = '20000000-0000-4000-8000-000000000002';
const B = '30000000-0000-4000-8000-000000000003';

function tree(): ProviderTree {
  const t = new ProviderTree();
  t.newRoot('node', R);
  t.updateInventory(R, { VCPU: { total: 8 } });
  t.updateTraits(R, ['COMPUTE_NODE']);
  return t;
}

describe('checkProviderTree', () => {
  test('a good tree has no problems', () => {
    const t = tree();
    t.newChild('node_pci_0000_3b_00_0', R, A);
    t.updateInventory(A, { PGPU: { total: 1 } });
    expect(checkProviderTree(t.snapshot(), 'node')).toEqual([]);
  });

  test('names every problem: total 0, bad names, reserved > total, a second root, a bad uuid', () => {
    const t = tree();
    t.updateInventory(R, { VCPU: { total: 0 }, GPU: { total: 2, reserved: 3 }, CUSTOM_X: { total: 2, min_unit: 3, max_unit: 2 } });
    t.updateTraits(R, ['CUSTOM_ok', 'HW_NOT_A_TRAIT']);
    t.newRoot('stray', 'NOT-A-UUID');
    expect(checkProviderTree(t.snapshot(), 'node')).toEqual([
      'provider node VCPU: total must be an integer >= 1 (omit the class instead), got 0',
      'provider node: GPU is neither a standard resource class nor CUSTOM_[A-Z0-9_]+',
      'provider node GPU: reserved 3 not in 0..total',
      'provider node CUSTOM_X: min_unit 3, max_unit 2, step_size 1 are not 1 <= min_unit <= max_unit, step_size >= 1',
      'provider node: trait CUSTOM_ok is neither standard nor CUSTOM_[A-Z0-9_]+',
      'provider node: trait HW_NOT_A_TRAIT is neither standard nor CUSTOM_[A-Z0-9_]+',
      'provider stray: uuid NOT-A-UUID is not a lower-case uuid',
      'expected exactly one root (node) besides sharing providers, got node, stray',
    ]);
  });

  test('children listed before their parent are caught', () => {
    const t = tree();
    t.newChild('c', R, A);
    const [root, child] = t.snapshot();
    expect(checkProviderTree([child!, root!], 'node')).toContain('provider c: listed before its parent');
  });
});

describe('checkMoves', () => {
  function split(): { before: ProviderTree; after: ProviderTree } {
    const before = tree();
    before.newChild('node:ens1', R, A);
    before.updateInventory(A, { SRIOV_NET_VF: { total: 16 } });
    const after = before.clone();
    after.rename(A, 'node:ens1f0');
    after.updateInventory(A, { SRIOV_NET_VF: { total: 8 } });
    after.newChild('node:ens1f1', R, B);
    after.updateInventory(B, { SRIOV_NET_VF: { total: 8 } });
    return { before, after };
  }

  test('balanced moves that carry the overflow pass', () => {
    const { before, after } = split();
    const allocations = { c1: { [A]: { SRIOV_NET_VF: 6 } }, c2: { [A]: { SRIOV_NET_VF: 5 } } };
    const moves = [{ from: A, to: B, resources: { SRIOV_NET_VF: 8 }, consumers: { c2: { SRIOV_NET_VF: 5 } } }];
    expect(checkMoves(before.snapshot(), after.snapshot(), moves, allocations)).toEqual([]);
  });

  test('moving more than changed, more consumers than moved, or leaving an overflow are problems', () => {
    const { before, after } = split();
    const allocations = { c1: { [A]: { SRIOV_NET_VF: 6 } }, c2: { [A]: { SRIOV_NET_VF: 5 } } };
    expect(checkMoves(before.snapshot(), after.snapshot(), [{ from: A, to: B, resources: { SRIOV_NET_VF: 9 } }])).toEqual([
      'SRIOV_NET_VF moved out of 20000000-0000-4000-8000-000000000002: 9, but it lost only 8',
      'SRIOV_NET_VF moved into 30000000-0000-4000-8000-000000000003: 9, but it gained only 8',
    ]);
    expect(checkMoves(before.snapshot(), after.snapshot(), [{ from: A, to: B, resources: { SRIOV_NET_VF: 2 }, consumers: { c2: { SRIOV_NET_VF: 5 } } }], allocations)).toContain(
      `move 0 (${A} -> ${B}): consumers move 5 SRIOV_NET_VF, more than the 2 moved`,
    );
    expect(checkMoves(before.snapshot(), after.snapshot(), [], allocations)).toEqual(['SRIOV_NET_VF on node:ens1f0: 11 allocated after the moves, capacity 8']);
  });

  test('allocations left on a class that is gone are problems; other hosts are not judged', () => {
    const before = tree();
    before.updateInventory(R, { VCPU: { total: 8 }, VGPU: { total: 4 } });
    const after = before.clone();
    after.updateInventory(R, { VCPU: { total: 8 } });
    const allocations = { c: { [R]: { VGPU: 1 }, 'elsewhere-0000': { VCPU: 99 } } };
    expect(checkMoves(before.snapshot(), after.snapshot(), [], allocations)).toEqual([`consumer c is left with 1 VGPU on node, which no longer has VGPU`]);
  });
});
