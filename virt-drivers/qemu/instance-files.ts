/**
 * An instance's directory and its record: everything a driver (this one, or one started after a
 * crash) needs to find, adopt, restart or move the instance.
 *
 * Layout of `instances_path`:
 * - `<uuid>/` an instance of this host: `instance.json` (the record, a versioned, checksummed
 *   checkpoint written atomically), `disk.qcow2` (overlay on the image, if any), `console.log`
 *   (serial port, appended), `qmp.sock`, `qemu.pid` (QEMU's pidfile: QEMU deletes it on a clean
 *   exit, so a pidfile left behind by a dead process means it crashed or was killed), `qemu.log`
 *   (QEMU's stdout and stderr, appended).
 * - `<uuid>_resize/` the source copy of a cold-migrated instance, kept until confirm or revert
 *   (nova's libvirt driver uses the same name).
 * - `.<uuid>.incoming/` a cold migration being fetched; renamed to `<uuid>/` when complete, removed
 *   at start if a crash left it half-copied.
 *
 * It is: paths, the record's schema and its reads and writes. It is not: a cache; the driver
 * keeps records in memory and writes them here at every change.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { readCheckpoint, writeCheckpoint, type CheckpointSpec } from '../../lib/checkpoint';
import type { NetworkInfo } from '../../model/network';
import type { Flavor } from '../types';

/**
 * One NIC of the guest: a virtio-net device on the tap of a Neutron port. `slot` fixes its QEMU
 * ids (`hostnet<slot>`, `net<slot>`) and its PCI place, so both sides of a live migration and a
 * hot unplug agree on them whatever the order of the list.
 */
export interface NicDefinition {
  readonly port: string;
  readonly mac: string;
  readonly tap: string;
  /** The network's MTU, told to the guest (virtio-net host_mtu); null: not told. */
  readonly mtu: number | null;
  readonly slot: number;
}

/**
 * One Cinder RBD volume the guest has as a virtio disk, opened by QEMU's own librbd client. Made
 * from the volume's connection_info by `volumes.ts`; `slot` fixes its QEMU ids and its PCI place
 * (as a NIC's does), so both sides of a live migration agree on them. The cephx key is not here:
 * QEMU reads it from `[qemu] rbd_secrets_dir/<secretUuid>.base64` on the host that starts it.
 */
export interface RbdVolumeDefinition {
  readonly slot: number;
  /** The Cinder volume id, the disk's serial. */
  readonly volumeId: string;
  readonly pool: string;
  readonly image: string;
  /** The monitors, as Cinder names them (strings, as QEMU's rbd driver takes them). */
  readonly servers: readonly { readonly host: string; readonly port: string }[];
  /** The cephx user (without `client.`); null: the cluster is used without authentication. */
  readonly user: string | null;
  /** Names the key file; null exactly when `user` is. */
  readonly secretUuid: string | null;
  readonly readOnly: boolean;
  /** Pass the guest's discards (TRIM) down to RBD, freeing the space. */
  readonly discard: boolean;
  /** nova's boot_index: 0 boots first; null: not a boot device. */
  readonly bootIndex: number | null;
}

/** What shapes the guest; identical on both sides of a live migration. */
export interface VmDefinition {
  readonly machine: string;
  readonly accel: 'kvm' | 'tcg';
  readonly cpuModel: string;
  readonly vcpus: number;
  readonly memoryMb: number;
  /** Whether the instance has a root disk (`disk.qcow2` in its directory). */
  readonly disk: boolean;
  /**
   * The NICs. Absent in definitions written before instances had NICs: such a guest keeps its
   * old device layout (no NIC root ports), so it still live-migrates and restarts unchanged.
   */
  readonly nics?: readonly NicDefinition[];
  /**
   * The Cinder volumes. Absent in definitions written before instances had volumes: such a guest
   * keeps its old device layout (no volume root ports), as with `nics`.
   */
  readonly volumes?: readonly RbdVolumeDefinition[];
  /** Rescued: the guest boots from `disk.rescue` (the rescue image), its own disk attached after it. */
  readonly rescue?: boolean;
  /**
   * The guest's display (nova libvirt's default video model on x86, `virtio`: QEMU's virtio-vga),
   * made when the building host had `[vnc] enabled`. Absent: no display (and no VNC server).
   */
  readonly video?: 'virtio';
  /**
   * The guest-agent channel (the image's `hw_qemu_guest_agent`): a virtio-serial port named
   * `org.qemu.guest_agent.0` whose host end is `InstancePaths.guestAgent`; `adminUser`, the image's
   * `os_admin_user` (absent: root), the account a new admin password is set for. Absent: no channel.
   */
  readonly guestAgent?: { readonly adminUser?: string };
}

