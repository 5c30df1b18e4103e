import { chardevTcpPort } from '../../../../virt-drivers/qemu/consoles';
import { qemuCommandLine, VNC_LAST_DISPLAY } from '../../../../virt-drivers/qemu/cmdline';
import { instancePaths, vmDefinitionSchema, type VmDefinition } from '../../../../virt-drivers/qemu/instance-files';
import type { ConsoleOptions } from '../../../../virt-drivers/qemu/options';

const UUID = '11111111-1111-4111-8111-111111111111';
const DEF: VmDefinition = { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 1, memoryMb: 64, disk: true };
const paths = instancePaths(`/var/lib/compute-agent/instances/${UUID}`);
const BOTH: ConsoleOptions = { vnc: { listen: '172.31.253.2', proxyclientAddress: '172.31.253.2' }, serial: { address: '172.31.253.2', ports: { min: 10000, max: 10099 } } };

function values(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1] as string] : []));
}

describe('qemu command line: consoles', () => {
  test('a guest with a display gets virtio-vga at a fixed slot and a VNC server on the first free display at server_listen', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, video: 'virtio' }, paths, sandbox: false, consoles: BOTH });
    expect(values(args, '-device')).toContain('virtio-vga,id=video0,bus=pcie.0,addr=0x2');
    expect(values(args, '-vnc')).toEqual([`172.31.253.2:0,to=${VNC_LAST_DISPLAY}`]);
    // pc machines: the same slot of pci.0
    const pc = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, machine: 'pc', video: 'virtio' }, paths, sandbox: false, consoles: BOTH });
    expect(values(pc, '-device')).toContain('virtio-vga,id=video0,bus=pci.0,addr=0x2');
  });

  test('an IPv6 listen address is bracketed for -vnc', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, video: 'virtio' }, paths, sandbox: false, consoles: { vnc: { listen: '::1', proxyclientAddress: '::1' }, serial: null } });
    expect(values(args, '-vnc')).toEqual([`[::1]:0,to=${VNC_LAST_DISPLAY}`]);
  });

  test('no display in the definition: neither a video device nor a VNC server, whatever the host serves', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: DEF, paths, sandbox: false, consoles: BOTH });
    expect(args.join(' ')).not.toMatch(/virtio-vga|-vnc/);
  });

  test('a display on a host with [vnc] off: the device (part of the guest) stays, no VNC server', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, video: 'virtio' }, paths, sandbox: false, consoles: { vnc: null, serial: null } });
    expect(values(args, '-device')).toContain('virtio-vga,id=video0,bus=pcie.0,addr=0x2');
    expect(values(args, '-vnc')).toEqual([]);
  });

  test('[serial_console] on: the serial port is a TCP server on the first free port of the range, still logged to the console file', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: DEF, paths, sandbox: false, consoles: BOTH });
    expect(values(args, '-chardev')).toContain(`socket,id=charserial0,host=172.31.253.2,port=10000,to=10099,server=on,wait=off,logfile=${paths.console},logappend=on`);
    expect(values(args, '-device')).toContain('isa-serial,chardev=charserial0,id=serial0');
  });

  test('[serial_console] off: the serial port logs to the console file only', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: DEF, paths, sandbox: false, consoles: { vnc: null, serial: null } });
    expect(values(args, '-chardev')).toContain(`file,id=charserial0,path=${paths.console},append=on`);
  });

  test('the definition schema takes a display and nothing else under video', () => {
    expect(vmDefinitionSchema.safeParse({ ...DEF, video: 'virtio' }).success).toBe(true);
    expect(vmDefinitionSchema.safeParse({ ...DEF, video: 'cirrus' }).success).toBe(false);
  });
});

describe('chardevTcpPort: the port of query-chardev filename', () => {
  test.each([
    ['disconnected:tcp:127.0.0.1:10000,server=on', 10000],
    ['tcp:172.31.253.2:10003,server=on <-> 172.31.253.1:41234', 10003],
    ['disconnected:tcp:[::1]:10001,server=on', 10001],
    ['file', undefined],
    ['unix:/run/qmp.sock,server=on', undefined],
  ])('%s', (filename, port) => {
    expect(chardevTcpPort(filename)).toBe(port);
  });
});
