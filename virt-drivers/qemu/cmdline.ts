/**
 * The QEMU command line of an instance, built from its `VmDefinition` and its directory.
 *
 * Live migration needs the destination's devices and memory to match the source's exactly (a
 * mismatch makes the destination exit mid-stream), so everything that shapes the guest comes
 * from the definition, which travels with the instance; only paths and `-incoming` differ
 * between the two sides. Device ids are fixed (`drive-disk0`, `virtio-disk0`, `serial0`,
 * `hostnet<slot>`/`net<slot>` per NIC) so both sides and the QMP commands agree on them.
 *
 * NICs: each is a kernel tap the VIF plugger created (`script=no,downscript=no`: QEMU configures
 * nothing) opened with `vnet_hdr=off`, because Open vSwitch's userspace datapath reads taps
 * without virtio-net headers and would forward checksum-offloaded packets with bad checksums; a
 * virtio-net-pci device with the port's MAC, `host_mtu` (virtio-net's MTU feature, QEMU >= 2.9)
 * and no option ROM (`romfile=`: guests boot from disk, and Debian's QEMU may lack iPXE's ROMs).
 * On q35 every NIC sits on its own PCIe root port (`netport<slot>`, `NIC_SLOTS` of them, made
 * for every definition that has a NIC list) because q35's root bus takes no hot-plugged devices;
 * on other machines NICs sit at fixed addresses of `pci.0`.
 *
 * Volumes (Cinder RBD), as libvirt gives them to QEMU: a `secret` object QEMU fills from the key
 * file itself (`format=base64`: the file holds what `ceph auth get-key` prints), so the cephx key
 * is on no command line and never in the agent; an `rbd` protocol node with the monitors, the
 * user and `cache.direct` (librbd's cache off, which live migration needs); a `raw` format node on
 * it; a virtio-blk device with the volume id as serial. On q35 each sits on its own root port
 * (`volport<slot>`, `VOLUME_SLOTS` of them on every definition that has a volume list, for later
 * hot plug), elsewhere at a fixed `pci.0` address; both clear of the NICs' (0x10-0x17).
 *
 * Consoles: a guest with a display (`video`) gets virtio-vga at a fixed address (slot 2 of the
 * root bus, clear of the ports above) and, when this host serves VNC, a VNC server on the first
 * free display from `:0` (port 5900 up) at `[vnc] server_listen`. With `[serial_console]` on, the
 * serial port is a TCP server socket on the first free port of its range (QEMU binds it: no two
 * guests race for one), still logged to the console file. Neither socket is part of the guest: a
 * live migration's destination opens its own.
 *
 * Guest agent: a definition with `guestAgent` gets a virtio-serial controller at slot 3 of the
 * root bus and on it the port `org.qemu.guest_agent.0`, whose host end is a unix socket QEMU
 * listens on in the instance directory (`guest-agent.ts` speaks to it). Part of the guest: it
 * travels with live migrations.
 *
 * Boot order: nova's boot_index N is QEMU's bootindex N + 1, and the local root disk, nova's
 * boot_index 0, keeps bootindex 1 unless a volume has boot_index 0 (then the disk gets none and
 * is tried after the listed devices).
 *
 * It is: a pure function, unit-tested. It is not: validation of the definition (the instance
 * record's schema does that).
 */
import type { InstancePaths, NicDefinition, RbdVolumeDefinition, VmDefinition } from './instance-files';
import { DriverError } from '../errors';
import type { ConsoleOptions } from './options';
import { rbdSecretFile, VOLUME_SLOTS } from './volumes';

/** The block backend and guest device of the root disk (QMP uses the first). */
export const DISK_DRIVE_ID = 'drive-disk0';
export const DISK_DEVICE_ID = 'virtio-disk0';
/** A rescue's disk (`disk.rescue`), the first the guest sees and boots from. */
export const RESCUE_DRIVE_ID = 'drive-rescue0';
export const RESCUE_DEVICE_ID = 'virtio-rescue0';

/** How many NICs an instance may have (root ports made on q35; PCI slots reserved elsewhere). */
export const NIC_SLOTS = 8;

/** The netdev (backend) id of the NIC in `slot`. */
export function netdevId(slot: number): string {
  return `hostnet${slot}`;
}

/** The guest device id of the NIC in `slot`. */
export function nicDeviceId(slot: number): string {
  return `net${slot}`;
}

/** Whether the machine type is a q35 (PCIe) machine. */
export function isQ35(machine: string): boolean {
  return /q35/.test(machine);
}

/** The properties of a NIC's `-netdev` (also `netdev_add`'s arguments). */
export function nicNetdev(nic: NicDefinition): { readonly type: 'tap'; readonly id: string; readonly ifname: string; readonly script: 'no'; readonly downscript: 'no'; readonly vnet_hdr: false } {
  return { type: 'tap', id: netdevId(nic.slot), ifname: nic.tap, script: 'no', downscript: 'no', vnet_hdr: false };
}

