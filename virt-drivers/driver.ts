/**
 * The virt-driver contract, after nova's `ComputeDriver` (`nova/virt/driver.py`).
 *
 * A driver owns discovery of its host and the shape of the compute node's provider subtree, and
 * it runs instances. It never talks to Placement or AMQP: it tells (a tree, move instructions,
 * instance state), the tracker and the compute manager write. Methods are async; none may block
 * the event loop. Every driver must pass the conformance suite in `test/drivers/`.
 *
 * Lifecycle methods are named after nova's and called on the host nova calls them on (noted as
 * "source" or "destination"). A method a driver cannot do throws `NotSupportedError`.
 */
import type { Readable } from 'node:stream';
import type { AgentConfig } from '../config/schema';
import type { ProviderTree } from '../model/provider-tree';
import type { NetworkInfo, Vif } from '../model/network';
import type { AllocationsByConsumer, MoveInstruction } from '../model/provider-types';
import type {
  Flavor,
  HostRef,
  InstanceInfo,
  InstanceRef,
  InstanceSpec,
  AttachedVolume,
  LiveMigrateData,
  MigrateDiskResult,
  MigrationRef,
} from './types';
import type { HostFacts } from './host/discover';

/** nova's capability flags that map to standard `COMPUTE_*` traits (`CAPABILITY_TRAITS_MAP`). */
export const CAPABILITY_TRAITS = {
  supports_attach_interface: 'COMPUTE_NET_ATTACH_INTERFACE',
  supports_device_tagging: 'COMPUTE_DEVICE_TAGGING',
  supports_tagged_attach_interface: 'COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG',
  supports_tagged_attach_volume: 'COMPUTE_VOLUME_ATTACH_WITH_TAG',
  supports_extend_volume: 'COMPUTE_VOLUME_EXTEND',
  supports_multiattach: 'COMPUTE_VOLUME_MULTI_ATTACH',
  supports_trusted_certs: 'COMPUTE_TRUSTED_CERTS',
  supports_accelerators: 'COMPUTE_ACCELERATORS',
  supports_image_type_iso: 'COMPUTE_IMAGE_TYPE_ISO',
  supports_image_type_qcow2: 'COMPUTE_IMAGE_TYPE_QCOW2',
  supports_image_type_raw: 'COMPUTE_IMAGE_TYPE_RAW',
  supports_migrate_to_same_host: 'COMPUTE_SAME_HOST_COLD_MIGRATE',
  supports_secure_boot: 'COMPUTE_SECURITY_UEFI_SECURE_BOOT',
  supports_socket_pci_numa_affinity: 'COMPUTE_SOCKET_PCI_NUMA_AFFINITY',
} as const;

export type DriverCapabilities = { readonly [K in keyof typeof CAPABILITY_TRAITS]?: boolean };

/** Capability flags -> `{trait: present}` for every trait of the map (absent flags are false). */
export function capabilityTraits(caps: DriverCapabilities): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const [flag, trait] of Object.entries(CAPABILITY_TRAITS)) out[trait] = caps[flag as keyof DriverCapabilities] === true;
  return out;
}

/** Options of `powerOff`. */
export interface PowerOffOptions {
  /** Seconds to wait for a clean guest shutdown before forcing it off (0: force at once).
 *
 * Idempotency: the compute manager replays an operation interrupted by a crash from the step it
 * recorded last, so repeating a step that already completed must succeed without doing it twice
 * (a migrate-out of an instance already migrated out, a finish of one already finished).
 */
  readonly timeoutSec?: number;
}

/** Options of `spawn`. */
export interface SpawnOptions {
  /** Start the guest (default true); false leaves it created and shut off. */
  readonly powerOn?: boolean;
  /**
   * With `powerOn`: the guest is created paused, its VIFs plugged, and runs only once this
   * resolves (the compute manager waits there for Neutron's `network-vif-plugged` events). When it
   * rejects, spawn undoes everything and rethrows that error unchanged.
   */
  readonly beforeRun?: () => Promise<void>;
}

