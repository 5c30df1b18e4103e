// A flavor's resource request: the base classes, and the `resources:`, `resourcesN:` and `trait:`
// extra specs that refine it; malformed values are refused with the key and the expected form.
import type { Flavor } from '../../../../model/instance';
import { InvalidExtraSpecError } from '../../../../tracker/claims/errors';
import { requestFromFlavor, sumAllocations, totalsOf } from '../../../../tracker/claims/request';

const flavor = (extra_specs: Record<string, string> = {}): Flavor => ({ name: 'm1.test', vcpus: 2, memory_mb: 2048, root_gb: 10, ephemeral_gb: 5, swap: 1536, extra_specs });

describe('requestFromFlavor', () => {
  test('VCPU, MEMORY_MB and DISK_GB (root + ephemeral + swap rounded up to GiB) in one unnumbered group', () => {
    expect(requestFromFlavor(flavor())).toEqual({
      groups: [{ resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 17 }, sameProvider: false }],
      required: [],
      forbidden: [],
    });
  });

  test('resources:<RC>=N overrides a class, adds one, and N = 0 removes one', () => {
    const req = requestFromFlavor(flavor({ 'resources:VCPU': '4', 'resources:VGPU': '1', 'resources:DISK_GB': '0' }));
    expect(req.groups).toEqual([{ resources: { VCPU: 4, MEMORY_MB: 2048, VGPU: 1 }, sameProvider: false }]);
  });

  test('resourcesN:<RC>=N forms one same-provider group per suffix; an all-zero group is dropped', () => {
    const req = requestFromFlavor(
      flavor({ 'resources1:VGPU': '1', 'resources1:CUSTOM_VGPU_MEM': '2048', 'resources_net:SRIOV_NET_VF': '2', 'resources2:VGPU': '0' }),
    );
    expect(req.groups).toEqual([
      { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 17 }, sameProvider: false },
      { resources: { VGPU: 1, CUSTOM_VGPU_MEM: 2048 }, sameProvider: true },
      { resources: { SRIOV_NET_VF: 2 }, sameProvider: true },
    ]);
    expect(totalsOf(req)).toEqual({ VCPU: 2, MEMORY_MB: 2048, DISK_GB: 17, VGPU: 1, CUSTOM_VGPU_MEM: 2048, SRIOV_NET_VF: 2 });
  });

  test('trait:<NAME>=required|forbidden (numbered too) constrain the request; other extra specs are ignored', () => {
    const req = requestFromFlavor(flavor({ 'trait:HW_CPU_X86_AVX2': 'required', 'trait1:CUSTOM_SLOW': 'forbidden', 'hw:cpu_policy': 'dedicated' }));
    expect(req.required).toEqual(['HW_CPU_X86_AVX2']);
    expect(req.forbidden).toEqual(['CUSTOM_SLOW']);
    expect(req.groups).toHaveLength(1);
  });

  test.each([
    ['resources:VGPU', 'two', 'an integer >= 0'],
    ['resources:VGPU', '-1', 'an integer >= 0'],
    ['resources1:VGPU', '1.5', 'an integer >= 0'],
    ['trait:CUSTOM_FAST', 'preferred', 'required or forbidden'],
  ])('%s = %s is refused, naming flavor.extra_specs.<key> and the expected form', (key, value, expected) => {
    const f = flavor({ [key]: value });
    expect(() => requestFromFlavor(f)).toThrow(InvalidExtraSpecError);
    expect(() => requestFromFlavor(f)).toThrow(`flavor.extra_specs.${key} = "${value}": expected ${expected}`);
  });
});

test('sumAllocations adds each class over providers', () => {
  expect(sumAllocations({ a: { VCPU: 2, DISK_GB: 10 }, b: { DISK_GB: 5, VGPU: 1 } })).toEqual({ VCPU: 2, DISK_GB: 15, VGPU: 1 });
});