/** The properties of a NIC's `-device` (also `device_add`'s arguments), in command-line order. */
export function nicDevice(machine: string, nic: NicDefinition): Record<string, string | number> {
  const place: Record<string, string> = isQ35(machine) ? { bus: `netport${nic.slot}` } : { bus: 'pci.0', addr: `0x${(0x10 + nic.slot).toString(16)}` };
  return {
    driver: 'virtio-net-pci',
    netdev: netdevId(nic.slot),
    id: nicDeviceId(nic.slot),
    mac: nic.mac,
    ...place,
    ...(nic.mtu === null ? {} : { host_mtu: nic.mtu }),
    romfile: '',
  };
}

/** The `-netdev`/`-device` arguments of the definition's NICs (and q35's root ports for them). */
function nicArgs(def: VmDefinition): string[] {
  if (def.nics === undefined) return [];
  const e = escapeOptionValue;
  const args: string[] = [];
  if (isQ35(def.machine)) {
    for (let k = 0; k < NIC_SLOTS; k++) args.push('-device', `pcie-root-port,id=netport${k},bus=pcie.0,chassis=${k + 1},addr=0x${(0x10 + k).toString(16)}`);
  }
  for (const nic of [...def.nics].sort((a, b) => a.slot - b.slot)) {
    const n = nicNetdev(nic);
    args.push('-netdev', `tap,id=${n.id},ifname=${e(n.ifname)},script=no,downscript=no,vnet_hdr=off`);
    const { driver, ...props } = nicDevice(def.machine, nic);
    args.push('-device', [driver, ...Object.entries(props).map(([k, v]) => `${k}=${e(String(v))}`)].join(','));
  }
  return args;
}

/** The QEMU ids of the volume in `slot`: its secret object, block nodes and guest device. */
export function volumeIds(slot: number): { readonly secret: string; readonly storage: string; readonly format: string; readonly device: string } {
  return { secret: `vol${slot}-secret`, storage: `vol${slot}-storage`, format: `vol${slot}-format`, device: `virtio-vol${slot}` };
}

/** The `-blockdev` (also `blockdev-add`) properties of a volume: the rbd protocol node, then the raw format node on it. */
export function volumeBlockdevs(vol: RbdVolumeDefinition): readonly [Record<string, unknown>, Record<string, unknown>] {
  const ids = volumeIds(vol.slot);
  // librbd's cache off (cache=none, as nova's libvirt driver asks): safe across a live migration.
  const common = { cache: { direct: true, 'no-flush': false }, ...(vol.discard ? { discard: 'unmap' } : {}), 'read-only': vol.readOnly };
  // Without a user, say "none": librados would otherwise look for a keyring and fail on a cephx cluster.
  const auth = vol.user === null ? { 'auth-client-required': ['none'] } : { user: vol.user, 'auth-client-required': ['cephx', 'none'], 'key-secret': ids.secret };
  return [
    { driver: 'rbd', 'node-name': ids.storage, pool: vol.pool, image: vol.image, server: vol.servers.map((s) => ({ host: s.host, port: s.port })), ...auth, ...common },
    { driver: 'raw', 'node-name': ids.format, file: ids.storage, ...common },
  ];
}

/**
 * The QEMU bootindex of the local root disk and of each volume (by slot); absent: none. See the
 * module comment for the rule.
 */
export function bootOrder(def: VmDefinition): { readonly disk: number | undefined; readonly volumes: ReadonlyMap<number, number> } {
  const volumes = new Map<number, number>();
  for (const v of def.volumes ?? []) if (v.bootIndex !== null) volumes.set(v.slot, v.bootIndex + 1);
  const volumeFirst = (def.volumes ?? []).some((v) => v.bootIndex === 0);
  return { disk: def.disk && !volumeFirst ? 1 : undefined, volumes };
}

/** The properties of a volume's `-device` (also `device_add`'s arguments), in command-line order. */
export function volumeDevice(machine: string, vol: RbdVolumeDefinition, bootindex: number | undefined): Record<string, string | number> {
  const ids = volumeIds(vol.slot);
  const place: Record<string, string> = isQ35(machine) ? { bus: `volport${vol.slot}` } : { bus: 'pci.0', addr: `0x${(0x08 + vol.slot).toString(16)}` };
  return { driver: 'virtio-blk-pci', drive: ids.format, id: ids.device, serial: vol.volumeId, ...place, ...(bootindex === undefined ? {} : { bootindex }) };
}

/** The secret objects, block nodes and devices of the definition's volumes (and q35's root ports for them). */
function volumeArgs(def: VmDefinition, secretsDir: string | undefined): string[] {
  if (def.volumes === undefined) return [];
  const e = escapeOptionValue;
  const args: string[] = [];
  if (isQ35(def.machine)) {
    // Chassis and slots after the NICs' root ports (chassis 1-8, 0x10-0x17).
    for (let k = 0; k < VOLUME_SLOTS; k++) args.push('-device', `pcie-root-port,id=volport${k},bus=pcie.0,chassis=${NIC_SLOTS + 1 + k},addr=0x${(0x08 + k).toString(16)}`);
  }
  const boot = bootOrder(def);
  for (const vol of [...def.volumes].sort((a, b) => a.slot - b.slot)) {
    if (vol.secretUuid !== null) {
      if (secretsDir === undefined) throw new DriverError(`volume ${vol.volumeId} needs a cephx key but the command line was built without rbd_secrets_dir`);
      args.push('-object', `secret,id=${volumeIds(vol.slot).secret},file=${e(rbdSecretFile(secretsDir, vol.secretUuid))},format=base64`);
    }
    for (const node of volumeBlockdevs(vol)) args.push('-blockdev', JSON.stringify(node));
    const { driver, ...props } = volumeDevice(def.machine, vol, boot.volumes.get(vol.slot));
    args.push('-device', [driver, ...Object.entries(props).map(([k, v]) => `${k}=${e(String(v))}`)].join(','));
  }
  return args;
}

