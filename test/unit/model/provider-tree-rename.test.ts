import { DuplicateProviderError, ProviderNotFoundError, ProviderTree } from '../../../model/provider-tree';

describe('ProviderTree.rename', () => {
  test('keeps uuid, content and place; the old name is free again', () => {
    const t = new ProviderTree();
    const root = t.newRoot('r');
    const c = t.newChild('r:eth0', root);
    t.updateInventory(c, { SRIOV_NET_VF: { total: 8 } });
    expect(t.rename(c, 'r:ens1f0')).toBe(true);
    expect(t.data('r:ens1f0')).toMatchObject({ uuid: c, parent_provider_uuid: root, inventories: { SRIOV_NET_VF: { total: 8 } } });
    expect(t.exists('r:eth0')).toBe(false);
    expect(t.rename(c, 'r:ens1f0')).toBe(false);
    t.newChild('r:eth0', root);
    expect(t.snapshot().map((p) => p.name)).toEqual(['r', 'r:ens1f0', 'r:eth0']);
  });

  test('refuses a name in use and an unknown provider', () => {
    const t = new ProviderTree();
    const root = t.newRoot('r');
    t.newChild('a', root);
    const b = t.newChild('b', root);
    expect(() => t.rename(b, 'a')).toThrow(DuplicateProviderError);
    expect(() => t.rename('nope', 'x')).toThrow(ProviderNotFoundError);
  });
});
