import { DuplicateProviderError, ProviderNotFoundError, ProviderTree } from '../../../model/provider-tree';
import { normalizeCustomName, resolveInventory } from '../../../model/provider-types';

const ROOT = '00000000-0000-0000-0000-000000000001';

function sample(): ProviderTree {
  const t = new ProviderTree();
  t.newRoot('node1', ROOT, 3);
  t.newChild('node1_pci_0000_3b_00_0', 'node1', '00000000-0000-0000-0000-000000000002');
  t.newChild('node1:eth0', ROOT, '00000000-0000-0000-0000-000000000003');
  t.newChild('deep', 'node1_pci_0000_3b_00_0', '00000000-0000-0000-0000-000000000004');
  return t;
}

describe('ProviderTree', () => {
  test('snapshots are parents first and carry root and parent uuids', () => {
    const snap = sample().snapshot();
    expect(snap.map((s) => s.name)).toEqual(['node1', 'node1_pci_0000_3b_00_0', 'deep', 'node1:eth0']);
    expect(snap[2]).toMatchObject({ parent_provider_uuid: '00000000-0000-0000-0000-000000000002', root_provider_uuid: ROOT });
    expect(snap[0]).toMatchObject({ parent_provider_uuid: null, generation: 3 });
  });

  test('snapshots are immutable and independent of later changes', () => {
    const t = sample();
    t.updateInventory('node1', { VCPU: { total: 8 } });
    const before = t.data('node1');
    expect(() => {
      (before.inventories as Record<string, unknown>).VCPU = { total: 1 };
    }).toThrow();
    t.updateInventory('node1', { VCPU: { total: 16 } });
    expect(before.inventories.VCPU?.total).toBe(8);
  });

  test('update methods report change and set the generation only when given', () => {
    const t = sample();
    expect(t.updateInventory(ROOT, { VCPU: { total: 4, allocation_ratio: 2 } })).toBe(true);
    expect(t.updateInventory(ROOT, { VCPU: { total: 4, allocation_ratio: 2 } })).toBe(false);
    expect(t.data(ROOT).generation).toBe(3);
    expect(t.updateInventory(ROOT, { VCPU: { total: 4 } }, 9)).toBe(true);
    expect(t.data(ROOT).generation).toBe(9);
    expect(t.updateTraits(ROOT, ['B', 'A'])).toBe(true);
    expect(t.updateTraits(ROOT, ['A', 'B'])).toBe(false);
    expect(t.data(ROOT).traits).toEqual(['A', 'B']);
    expect(t.addTraits(ROOT, 'C')).toBe(true);
    expect(t.removeTraits(ROOT, 'A')).toBe(true);
    expect(t.data(ROOT).traits).toEqual(['B', 'C']);
    expect(t.updateAggregates(ROOT, ['agg'])).toBe(true);
    expect(t.addAggregates(ROOT, 'agg')).toBe(false);
  });

  test('remove takes the whole subtree', () => {
    const t = sample();
    t.remove('node1_pci_0000_3b_00_0');
    expect(t.exists('deep')).toBe(false);
    expect(t.uuids()).toEqual([ROOT, '00000000-0000-0000-0000-000000000003']);
    expect(() => t.data('deep')).toThrow(ProviderNotFoundError);
  });

  test('duplicate names and uuids are refused', () => {
    const t = sample();
    expect(() => t.newChild('deep', ROOT)).toThrow(DuplicateProviderError);
    expect(() => t.newRoot('other', ROOT)).toThrow(DuplicateProviderError);
    expect(() => t.newChild('x', 'no-such-parent')).toThrow(ProviderNotFoundError);
  });

  test('clone is deep; insert rebuilds a tree from snapshots', () => {
    const t = sample();
    t.updateInventory('deep', { VGPU: { total: 4 } });
    t.updateTraits('deep', ['CUSTOM_X']);
    const c = t.clone();
    c.updateInventory('deep', { VGPU: { total: 8 } });
    expect(t.data('deep').inventories.VGPU?.total).toBe(4);
    expect(c.snapshot().map((s) => s.uuid)).toEqual(t.snapshot().map((s) => s.uuid));
    const r = new ProviderTree();
    for (const s of t.snapshot()) r.insert(s);
    expect(r.snapshot()).toEqual(t.snapshot());
  });

  test('insert renames a provider that Placement knows under a new name', () => {
    const t = sample();
    t.insert({ ...t.data('deep'), name: 'renamed' });
    expect(t.exists('deep')).toBe(false);
    expect(t.uuidOf('renamed')).toBe('00000000-0000-0000-0000-000000000004');
  });
});

describe('inventory helpers', () => {
  test('resolveInventory fills defaults and keeps the current ratio when the driver gives none', () => {
    expect(resolveInventory({ total: 8 })).toEqual({ total: 8, reserved: 0, min_unit: 1, max_unit: 8, step_size: 1, allocation_ratio: 1 });
    expect(resolveInventory({ total: 8 }, { total: 8, reserved: 0, min_unit: 1, max_unit: 8, step_size: 1, allocation_ratio: 3 }, 4).allocation_ratio).toBe(3);
    expect(resolveInventory({ total: 8 }, undefined, 4).allocation_ratio).toBe(4);
    expect(resolveInventory({ total: 8, allocation_ratio: 2 }, undefined, 4).allocation_ratio).toBe(2);
  });

  test('normalizeCustomName', () => {
    expect(normalizeCustomName('nvidia-35')).toBe('CUSTOM_NVIDIA_35');
    expect(normalizeCustomName('CUSTOM_X')).toBe('CUSTOM_X');
    expect(normalizeCustomName('physnet.a b')).toBe('CUSTOM_PHYSNET_A_B');
  });
});
