/**
 * The QEMU command line of an instance, built from its `VmDefinition` and its directory.
 *
 * Live migration needs the destination's devices and memory to match the source's exactly (a
 * mismatch makes the destination exit mid-stream), so everything that shapes the guest comes
 * from the definition, which travels with the instance; only paths and `-incoming` differ
 * between the two sides. Device ids are fixed (`drive-disk0`, `virtio-disk0`, `serial0`) so
 * both sides and the QMP commands agree on them.
 *
 * It is: a pure function, unit-tested. It is not: validation of the definition (the instance
 * record's schema does that).
 */
import type { InstancePaths, VmDefinition } from './instance-files';

/** The block backend and guest device of the root disk (QMP uses the first). */
export const DISK_DRIVE_ID = 'drive-disk0';
export const DISK_DEVICE_ID = 'virtio-disk0';

/** Everything the command line is made of. */
export interface CommandLineInput {
  readonly uuid: string;
  readonly name: string;
  readonly def: VmDefinition;
  readonly paths: InstancePaths;
  readonly sandbox: boolean;
  /** Start waiting for an incoming migration (`migrate-incoming` over QMP chooses where). */
  readonly incoming?: boolean;
}

/** QEMU's option syntax: a comma inside a value is written twice. */
export function escapeOptionValue(v: string): string {
  return v.replace(/,/g, ',,');
}

/** The arguments of `qemu-system-x86_64` for an instance (without the binary). Pure. */
export function qemuCommandLine(input: CommandLineInput): string[] {
  const { def, paths } = input;
  const e = escapeOptionValue;
  const args = [
    '-name',
    `guest=${e(input.name)},debug-threads=on`,
    '-uuid',
    input.uuid,
    '-machine',
    `type=${e(def.machine)}`,
    '-accel',
    def.accel,
    '-cpu',
    def.cpuModel,
    '-m',
    String(def.memoryMb),
    '-smp',
    String(def.vcpus),
    '-nodefaults',
    '-no-user-config',
    '-display',
    'none',
    '-msg',
    'timestamp=on',
    '-pidfile',
    paths.pid,
    '-chardev',
    `socket,id=charmonitor,path=${e(paths.qmp)},server=on,wait=off`,
    '-mon',
    'chardev=charmonitor,id=monitor,mode=control',
    '-chardev',
    `file,id=charserial0,path=${e(paths.console)},append=on`,
    '-device',
    'isa-serial,chardev=charserial0,id=serial0',
  ];
  if (input.sandbox) args.push('-sandbox', 'on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny');
  if (def.disk) {
    args.push(
      '-drive',
      `file=${e(paths.disk)},format=qcow2,if=none,id=${DISK_DRIVE_ID}`,
      '-device',
      `virtio-blk-pci,drive=${DISK_DRIVE_ID},id=${DISK_DEVICE_ID},bootindex=1`,
    );
  }
  if (input.incoming) args.push('-incoming', 'defer');
  return args;
}