/** The files of one instance directory. */
export interface InstancePaths {
  readonly dir: string;
  readonly record: string;
  readonly disk: string;
  readonly console: string;
  readonly qmp: string;
  readonly pid: string;
  readonly log: string;
  /** A suspended guest's saved state (QEMU's migration stream). */
  readonly suspendState: string;
  /** A rescued guest's boot disk, an overlay on the rescue image. */
  readonly rescueDisk: string;
  /** The host end of the guest-agent channel (a unix socket QEMU listens on). */
  readonly guestAgent: string;
}

/** The paths of the files in instance directory `dir`. */
export function instancePaths(dir: string): InstancePaths {
  return {
    dir,
    record: join(dir, 'instance.json'),
    disk: join(dir, 'disk.qcow2'),
    console: join(dir, 'console.log'),
    qmp: join(dir, 'qmp.sock'),
    pid: join(dir, 'qemu.pid'),
    log: join(dir, 'qemu.log'),
    suspendState: join(dir, 'suspend.state'),
    rescueDisk: join(dir, 'disk.rescue'),
    guestAgent: join(dir, 'qga.sock'),
  };
}

/** Where the instance stands in a move, if anywhere. */
export type InstanceTask = 'resized-away' | 'incoming' | 'migrated-out';

/** How the last QEMU process of an instance ended, when it was not asked to. */
export interface UnexpectedExit {
  readonly at: string;
  /** QEMU removed its pidfile: the guest powered off or QEMU was asked to quit. */
  readonly clean: boolean;
  readonly code: number | null;
  readonly signal: string | null;
}

/** The record in `instance.json`. */
export interface InstanceRecord {
  readonly uuid: string;
  readonly name: string;
  /** The host that wrote it (`[DEFAULT] host`). */
  readonly host: string;
  readonly flavor: Flavor;
  readonly imageRef: string | null;
  /** The image the disk overlay sits on, as resolved on this host. */
  readonly image: { readonly path: string; readonly format: 'raw' | 'qcow2' } | null;
  readonly vm: VmDefinition;
  /**
   * What the instance should be doing: `running` unless it was powered off, paused (vCPUs
   * stopped, the process kept) or suspended (no process; its state saved in the directory).
   */
  readonly power: 'running' | 'stopped' | 'paused' | 'suspended';
  readonly task: InstanceTask | null;
  /** The migration `task` belongs to. */
  readonly migration: string | null;
  /** The QEMU process, while there is one. */
  readonly process: { readonly pid: number; readonly startTicks: string; readonly startedAt: string } | null;
  readonly lastExit: UnexpectedExit | null;
  /** The VIFs (nova's network_info) this host plugs for the instance; absent in older records: none. */
  readonly vifs?: NetworkInfo;
}

/** A UUID's text (instance directories, the key file names of volumes). */
export const UUID_PATTERN = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';

const flavorSchema = z.object({
  name: z.string().optional(),
  vcpus: z.number().int().positive(),
  memory_mb: z.number().int().positive(),
  root_gb: z.number().int().min(0),
  ephemeral_gb: z.number().int().min(0),
  swap: z.number().int().min(0),
  extra_specs: z.record(z.string(), z.string()),
});