/** A copy of an instance's root disk as of one instant, as `snapshot` hands it over. */
export interface SnapshotImage {
  /** The copy's data, to be read once. */
  readonly data: Readable;
  readonly bytes: number;
  /** Glance's `disk_format` of the data. */
  readonly diskFormat: 'qcow2' | 'raw';
}

/** The consoles a guest may offer nova's proxies. */
export type ConsoleKind = 'vnc' | 'serial';

/** A console's listening socket, as the proxy reaches it. */
export interface ConsoleEndpoint {
  readonly host: string;
  readonly port: number;
}

export interface VirtDriver {
  /** The registered name (`[DEFAULT] compute_driver`). */
  readonly name: string;
  readonly capabilities: DriverCapabilities;

  /** Connects to the hypervisor and reads its state; called once before anything else. @throws DriverInitError */
  init(host: string): Promise<void>;
  /**
   * Optional: takes a reloaded configuration (SIGHUP); tunables such as allocation ratios and
   * reserved amounts apply from the next `updateProviderTree`. Never throws.
   */
  reconfigure?(config: AgentConfig): void;
  /** Releases what `init` acquired; idempotent, never throws. */
  cleanupHost(host: string): Promise<void>;

  /**
   * Makes `tree` say what the host has: the inventory and traits of the root named `nodename`
   * (the tracker created it) and the children the driver owns; the tree is the caller's private
   * copy, owned by the driver until it returns, and providers or traits the driver does not own
   * are left alone. Returns where inventory moved if the subtree changed shape (empty when not);
   * given `allocations` (consumer -> provider -> resources, for this tree), each move also says
   * which consumers' allocations follow. Probe failures do not throw: the failed part is left as
   * the tree had it.
   * @throws RootProviderMissingError when the tree has no provider named `nodename`
   */
  updateProviderTree(tree: ProviderTree, nodename: string, allocations?: AllocationsByConsumer): Promise<MoveInstruction[]>;
  /** `{trait: present}` for the capability traits the driver controls on the root; never throws. */
  capabilitiesAsTraits(): Readonly<Record<string, boolean>>;
  /** Every instance the hypervisor knows on this host, whatever nova thinks; never throws for an empty host. */
  listInstances(): Promise<InstanceInfo[]>;
  /** One instance's state. @throws InstanceNotFoundError */
  getInfo(instance: InstanceRef): Promise<InstanceInfo>;
  /** Seconds since the host booted. @throws DriverError when the host cannot say */
  getHostUptime(): Promise<number>;
  /**
   * Optional: the hypervisor's version as nova reports it on the ComputeNode (libvirt's integer
   * form, major * 1000000 + minor * 1000 + micro), after `init`. Never throws.
   */
  hypervisorVersion?(): number;
  /** Optional: the host facts behind the last tree (`discover --facts`, nova's cpu_info). */
  lastHostFacts?(): HostFacts | undefined;

