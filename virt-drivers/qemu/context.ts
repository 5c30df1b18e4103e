/**
 * What every QEMU driver operation works with: options, ports, the instance table and the host
 * facts `init` found. One `QemuHost` per driver instance; the operation modules (`lifecycle`,
 * `cold-migration`, `live-source`, `live-destination`, `recovery`) are functions over it, so the
 * driver class stays a thin map from the `VirtDriver` contract onto them.
 *
 * It is: shared state, owned by the driver. It is not: shared between driver instances (two
 * drivers on one machine, as in the tests, are two hosts).
 */
import type { Logger } from '../../lib/logging/logger';
import type { Clock } from '../../lib/clock';
import { DriverError } from '../errors';
import { vifMtu, type NetworkInfo, type Vif } from '../../model/network';
import type { Exec } from '../host/exec';
import { vifTap, type VifPlugger } from '../net/plugger';
import type { InstanceSpec } from '../types';
import { NIC_SLOTS } from './cmdline';
import type { NicDefinition, VmDefinition } from './instance-files';
import type { AccelChoice, QemuVersion } from './host';
import type { Images } from './images';
import type { InstanceTable } from './instances';
import type { QemuOptions } from './options';
import type { VmProcesses } from './process';
import type { VmDeps } from './vm';
import { volumeDefinitions } from './volumes';

/** What `init` learned about the host. */
export interface QemuFacts {
  readonly version: QemuVersion;
  readonly accel: AccelChoice;
}

/** The shared context of one driver's operations (see the module comment). */
export interface QemuHost {
  readonly opts: QemuOptions;
  readonly log: Logger;
  readonly clock: Clock;
  readonly exec: Exec;
  readonly images: Images;
  readonly processes: VmProcesses;
  readonly vmDeps: VmDeps;
  readonly table: InstanceTable;
  /** Plugs the instances' VIFs (in `[qemu] network_namespace`, when set). */
  readonly plugger: VifPlugger;
  /** The host facts. @throws DriverError before `init` */
  facts(): QemuFacts;
}

const MAC = /^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/;

/** Thrown by operations called before `init`. */
export function notInitialised(): DriverError {
  return new DriverError('the qemu driver is not initialised (init was not called or failed)');
}

/** Checks the parts of a spec QEMU needs; values arrive over RPC. @throws DriverError (VolumeConnectionError for a volume) naming the field */
export function checkSpec(spec: InstanceSpec): void {
  const f = spec.flavor as Partial<InstanceSpec['flavor']> | undefined;
  const positive = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v > 0;
  const bad = (field: string, expected: string): DriverError => new DriverError(`instance ${spec.uuid}: ${field} must be ${expected}`);
  if (!f) throw bad('flavor', 'present');
  if (!positive(f.vcpus)) throw bad('flavor.vcpus', 'an integer > 0');
  if (!positive(f.memory_mb)) throw bad('flavor.memory_mb', 'an integer > 0');
  if (typeof f.root_gb !== 'number' || !Number.isInteger(f.root_gb) || f.root_gb < 0) throw bad('flavor.root_gb', 'an integer >= 0');
  if (spec.image_ref !== undefined && (typeof spec.image_ref !== 'string' || spec.image_ref === '')) throw bad('image_ref', 'a non-empty string when given');
  const vifs: unknown = spec.network_info ?? [];
  if (!Array.isArray(vifs) || vifs.length > NIC_SLOTS) throw bad('network_info', `a list of at most ${NIC_SLOTS} VIFs`);
  (vifs as readonly (Partial<Vif> | undefined)[]).forEach((v, i) => {
    if (typeof v?.id !== 'string' || v.id === '') throw bad(`network_info[${i}].id`, 'a port uuid');
    if (typeof v.address !== 'string' || !MAC.test(v.address)) throw bad(`network_info[${i}].address`, 'a MAC address (xx:xx:xx:xx:xx:xx)');
  });
  // Mapped here only to be checked: a bad volume fails the operation before anything is made.
  volumeDefinitions(spec.uuid, spec.volumes ?? []);
}

/**
 * The definition of a new instance on this host: its flavor, this host's machine, CPU and
 * accelerator, its NICs and volumes, a display when this host serves VNC consoles, the
 * guest-agent channel when its image asks for one (`hw_qemu_guest_agent`).
 * @throws VolumeConnectionError
 */
export function newDefinition(host: QemuHost, spec: InstanceSpec, disk: boolean): VmDefinition {
  return {
    machine: host.opts.machineType,
    accel: host.facts().accel.accel,
    cpuModel: host.opts.cpuModel,
    vcpus: spec.flavor.vcpus,
    memoryMb: spec.flavor.memory_mb,
    disk,
    nics: nicDefinitions(spec.network_info ?? []),
    volumes: volumeDefinitions(spec.uuid, spec.volumes ?? []),
    ...(host.opts.consoles.vnc ? { video: 'virtio' as const } : {}),
    ...(spec.image_meta?.hw_qemu_guest_agent ? { guestAgent: spec.image_meta.os_admin_user ? { adminUser: spec.image_meta.os_admin_user } : {} } : {}),
  };
}

/** The NICs of a new guest: one per VIF, in network_info order, slots 0, 1, ... */
export function nicDefinitions(vifs: NetworkInfo): NicDefinition[] {
  return vifs.map((v, slot) => ({ port: v.id, mac: v.address, tap: vifTap(v), mtu: vifMtu(v) ?? null, slot }));
}

/** Plugs every VIF, in order. @throws VifTypeNotSupportedError, VifPlugError */
export async function plugAll(host: QemuHost, instanceUuid: string, vifs: NetworkInfo): Promise<void> {
  for (const vif of vifs) await host.plugger.plug(vif, instanceUuid);
}

/** Unplugs every VIF; failures are logged, not thrown (cleanup after a failure, destroy). */
export async function unplugAllQuietly(host: QemuHost, instanceUuid: string, vifs: NetworkInfo): Promise<void> {
  for (const vif of vifs) {
    await host.plugger.unplug(vif).catch((e: unknown) => host.log.warn({ instance: instanceUuid, port: vif.id, err: (e as Error).message }, 'cannot unplug a VIF'));
  }
}