/** Runtime check of a `VmDefinition` (records, live-migration data). */
export const vmDefinitionSchema = z.object({
  machine: z.string().min(1),
  accel: z.enum(['kvm', 'tcg']),
  cpuModel: z.string().min(1),
  vcpus: z.number().int().positive(),
  memoryMb: z.number().int().positive(),
  disk: z.boolean(),
  nics: z
    .array(z.object({ port: z.string().min(1), mac: z.string().regex(/^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/), tap: z.string().min(1).max(15), mtu: z.number().int().positive().nullable(), slot: z.number().int().min(0) }))
    .optional(),
  volumes: z
    .array(
      z.object({
        slot: z.number().int().min(0),
        volumeId: z.string().min(1),
        pool: z.string().min(1),
        image: z.string().min(1),
        servers: z.array(z.object({ host: z.string().min(1), port: z.string().regex(/^\d{1,5}$/) })).min(1),
        user: z.string().min(1).nullable(),
        secretUuid: z.string().regex(new RegExp(`^${UUID_PATTERN}$`)).nullable(),
        readOnly: z.boolean(),
        discard: z.boolean(),
        bootIndex: z.number().int().min(0).nullable(),
      }),
    )
    .optional(),
  rescue: z.boolean().optional(),
  video: z.literal('virtio').optional(),
  guestAgent: z.object({ adminUser: z.string().min(1).optional() }).optional(),
});

/** A VIF as a record keeps it: the fields plugging reads are checked, the rest is nova's JSON kept as it came. */
const vifSchema = z
  .object({ id: z.string().min(1), address: z.string(), type: z.string(), details: z.record(z.string(), z.unknown()), devname: z.string(), network: z.object({ meta: z.record(z.string(), z.unknown()) }).passthrough() })
  .passthrough();

const recordSchema = z.object({
  uuid: z.string(),
  name: z.string(),
  host: z.string(),
  flavor: flavorSchema,
  imageRef: z.string().nullable(),
  image: z.object({ path: z.string(), format: z.enum(['raw', 'qcow2']) }).nullable(),
  vm: vmDefinitionSchema,
  power: z.enum(['running', 'stopped', 'paused', 'suspended']),
  task: z.enum(['resized-away', 'incoming', 'migrated-out']).nullable(),
  migration: z.string().nullable(),
  process: z.object({ pid: z.number().int().positive(), startTicks: z.string(), startedAt: z.string() }).nullable(),
  lastExit: z.object({ at: z.string(), clean: z.boolean(), code: z.number().nullable(), signal: z.string().nullable() }).nullable(),
  vifs: z.array(vifSchema).optional(),
});

function spec(dir: string): CheckpointSpec<InstanceRecord> {
  return {
    path: instancePaths(dir).record,
    kind: 'compute-agent/qemu-instance',
    version: 1,
    validate: (data: unknown): data is InstanceRecord => recordSchema.safeParse(data).success,
  };
}

/** The record of the instance in `dir`; undefined when there is none. @throws CheckpointCorruptError */
export function readRecord(dir: string): Promise<InstanceRecord | undefined> {
  return readCheckpoint(spec(dir));
}

/** Writes the record atomically and durably. @throws the fs error */
export function writeRecord(dir: string, record: InstanceRecord): Promise<void> {
  return writeCheckpoint(spec(dir), record);
}

const ENTRY = new RegExp(`^(\\.)?(${UUID_PATTERN})(_resize|\\.incoming)?$`);

/** An instance directory found in `instances_path`. */
export interface InstanceDirEntry {
  readonly uuid: string;
  readonly dir: string;
  readonly kind: 'active' | 'resized' | 'staging';
}

/** The directory names the layout above uses, for one instance. */
export function instanceDirs(instancesPath: string, uuid: string): { active: string; resized: string; staging: string } {
  return { active: join(instancesPath, uuid), resized: join(instancesPath, `${uuid}_resize`), staging: join(instancesPath, `.${uuid}.incoming`) };
}

/** Every instance directory in `instances_path` (none when it does not exist). @throws the fs error */
export async function scanInstanceDirs(instancesPath: string): Promise<InstanceDirEntry[]> {
  let entries: import('node:fs').Dirent[];
  try {
    entries = await readdir(instancesPath, { withFileTypes: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const out: InstanceDirEntry[] = [];
  for (const entry of entries) {
    const m = ENTRY.exec(entry.name);
    if (!m || !entry.isDirectory()) continue;
    const [, dot, uuid = '', suffix] = m;
    if (dot && suffix === '.incoming') out.push({ uuid, dir: join(instancesPath, entry.name), kind: 'staging' });
    else if (!dot && suffix === '_resize') out.push({ uuid, dir: join(instancesPath, entry.name), kind: 'resized' });
    else if (!dot && suffix === undefined) out.push({ uuid, dir: join(instancesPath, entry.name), kind: 'active' });
  }
  return out.sort((a, b) => a.dir.localeCompare(b.dir));
}