  /**
   * Plugs every VIF of `instance.network_info`, creates and (with `powerOn`, the default) starts
   * an instance; with `beforeRun`, nothing of the guest runs before it resolves. On failure
   * (`beforeRun` rejecting included) nothing of it is left: process, disks and VIF plugging are
   * undone and the error is rethrown unchanged.
   * @throws InstanceExistsError, VifPlugError, VifTypeNotSupportedError, DriverError, what `beforeRun` threw
   */
  spawn(instance: InstanceSpec, opts?: SpawnOptions): Promise<void>;
  /** Stops and deletes an instance, its local disks and its VIF plugging; idempotent (an absent instance is not an error). @throws DriverError */
  destroy(instance: InstanceRef): Promise<void>;
  /** Starts a stopped instance, plugging again whatever of its VIFs is missing (no event wait). @throws InstanceNotFoundError, InstanceStateError */
  powerOn(instance: InstanceRef): Promise<void>;
  /** Stops an instance, cleanly within `timeoutSec`, else forcibly. @throws InstanceNotFoundError, InstanceStateError */
  powerOff(instance: InstanceRef, opts?: PowerOffOptions): Promise<void>;
  /** Restarts an instance: `soft` asks the guest, `hard` resets it (plugging again what of its VIFs is missing). @throws InstanceNotFoundError, InstanceStateError */
  reboot(instance: InstanceRef, type: 'soft' | 'hard'): Promise<void>;
  /** Stops a running guest's vCPUs where they are; its memory stays. @throws InstanceNotFoundError, InstanceStateError (not running) */
  pause(instance: InstanceRef): Promise<void>;
  /** Runs a paused guest's vCPUs again. @throws InstanceNotFoundError, InstanceStateError (not paused) */
  unpause(instance: InstanceRef): Promise<void>;
  /**
   * Saves a running guest's whole state (memory, devices) to the instance's storage and stops it:
   * the host holds no process for it until `resume`, and the saved state survives an agent or
   * host restart (power state SUSPENDED). Idempotent: an instance suspended already is left as
   * it is. On failure the guest runs on as before.
   * @throws InstanceNotFoundError, InstanceStateError (not running), DriverError
   */
  suspend(instance: InstanceRef): Promise<void>;
  /**
   * Starts a suspended guest from its saved state, plugging again whatever of its VIFs is
   * missing; it runs on from where it stopped. Idempotent: a running instance is left as it is.
   * On failure the saved state is kept (a later resume tries again).
   * @throws InstanceNotFoundError, InstanceStateError (not suspended), DriverError
   */
  resume(instance: InstanceRef): Promise<void>;
  /**
   * Restarts the instance from a rescue disk made from image `imageRef` (the guest's first disk,
   * booted), with its own root disk attached after it; `cleanShutdown`: the guest is asked to
   * shut down first. Idempotent: a rescued instance is left as it is. On failure the instance is
   * left stopped on its own disk.
   * @throws InstanceNotFoundError, InstanceStateError, NotSupportedError (no local root disk), DriverError
   */
  rescue(instance: InstanceRef, imageRef: string, cleanShutdown: boolean): Promise<void>;
  /** Restarts a rescued instance from its own disk, the rescue disk dropped; idempotent. @throws InstanceNotFoundError, InstanceStateError, DriverError */
  unrescue(instance: InstanceRef): Promise<void>;
  /** Sends a running guest an NMI (its kernel dumps or panics, as it is configured to). @throws InstanceNotFoundError, InstanceStateError (not running), NotSupportedError */
  triggerCrashDump(instance: InstanceRef): Promise<void>;
  /**
   * Sets the password of the guest's admin account (the image's `os_admin_user`, else root)
   * through the guest agent of a running guest.
   * @throws InstanceNotFoundError, InstanceStateError (not running), GuestAgentNotEnabledError (the
   *   image asked for no guest agent), DriverError (the agent did not answer or refused, with its words)
   */
  setAdminPassword(instance: InstanceRef, password: string): Promise<void>;
  /**
   * Freezes a running guest's filesystems through its guest agent (nova's `quiesce`, before the
   * volume snapshots of a volume-backed server's snapshot); `unquiesce` thaws them.
   * @throws InstanceNotFoundError, InstanceStateError (not running), GuestAgentNotEnabledError, DriverError (the agent did not answer or refused)
   */
  quiesce(instance: InstanceRef): Promise<void>;
  /** Thaws what `quiesce` froze; a guest not frozen is left as it is. @throws InstanceNotFoundError, GuestAgentNotEnabledError, DriverError */
  unquiesce(instance: InstanceRef): Promise<void>;
  /**
   * Plugs on this host whatever of `vifs` is not plugged (taps, OVS ports with their external_ids);
   * idempotent. The instance need not exist here (a move's destination before finish_migration or
   * pre_live_migration); when it does, its stored VIFs take the given ones' binding details. Used
   * after an agent or host restart, at power on, and on the destination of moves (live migration:
   * with the destination binding's VIFs).
   * @throws VifPlugError, VifTypeNotSupportedError
   */
  plugVifs(instance: InstanceRef, vifs: NetworkInfo): Promise<void>;
  /** Removes `vifs`' plugging from this host (OVS ports, taps); idempotent (absent is fine). Source after moves, failed builds. @throws VifPlugError */
  unplugVifs(instance: InstanceRef, vifs: NetworkInfo): Promise<void>;
  /**
   * Adds a NIC for `vif` to the instance: plugs it and, when the guest runs, hot-plugs the
   * device; the instance's stored NIC list keeps it (restarts and migrations keep it).
   * Idempotent: a port already attached is left as it is.
   * @throws InstanceNotFoundError, InstanceStateError, VifPlugError, NotSupportedError, DriverError
   */
  attachInterface(instance: InstanceRef, vif: Vif): Promise<void>;
  /**
   * Removes the instance's NIC of `vif`: hot-unplugs it when the guest runs (waiting for the guest
   * to release it), unplugs the VIF and drops it from the stored NIC list. Idempotent: a port not
   * attached is fine.
   * @throws InstanceNotFoundError, InstanceStateError, VifPlugError, DriverError (the guest did not release the device)
   */
  detachInterface(instance: InstanceRef, vif: Vif): Promise<void>;
  /**
   * Gives the instance the disk of `volume`, connected already (Cinder has this host's connector):
   * hot-plugs it when the guest runs; the stored definition keeps it (restarts and migrations
   * keep it). Idempotent: a volume already attached is left as it is.
   * @throws InstanceNotFoundError, VolumeConnectionError (a back end the driver does not open),
   *   NotSupportedError, DriverError (no free slot, the hypervisor refused)
   */
  attachVolume(instance: InstanceRef, volume: AttachedVolume): Promise<void>;
  /**
   * Takes the disk of volume `volumeId` away: hot-unplugs it when the guest runs, waiting for the
   * guest to release it, and drops it from the stored definition. Idempotent: a volume not
   * attached is fine.
   * @throws InstanceNotFoundError, NotSupportedError, DriverError (the guest did not release it in time: it stays attached)
   */
  detachVolume(instance: InstanceRef, volumeId: string): Promise<void>;
  /**
   * Moves the guest's disk of volume `oldVolumeId` onto `newVolume` (connected already): a running
   * guest's data is copied while it runs and the device switched to the new volume, the old one
   * let go; a stopped guest just starts on the new one. The stored definition keeps the new one.
   * On failure the guest keeps the old disk. Idempotent: a guest on the new volume already is left
   * as it is. `newVolume.volume_id` may be `oldVolumeId` (a Cinder migration keeps the old id for
   * the new volume): the disk is then known by the same id, on the new connection.
   * @throws InstanceNotFoundError, VolumeConnectionError, DriverError (the copy or the switch failed: the old disk stays)
   */
  swapVolume(instance: InstanceRef, oldVolumeId: string, newVolume: AttachedVolume): Promise<void>;
  /** Tells a running guest that volume `volumeId` is now `bytes` long (a stopped one sees it at its next start). @throws InstanceNotFoundError, NotSupportedError, DriverError */
  extendVolume(instance: InstanceRef, volumeId: string, bytes: number): Promise<void>;
  /**
   * Copies the instance's root disk as it is now, consistently (a running guest runs on; the copy
   * is of one instant), and hands the copy to `upload`; the driver's copy is removed afterwards,
   * whether `upload` succeeded or not. The guest is not held while `upload` runs. A running guest
   * with a guest agent has its filesystems frozen for the instant of the copy (quiesced);
   * `requireQuiesce` (the image's `os_require_quiesce`): a guest that cannot be quiesced is not
   * snapshotted.
   * @throws InstanceNotFoundError, InstanceStateError (in a move), NotSupportedError (no local root disk), DriverError, what `upload` threw
   */
  snapshot(instance: InstanceRef, upload: (image: SnapshotImage) => Promise<void>, options?: { readonly requireQuiesce?: boolean }): Promise<void>;
  /**
   * Whether `path`, a file another host made in its instances directory (nova's
   * `check_instance_shared_storage_local`), is seen here: true only when both hosts share the
   * instance storage. A path outside this host's instances directory is false. Never throws.
   */
  instanceFileVisible(path: string): Promise<boolean>;
  /**
   * Where a console of a running instance listens, for nova's console proxy to connect to: its
   * VNC server, or its serial port's TCP socket.
   * @throws InstanceNotFoundError, InstanceStateError (no running guest), ConsoleUnavailableError
   */
  getConsole(instance: InstanceRef, kind: ConsoleKind): Promise<ConsoleEndpoint>;
  /** The guest's serial console log as the hypervisor kept it (at most its last 100 KiB, nova libvirt's cap). @throws InstanceNotFoundError */
  getConsoleOutput(instance: InstanceRef): Promise<Buffer>;

