// Placing a request on this host's tree: root classes from the root, other classes from the first
// child with room and the right traits, numbered groups from one provider, shared disk from a
// sharing provider; refused with InsufficientResourcesError when nothing fits.
import type { Flavor } from '../../../../model/instance';
import type { InventoryRecord, ProviderSnapshot } from '../../../../model/provider-types';
import { InsufficientResourcesError } from '../../../../tracker/claims/errors';
import { placeRequest, type PlacementScope } from '../../../../tracker/claims/place';
import { requestFromFlavor } from '../../../../tracker/claims/request';

const ROOT = 'root';
const inv = (total: number): InventoryRecord => ({ total, reserved: 0, min_unit: 1, max_unit: total, step_size: 1, allocation_ratio: 1 });
const provider = (uuid: string, inventories: Record<string, number>, traits: string[] = [], parent: string | null = ROOT): ProviderSnapshot => ({
  uuid,
  name: uuid,
  parent_provider_uuid: uuid === ROOT ? null : parent,
  root_provider_uuid: uuid === ROOT ? ROOT : (parent ?? uuid),
  generation: 1,
  inventories: Object.fromEntries(Object.entries(inventories).map(([rc, n]) => [rc, inv(n)])),
  traits,
  aggregates: [],
});

/** A host: a root with CPU, memory and disk, two GPUs (a slow one first; b is fast, with vGPU memory). */
function scope(opts: { used?: Record<string, Record<string, number>>; rootDisk?: boolean; sharing?: ProviderSnapshot[] } = {}): PlacementScope {
  const providers = [
    provider(ROOT, { VCPU: 8, MEMORY_MB: 8192, ...(opts.rootDisk === false ? {} : { DISK_GB: 100 }) }, ['HW_CPU_X86_AVX2']),
    provider('gpu-a', { VGPU: 2 }, ['CUSTOM_SLOW']),
    provider('gpu-b', { VGPU: 2, CUSTOM_VGPU_MEM: 4096 }, ['CUSTOM_FAST']),
  ];
  const all = [...providers, ...(opts.sharing ?? [])];
  const free = (rp: string, rc: string): number => (all.find((p) => p.uuid === rp)?.inventories[rc]?.total ?? 0) - (opts.used?.[rp]?.[rc] ?? 0);
  return { providers, sharing: opts.sharing ?? [], claims: { free } };
}

const flavor = (extra_specs: Record<string, string> = {}): Flavor => ({ name: 'f', vcpus: 2, memory_mb: 1024, root_gb: 10, ephemeral_gb: 0, swap: 0, extra_specs });
const place = (f: Flavor, s: PlacementScope = scope()): Record<string, Record<string, number>> => placeRequest(requestFromFlavor(f), s);