/** Everything the command line is made of. */
export interface CommandLineInput {
  readonly uuid: string;
  readonly name: string;
  readonly def: VmDefinition;
  readonly paths: InstancePaths;
  readonly sandbox: boolean;
  /** Start waiting for an incoming migration (`migrate-incoming` over QMP chooses where). */
  readonly incoming?: boolean;
  /** Start with the vCPUs stopped (`-S`): the guest runs at QMP `cont`. */
  readonly paused?: boolean;
  /** `[qemu] rbd_secrets_dir`: where QEMU reads the volumes' cephx keys (needed when a volume has a user). */
  readonly rbdSecretsDir?: string;
  /** The consoles this host serves; absent: none (the serial port logs to a file only). */
  readonly consoles?: ConsoleOptions;
}

/** The highest VNC display tried (port 5900 + this). */
export const VNC_LAST_DISPLAY = 4000;

/** An address as QEMU's `-vnc` takes it (IPv6 in brackets). */
function vncHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

/** The serial port's chardev: a log file, or also a TCP server socket for nova's serial proxy. */
function serialChardev(paths: InstancePaths, consoles: ConsoleOptions | undefined): string {
  const e = escapeOptionValue;
  const serial = consoles?.serial;
  if (!serial) return `file,id=charserial0,path=${e(paths.console)},append=on`;
  return `socket,id=charserial0,host=${e(serial.address)},port=${serial.ports.min},to=${serial.ports.max},server=on,wait=off,logfile=${e(paths.console)},logappend=on`;
}

/** The display device and VNC server of a guest with a display. */
function displayArgs(def: VmDefinition, consoles: ConsoleOptions | undefined): string[] {
  if (def.video === undefined) return [];
  const args = ['-device', `virtio-vga,id=video0,bus=${isQ35(def.machine) ? 'pcie.0' : 'pci.0'},addr=0x2`];
  if (consoles?.vnc) args.push('-vnc', `${vncHost(consoles.vnc.listen)}:0,to=${VNC_LAST_DISPLAY}`);
  return args;
}

/** The guest-agent channel QEMU's guest agent opens in the guest (libvirt's and nova's name). */
export const GUEST_AGENT_CHANNEL = 'org.qemu.guest_agent.0';

/** A guest with a guest-agent channel: virtio-serial at a fixed slot of the root bus, its port's host end a unix socket. */
function guestAgentArgs(def: VmDefinition, paths: InstancePaths): string[] {
  if (def.guestAgent === undefined) return [];
  const e = escapeOptionValue;
  return [
    '-chardev',
    `socket,id=charchannel0,path=${e(paths.guestAgent)},server=on,wait=off`,
    '-device',
    `virtio-serial-pci,id=virtio-serial0,bus=${isQ35(def.machine) ? 'pcie.0' : 'pci.0'},addr=0x3`,
    '-device',
    `virtserialport,bus=virtio-serial0.0,nr=1,chardev=charchannel0,id=channel0,name=${GUEST_AGENT_CHANNEL}`,
  ];
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
    serialChardev(paths, input.consoles),
    '-device',
    'isa-serial,chardev=charserial0,id=serial0',
    ...displayArgs(def, input.consoles),
    ...guestAgentArgs(def, paths),
  ];
  if (input.sandbox) args.push('-sandbox', 'on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny');
  if (def.rescue) {
    // Rescued: the rescue image's disk first (the guest's vda, booted), the instance's own after it.
    args.push('-drive', `file=${e(paths.rescueDisk)},format=qcow2,if=none,id=${RESCUE_DRIVE_ID}`, '-device', `virtio-blk-pci,drive=${RESCUE_DRIVE_ID},id=${RESCUE_DEVICE_ID},bootindex=0`);
  }
  if (def.disk) {
    const bootindex = bootOrder(def).disk;
    args.push(
      '-drive',
      `file=${e(paths.disk)},format=qcow2,if=none,id=${DISK_DRIVE_ID}`,
      '-device',
      `virtio-blk-pci,drive=${DISK_DRIVE_ID},id=${DISK_DEVICE_ID}${bootindex === undefined ? '' : `,bootindex=${bootindex}`}`,
    );
  }
  args.push(...nicArgs(def), ...volumeArgs(def, input.rbdSecretsDir));
  if (input.paused) args.push('-S');
  if (input.incoming) args.push('-incoming', 'defer');
  return args;
}