  /** Source, cold migration: stops the instance and hands its disks over. @throws InstanceNotFoundError, DriverError */
  migrateDiskAndPowerOff(instance: InstanceRef, migration: MigrationRef, flavor: Flavor): Promise<MigrateDiskResult>;
  /** Destination, cold migration: builds the instance from the handed-over disks. @throws InstanceExistsError, DriverError */
  finishMigration(instance: InstanceSpec, migration: MigrationRef, disk: MigrateDiskResult, opts?: { readonly powerOn?: boolean }): Promise<void>;
  /** Source, cold migration confirmed: deletes what is left of the instance here. @throws DriverError */
  confirmMigration(instance: InstanceRef, migration: MigrationRef): Promise<void>;
  /** Source, cold migration reverted: brings the original instance back (destination calls `destroy`). @throws InstanceNotFoundError, DriverError */
  finishRevertMigration(instance: InstanceRef, migration: MigrationRef, opts?: { readonly powerOn?: boolean }): Promise<void>;

  /** Destination: whether this host can take the instance; returns data for the next steps. @throws MigrationPreCheckError */
  checkCanLiveMigrateDestination(instance: InstanceSpec, source: HostRef): Promise<LiveMigrateData>;
  /** Source: whether the instance can leave with that data. @throws MigrationPreCheckError, InstanceNotFoundError */
  checkCanLiveMigrateSource(instance: InstanceRef, data: LiveMigrateData): Promise<LiveMigrateData>;
  /** Destination: prepares to receive the instance (networks, disks, a paused shell). @throws InstanceExistsError, DriverError */
  preLiveMigration(instance: InstanceSpec, data: LiveMigrateData): Promise<LiveMigrateData>;
  /** Source: moves the running instance; resolves when it runs on `dest`, rejects if it still runs here. @throws InstanceNotFoundError, DriverError */
  liveMigration(instance: InstanceRef, dest: HostRef, data: LiveMigrateData): Promise<void>;
  /** Source: asks a running live migration to stop; resolves once `liveMigration` will reject. @throws InstanceNotFoundError, NotSupportedError */
  liveMigrationAbort(instance: InstanceRef): Promise<void>;
  /**
   * Source: makes a running live migration finish at its next round, however long the guest must
   * then pause (the guest runs on the destination afterwards, as after any live migration).
   * @throws InstanceNotFoundError, InstanceStateError (none running), NotSupportedError
   */
  liveMigrationForceComplete(instance: InstanceRef): Promise<void>;
  /** Source, after success: removes what is left of the instance here. @throws DriverError */
  postLiveMigration(instance: InstanceRef, data: LiveMigrateData): Promise<void>;
  /** Destination, after success: makes the received instance a normal, running one. @throws InstanceNotFoundError, DriverError */
  postLiveMigrationAtDestination(instance: InstanceRef, data: LiveMigrateData): Promise<void>;
  /** Destination, after failure: removes what `preLiveMigration` created; idempotent. @throws DriverError */
  rollbackLiveMigrationAtDestination(instance: InstanceRef, data: LiveMigrateData): Promise<void>;
}
