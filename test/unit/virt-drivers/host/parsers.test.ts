import { parseCpuInfo } from '../../../../virt-drivers/host/cpu';
import { meminfoKb } from '../../../../virt-drivers/host/memory';
import {
  migProfilesByGpu,
  parseComputeInstances,
  parseGpuInstances,
  parseGpuQuery,
} from '../../../../virt-drivers/host/nvidia-smi';
import { normalizePciAddress, pciDeviceName, pciSlot } from '../../../../virt-drivers/host/pci';
import { parseCpuList, ProbeDataError } from '../../../../virt-drivers/host/probe';

describe('cpu lists, cpuinfo, meminfo', () => {
  test('kernel CPU lists', () => {
    expect(parseCpuList('x', '0-3,8,10-11\n')).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(parseCpuList('x', '')).toEqual([]);
    expect(() => parseCpuList('/sys/devices/system/cpu/online', '0-3,a')).toThrow(
      '/sys/devices/system/cpu/online: expected a CPU list such as 0-3,8, got "0-3,a"',
    );
    expect(() => parseCpuList('x', '5-2')).toThrow(ProbeDataError);
  });

  test('cpuinfo: the first processor block and the processor count', () => {
    const text = [
      'processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\nflags\t\t: fpu sse svm avx2\n',
      'processor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: something else\nflags\t\t: fpu\n',
    ].join('\n');
    expect(parseCpuInfo(text)).toEqual({ processors: 2, vendor: 'AuthenticAMD', model: 'AMD EPYC 7763 64-Core Processor', flags: ['fpu', 'sse', 'svm', 'avx2'] });
    expect(parseCpuInfo('processor : 0\nFeatures : fp asimd aes\n').flags).toEqual(['fp', 'asimd', 'aes']); // aarch64
  });

  test('meminfo values, host-wide and per node; garbage names the key', () => {
    expect(meminfoKb('/proc/meminfo', 'MemTotal:       24684084 kB\nMemFree: 1 kB\n', 'MemTotal')).toBe(24684084);
    expect(meminfoKb('node0/meminfo', 'Node 0 MemTotal:        6514892 kB\n', 'MemTotal')).toBe(6514892);
    expect(meminfoKb('/proc/meminfo', 'MemFree: 1 kB\n', 'MemTotal')).toBeUndefined();
    expect(() => meminfoKb('/proc/meminfo', 'MemTotal: lots kB\n', 'MemTotal')).toThrow('/proc/meminfo MemTotal: expected a size in kB, got "lots"');
  });
});

describe('PCI addresses', () => {
  test("nvidia-smi's 8-digit domain and sysfs's 4-digit one are the same address", () => {
    expect(normalizePciAddress('x', '00000000:1B:00.0')).toBe('0000:1b:00.0');
    expect(normalizePciAddress('x', '0000:3b:00.1')).toBe('0000:3b:00.1');
    expect(() => normalizePciAddress('nvidia-smi (pci.bus_id)', '1B:00.0')).toThrow('expected a PCI address such as 0000:3b:00.0');
    expect(pciDeviceName('0000:3b:00.1')).toBe('pci_0000_3b_00_1');
    expect(pciSlot('0000:3b:00.1')).toBe('0000:3b:00');
  });
});

describe('nvidia-smi output', () => {
  test('the GPU query CSV, with [N/A] fields', () => {
    const rows = parseGpuQuery(
      '0, 00000000:18:00.0, GPU-aaaa, NVIDIA H100 80GB HBM3, 81559, Enabled, 9.0\n1, 00000000:84:00.0, GPU-bbbb, Tesla M60, 8129, [N/A], 5.2\n',
    );
    expect(rows).toEqual([
      { index: 0, address: '0000:18:00.0', uuid: 'GPU-aaaa', name: 'NVIDIA H100 80GB HBM3', memoryMb: 81559, migEnabled: true, computeCapability: '9.0' },
      { index: 1, address: '0000:84:00.0', uuid: 'GPU-bbbb', name: 'Tesla M60', memoryMb: 8129, migEnabled: false, computeCapability: '5.2' },
    ]);
    expect(parseGpuQuery('\n')).toEqual([]);
  });

  test('garbage in the CSV is a ProbeDataError naming the columns expected', () => {
    expect(() => parseGpuQuery('NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.')).toThrow(
      /expected 7 comma-separated columns \(index, pci\.bus_id, uuid, name, memory\.total, mig\.mode\.current, compute_cap\)/,
    );
    expect(() => parseGpuQuery('0, 00000000:18:00.0, GPU-a, H100, 80 GiB, Enabled, 9.0')).toThrow('(memory.total): expected MiB without units');
    expect(() => parseGpuQuery('0, 00000000:18:00.0, GPU-a, H100, 81559, Maybe, 9.0')).toThrow('expected Enabled, Disabled or [N/A]');
  });

  const lgi = [
    '+----------------------------------------------------+',
    '| GPU instances:                                     |',
    '| GPU   Name          Profile  Instance   Placement  |',
    '|                       ID       ID       Start:Size |',
    '|====================================================|',
    '|   0  MIG 3g.40gb       9        1          4:4     |',
    '+----------------------------------------------------+',
    '|   0  MIG 3g.40gb       9        2          0:4     |',
    '+----------------------------------------------------+',
    '|   1  MIG 1g.10gb+me   20        5          0:1     |',
    '+----------------------------------------------------+',
  ].join('\n');
  const lci = [
    '+--------------------------------------------------------------------+',
    '| Compute instances:                                                 |',
    '| GPU     GPU       Name             Profile   Instance   Placement  |',
    '|       Instance                       ID        ID       Start:Size |',
    '|         ID                                                         |',
    '|====================================================================|',
    '|   0      1       MIG 3g.40gb          2         0          0:3     |',
    '+--------------------------------------------------------------------+',
    '|   1      5       MIG 1g.10gb          0         0          0:1     |',
    '+--------------------------------------------------------------------+',
  ].join('\n');

  test('MIG listings: GPU instances with a compute instance, counted by profile', () => {
    const gis = parseGpuInstances(lgi);
    expect(gis).toEqual([
      { gpu: 0, profile: '3g.40gb', id: 1 },
      { gpu: 0, profile: '3g.40gb', id: 2 },
      { gpu: 1, profile: '1g.10gb+me', id: 5 },
    ]);
    const byGpu = migProfilesByGpu(gis, parseComputeInstances(lci));
    expect(byGpu.get(0)).toEqual([{ profile: '3g.40gb', count: 1 }]); // GI 2 has no compute instance
    expect(byGpu.get(1)).toEqual([{ profile: '1g.10gb+me', count: 1 }]);
  });

  test('"No GPU instances found" is an empty listing, other text is an error', () => {
    expect(parseGpuInstances('No GPU instances found: Not Found\n')).toEqual([]);
    expect(parseComputeInstances('No compute instances found: Not Found\n').size).toBe(0);
    expect(() => parseGpuInstances('Insufficient Permissions\n')).toThrow('expected a table headed "GPU instances:"');
    expect(() => parseGpuInstances('| GPU instances: |\n|   0  garbage row |\n')).toThrow('expected a row');
  });
});