describe('placeRequest', () => {
  test('the flavor base goes on the root; a resources: class goes on the first child that has room for it', () => {
    expect(place(flavor({ 'resources:VGPU': '1' }))).toEqual({ [ROOT]: { VCPU: 2, MEMORY_MB: 1024, DISK_GB: 10 }, 'gpu-a': { VGPU: 1 } });
    expect(place(flavor({ 'resources:VGPU': '1' }), scope({ used: { 'gpu-a': { VGPU: 2 } } }))).toEqual({
      [ROOT]: { VCPU: 2, MEMORY_MB: 1024, DISK_GB: 10 },
      'gpu-b': { VGPU: 1 },
    });
  });

  test('resources: overrides and removals change what the root is asked for', () => {
    expect(place(flavor({ 'resources:VCPU': '6', 'resources:DISK_GB': '0' }))).toEqual({ [ROOT]: { VCPU: 6, MEMORY_MB: 1024 } });
    expect(() => place(flavor({ 'resources:VCPU': '9' }))).toThrow(new InsufficientResourcesError(ROOT, 'VCPU', 9, 8));
  });

  test('a forbidden trait steers a class away from the provider that has it', () => {
    expect(place(flavor({ 'resources:VGPU': '1' }))['gpu-a']).toEqual({ VGPU: 1 });
    expect(place(flavor({ 'resources:VGPU': '1', 'trait:CUSTOM_SLOW': 'forbidden' }))).toEqual({
      [ROOT]: { VCPU: 2, MEMORY_MB: 1024, DISK_GB: 10 },
      'gpu-b': { VGPU: 1 },
    });
    // In a numbered group too: the one provider chosen is one without the trait.
    expect(place(flavor({ 'resources1:VGPU': '1', 'trait1:CUSTOM_SLOW': 'forbidden' }))['gpu-b']).toEqual({ VGPU: 1 });
  });

  test('a required trait counts on the provider or on the root; one the root lacks refuses the request', () => {
    // Required traits hold for the whole request, so the root (serving VCPU, MEMORY_MB, DISK_GB)
    // must satisfy them; a root trait then holds for every provider of the tree.
    expect(place(flavor({ 'resources:VGPU': '1', 'trait:HW_CPU_X86_AVX2': 'required' }))).toEqual({
      [ROOT]: { VCPU: 2, MEMORY_MB: 1024, DISK_GB: 10 },
      'gpu-a': { VGPU: 1 },
    });
    expect(() => place(flavor({ 'resources:VGPU': '1', 'trait:CUSTOM_FAST': 'required' }))).toThrow(new InsufficientResourcesError(ROOT, 'VCPU', 2, 8));
    expect(() => place(flavor({ 'trait:CUSTOM_NOWHERE': 'required' }))).toThrow(InsufficientResourcesError);
  });

  test('a forbidden trait on the only provider with room refuses the request, naming the class', () => {
    const gpuAFull = scope({ used: { 'gpu-a': { VGPU: 2 } } });
    expect(place(flavor({ 'resources:VGPU': '1' }), gpuAFull)['gpu-b']).toEqual({ VGPU: 1 });
    expect(() => place(flavor({ 'resources:VGPU': '1', 'trait:CUSTOM_FAST': 'forbidden' }), gpuAFull)).toThrow(new InsufficientResourcesError('gpu-a', 'VGPU', 1, 0));
    expect(() => place(flavor({ 'trait:HW_CPU_X86_AVX2': 'forbidden' }))).toThrow(/not enough VCPU on provider root/);
  });

  test('a numbered group takes all its classes from one provider, even when another has room for part of it', () => {
    const plan = place(flavor({ 'resources1:VGPU': '1', 'resources1:CUSTOM_VGPU_MEM': '1024' }));
    expect(plan['gpu-b']).toEqual({ VGPU: 1, CUSTOM_VGPU_MEM: 1024 });
    expect(plan['gpu-a']).toBeUndefined();
  });

  test('two numbered groups count what the first one planned; a group no single provider can serve is refused', () => {
    const plan = place(flavor({ 'resources1:VGPU': '2', 'resources2:VGPU': '2' }));
    expect(plan['gpu-a']).toEqual({ VGPU: 2 });
    expect(plan['gpu-b']).toEqual({ VGPU: 2 });
    expect(() => place(flavor({ 'resources1:VGPU': '3' }))).toThrow(new InsufficientResourcesError('any provider of this host', 'VGPU', 3, 0));
    expect(() => place(flavor({ 'resources1:VGPU': '1', 'resources1:CUSTOM_VGPU_MEM': '1', 'trait1:CUSTOM_FAST': 'forbidden' }))).toThrow(/any provider of this host/);
  });

  test('DISK_GB comes from a sharing provider when the root has none', () => {
    const shared = provider('nfs', { DISK_GB: 1000 }, ['MISC_SHARES_VIA_AGGREGATE'], null);
    expect(place(flavor(), scope({ rootDisk: false, sharing: [shared] }))).toEqual({ [ROOT]: { VCPU: 2, MEMORY_MB: 1024 }, nfs: { DISK_GB: 10 } });
    expect(() => place(flavor(), scope({ rootDisk: false }))).toThrow(/not enough DISK_GB on provider root/);
  });

  test('an empty tree is refused', () => {
    expect(() => placeRequest(requestFromFlavor(flavor()), { providers: [], sharing: [], claims: { free: () => 0 } })).toThrow(InsufficientResourcesError);
  });
});
