import { HostFileError, hostFileFacts, parseHostFile } from '../../../../virt-drivers/fake/host-file';

const YAML = `
cpu: {sockets: 2, cores_per_socket: 4, threads_per_core: 2, vendor: GenuineIntel, flags: [avx2, avx2, vmx]}
memory: {total_mb: 65536}
numa:
  - {id: 0, cpus: "0-3,8-11", memory_mb: 32768, hugepages: [{size_kb: 1048576, total: 4}]}
  - {id: 1, cpus: "4-7,12-15", memory_mb: 32768, hugepages: [{size_kb: 1048576, total: 4, free: 2}]}
disk: {total_gb: 500}
gpus:
  - address: "0000:3B:00.0"
    vendor_id: "0x10DE"
    device_id: "2330"
    mig: [{profile: 1g.10gb, count: 7}]
nics:
  - {name: ens1f0, address: "0000:5e:00.0", speed_mbps: 25000, sriov_totalvfs: 64}
`;

describe('host file', () => {
  test('YAML becomes the facts the probes would report', () => {
    const f = hostFileFacts(parseHostFile('/h.yaml', YAML), '/var/lib/nova/instances');
    expect(f.cpu).toMatchObject({ status: 'detected', data: { online: 16, sockets: 2, cores: 8, threadsPerCore: 2, flags: ['avx2', 'vmx'] } });
    expect(f.cpu.status === 'detected' && f.cpu.data.numaNodes[1]?.cpus).toEqual([4, 5, 6, 7, 12, 13, 14, 15]);
    expect(f.memory).toMatchObject({ status: 'detected', data: { totalMb: 65536, hugepages: [{ sizeKb: 1048576, total: 8 }] } });
    expect(f.disk).toMatchObject({ status: 'detected', data: { path: '/var/lib/nova/instances', totalGb: 500 } });
    expect(f.gpu).toMatchObject({ status: 'detected', data: [{ address: '0000:3b:00.0', vendorId: '10de', vendor: 'nvidia', migEnabled: true }] });
    expect(f.nic).toMatchObject({ status: 'detected', data: [{ name: 'ens1f0', role: 'port', sriovTotalVfs: 64 }] });
  });

  test('JSON works too, and a section left out is "not present"', () => {
    const f = hostFileFacts(parseHostFile('/h.json', '{"memory": {"total_mb": 1024}}'), '/i');
    expect(f.memory.status).toBe('detected');
    expect([f.cpu.status, f.disk.status, f.gpu.status, f.nic.status]).toEqual(['absent', 'absent', 'absent', 'absent']);
  });

  test('every bad field is reported with its path and the expected form, all at once', () => {
    const bad = `
cpu: {sockets: two, cores_per_socket: 4, threads_per_core: 1}
gpus:
  - {address: "3b:00.0", vendor_id: 4318, device_id: "2330", adress: x}
nics:
  - {name: eth0, speed_mbps: -5}
numa:
  - {id: 0, cpus: "0-3,x"}
`;
    let err: unknown;
    try {
      parseHostFile('/etc/host.yaml', bad);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HostFileError);
    const problems = (err as HostFileError).problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        'cpu.sockets: expected a socket count (a whole number >= 1)',
        'gpus[0]: unknown field(s) adress',
        'gpus[0].address: expected a PCI address such as "0000:3b:00.0"',
        'gpus[0].vendor_id: expected a 4-digit hex id such as "10de" (quoted)',
        'nics[0].speed_mbps: expected a link speed in Mb/s (a whole number >= 1)',
      ]),
    );
    expect(problems).toHaveLength(5);
    expect((err as Error).message.split('\n')[0]).toMatch(/^\/etc\/host\.yaml: /);
  });

  test('a malformed CPU list is named once the rest is valid', () => {
    expect(() => parseHostFile('/h', 'numa: [{id: 0, cpus: "0-3,x"}]')).toThrow('/h: numa[0].cpus: expected a CPU list such as 0-3,8');
  });

  test('text that is not YAML says so, without a stack trace', () => {
    expect(() => parseHostFile('/h', 'cpu: {sockets: 1\n  cores: [')).toThrow(/^\/h: not valid YAML or JSON: /);
  });

  test('an unknown top-level field is a typo, not ignored', () => {
    expect(() => parseHostFile('/h', 'gpu: []')).toThrow('/h: (top level): unknown field(s) gpu');
  });
});
