// The NIC part of the QEMU command line: taps opened by name with vnet_hdr=off, virtio-net with
// the port's MAC and MTU on fixed ids and slots, q35 root ports only for NIC-aware definitions,
// and -S for a paused start.
import { NIC_SLOTS, nicDevice, nicNetdev, qemuCommandLine } from '../../../../virt-drivers/qemu/cmdline';
import { instancePaths, type NicDefinition, type VmDefinition } from '../../../../virt-drivers/qemu/instance-files';

const DEF: VmDefinition = { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 1, memoryMb: 32, disk: true };
const UUID = '11111111-1111-4111-8111-111111111111';
const paths = instancePaths(`/srv/instances/${UUID}`);
const NIC0: NicDefinition = { port: 'aaaa', mac: 'fa:16:3e:00:00:01', tap: 'tapaaaa', mtu: 1442, slot: 0 };
const NIC3: NicDefinition = { port: 'bbbb', mac: 'fa:16:3e:00:00:02', tap: 'tapbbbb', mtu: null, slot: 3 };

function values(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1] as string] : []));
}

describe('qemu command line: NICs', () => {
  test('a definition without a NIC list (older records) gets exactly the old command line: no root ports, no netdev', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: DEF, paths, sandbox: false });
    expect(values(args, '-netdev')).toEqual([]);
    expect(values(args, '-device').filter((d) => d.startsWith('pcie-root-port'))).toEqual([]);
    expect(args).not.toContain('-S');
  });

  test('q35: one root port per slot, each NIC a tap (no scripts, vnet_hdr=off) and virtio-net on its slot with MAC and host_mtu, no ROM', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, nics: [NIC3, NIC0] }, paths, sandbox: false });
    const ports = values(args, '-device').filter((d) => d.startsWith('pcie-root-port'));
    expect(ports).toHaveLength(NIC_SLOTS);
    expect(ports[0]).toBe('pcie-root-port,id=netport0,bus=pcie.0,chassis=1,addr=0x10');
    expect(ports[7]).toBe('pcie-root-port,id=netport7,bus=pcie.0,chassis=8,addr=0x17');
    expect(values(args, '-netdev')).toEqual([
      'tap,id=hostnet0,ifname=tapaaaa,script=no,downscript=no,vnet_hdr=off',
      'tap,id=hostnet3,ifname=tapbbbb,script=no,downscript=no,vnet_hdr=off',
    ]);
    expect(values(args, '-device').filter((d) => d.startsWith('virtio-net-pci'))).toEqual([
      'virtio-net-pci,netdev=hostnet0,id=net0,mac=fa:16:3e:00:00:01,bus=netport0,host_mtu=1442,romfile=',
      'virtio-net-pci,netdev=hostnet3,id=net3,mac=fa:16:3e:00:00:02,bus=netport3,romfile=',
    ]);
    // Root ports come before the devices that sit on them.
    expect(args.indexOf(ports[0] as string)).toBeLessThan(args.findIndex((a) => a.startsWith('virtio-net-pci')));
  });

  test('a NIC-aware definition without NICs still gets the root ports (for hot plug)', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, nics: [] }, paths, sandbox: false });
    expect(values(args, '-device').filter((d) => d.startsWith('pcie-root-port'))).toHaveLength(NIC_SLOTS);
    expect(values(args, '-netdev')).toEqual([]);
  });

  test('pc machines: NICs at fixed addresses of pci.0, no root ports', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, machine: 'pc-i440fx-7.2', nics: [NIC3] }, paths, sandbox: false });
    expect(values(args, '-device').filter((d) => d.startsWith('pcie-root-port'))).toEqual([]);
    expect(values(args, '-device')).toContain('virtio-net-pci,netdev=hostnet3,id=net3,mac=fa:16:3e:00:00:02,bus=pci.0,addr=0x13,romfile=');
  });

  test('paused start adds -S; the QMP hot-plug arguments match the command line', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, nics: [NIC0] }, paths, sandbox: false, paused: true });
    expect(args).toContain('-S');
    expect(nicNetdev(NIC0)).toEqual({ type: 'tap', id: 'hostnet0', ifname: 'tapaaaa', script: 'no', downscript: 'no', vnet_hdr: false });
    expect(nicDevice('q35', NIC0)).toEqual({ driver: 'virtio-net-pci', netdev: 'hostnet0', id: 'net0', mac: 'fa:16:3e:00:00:01', bus: 'netport0', host_mtu: 1442, romfile: '' });
  });
});
