import traitsData from '../../../virt-drivers/data/os-traits.json';
import {
  cpuFlagTraits,
  isValidResourceClass,
  isValidTrait,
  OS_TRAITS_SOURCE,
  standardOrCustomTrait,
  STANDARD_RESOURCE_CLASSES,
  STANDARD_TRAITS,
} from '../../../virt-drivers/traits';

describe('generated os-traits / os-resource-classes data', () => {
  test("comes from Debian's packages and holds the names Placement knows", () => {
    expect(OS_TRAITS_SOURCE).toMatch(/^Debian python3-os-traits /);
    expect(STANDARD_TRAITS.has('COMPUTE_NODE')).toBe(true);
    expect(STANDARD_TRAITS.has('HW_NIC_SRIOV')).toBe(true);
    expect([...STANDARD_RESOURCE_CLASSES].slice(0, 3)).toEqual(['VCPU', 'MEMORY_MB', 'DISK_GB']);
    for (const rc of ['PGPU', 'VGPU', 'SRIOV_NET_VF', 'NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC']) {
      expect(STANDARD_RESOURCE_CLASSES.has(rc)).toBe(true);
    }
  });

  test('every cpu-flag row names a standard HW_CPU_X86 trait; every such trait is mapped or explained', () => {
    const mapped = new Set(traitsData.x86_cpu_flags.map((r) => r.trait));
    for (const t of mapped) expect(STANDARD_TRAITS.has(t)).toBe(true);
    const explained = new Set(traitsData.x86_unmapped.map((r) => r.trait));
    for (const t of [...STANDARD_TRAITS].filter((x) => x.startsWith('HW_CPU_X86_'))) {
      expect(mapped.has(t) || explained.has(t)).toBe(true);
    }
  });
});

describe('cpu flags to traits', () => {
  test("kernel flag names map to os-traits' names", () => {
    expect(cpuFlagTraits(['pni', 'sse4_1', 'sse4_2', 'pclmulqdq', 'sha_ni', 'avx512_vnni', 'aes', 'bmi1', 'fma', 'lm'], 'GenuineIntel')).toEqual([
      'HW_CPU_X86_AESNI',
      'HW_CPU_X86_AVX512VNNI',
      'HW_CPU_X86_BMI',
      'HW_CPU_X86_CLMUL',
      'HW_CPU_X86_FMA3',
      'HW_CPU_X86_SHA',
      'HW_CPU_X86_SSE3',
      'HW_CPU_X86_SSE41',
      'HW_CPU_X86_SSE42',
    ]);
  });

  test('vendor-qualified traits follow vendor_id', () => {
    expect(cpuFlagTraits(['ssbd', 'svm'], 'AuthenticAMD')).toEqual(['HW_CPU_X86_AMD_SSBD', 'HW_CPU_X86_AMD_SVM', 'HW_CPU_X86_SVM']);
    expect(cpuFlagTraits(['ssbd', 'vmx'], 'GenuineIntel')).toEqual(['HW_CPU_X86_INTEL_SSBD', 'HW_CPU_X86_INTEL_VMX', 'HW_CPU_X86_VMX']);
    expect(cpuFlagTraits(['ssbd'])).toEqual([]);
  });
});

describe('names', () => {
  test('standard or CUSTOM_[A-Z0-9_]+', () => {
    expect(isValidTrait('HW_GPU_API_VULKAN')).toBe(true);
    expect(isValidTrait('CUSTOM_PHYSNET_PHYSNET1')).toBe(true);
    expect(isValidTrait('HW_GPU_CUDA_COMPUTE_CAPABILITY_V9_0')).toBe(false);
    expect(isValidTrait('CUSTOM_lower')).toBe(false);
    expect(isValidResourceClass('CUSTOM_MIG_1G_10GB')).toBe(true);
    expect(isValidResourceClass('GPU')).toBe(false);
  });

  test('a standard trait when os-traits has it, else the custom form', () => {
    expect(standardOrCustomTrait('HW_GPU_CUDA_COMPUTE_CAPABILITY_V7_0')).toBe('HW_GPU_CUDA_COMPUTE_CAPABILITY_V7_0');
    expect(standardOrCustomTrait('HW_GPU_CUDA_COMPUTE_CAPABILITY_V9_0')).toBe('CUSTOM_HW_GPU_CUDA_COMPUTE_CAPABILITY_V9_0');
  });
});
