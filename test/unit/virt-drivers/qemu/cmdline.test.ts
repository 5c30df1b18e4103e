import { escapeOptionValue, qemuCommandLine } from '../../../../virt-drivers/qemu/cmdline';
import type { VmDefinition } from '../../../../virt-drivers/qemu/instance-files';
import { instancePaths } from '../../../../virt-drivers/qemu/instance-files';

const DEF: VmDefinition = { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 2, memoryMb: 64, disk: true };
const UUID = '11111111-1111-4111-8111-111111111111';

/** The value following each occurrence of `flag`. */
function values(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1] as string] : []));
}

describe('qemu command line', () => {
  const paths = instancePaths(`/var/lib/compute-agent/instances/${UUID}`);

  test('guest shape from the definition, files from the instance directory, no defaults, QMP on a socket', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'instance-00000001', def: DEF, paths, sandbox: true });
    expect(values(args, '-machine')).toEqual(['type=q35']);
    expect(values(args, '-accel')).toEqual(['tcg']);
    expect(values(args, '-cpu')).toEqual(['max']);
    expect(values(args, '-m')).toEqual(['64']);
    expect(values(args, '-smp')).toEqual(['2']);
    expect(values(args, '-uuid')).toEqual([UUID]);
    expect(values(args, '-name')).toEqual(['guest=instance-00000001,debug-threads=on']);
    expect(values(args, '-pidfile')).toEqual([paths.pid]);
    expect(values(args, '-chardev')).toEqual([`socket,id=charmonitor,path=${paths.qmp},server=on,wait=off`, `file,id=charserial0,path=${paths.console},append=on`]);
    expect(values(args, '-drive')).toEqual([`file=${paths.disk},format=qcow2,if=none,id=drive-disk0`]);
    expect(values(args, '-device')).toContain('virtio-blk-pci,drive=drive-disk0,id=virtio-disk0,bootindex=1');
    expect(values(args, '-sandbox')).toEqual(['on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny']);
    expect(args).toContain('-nodefaults');
    expect(args).not.toContain('-daemonize');
    expect(args).not.toContain('-incoming');
  });

  test('no disk, no sandbox, waiting for an incoming migration', () => {
    const args = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, disk: false }, paths, sandbox: false, incoming: true });
    expect(values(args, '-drive')).toEqual([]);
    expect(values(args, '-sandbox')).toEqual([]);
    expect(values(args, '-incoming')).toEqual(['defer']);
  });

  test('commas in names and paths are doubled, as QEMU option syntax needs', () => {
    expect(escapeOptionValue('a,b,,c')).toBe('a,,b,,,,c');
    const odd = instancePaths(`/srv/in,stances/${UUID}`);
    const args = qemuCommandLine({ uuid: UUID, name: 'web,1', def: DEF, paths: odd, sandbox: false });
    expect(values(args, '-name')).toEqual(['guest=web,,1,debug-threads=on']);
    expect(values(args, '-drive')[0]).toBe(`file=/srv/in,,stances/${UUID}/disk.qcow2,format=qcow2,if=none,id=drive-disk0`);
  });
});
