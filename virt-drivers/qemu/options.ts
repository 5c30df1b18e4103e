/**
 * The QEMU driver's configuration as plain typed values (milliseconds, bytes), read once from the
 * validated `[qemu]` and `[DEFAULT]` sections.
 *
 * It is: a pure translation; every default lives in `config/sections/qemu.ts`. It is not:
 * re-read on SIGHUP (a changed option applies to the next driver instance).
 */
import { join } from 'node:path';
import type { AgentConfig } from '../../config/schema';

/** How often, and how long each time, a guest is asked to release a device (`device-release.ts`). */
export interface DetachPolicy {
  /** Requests sent at most (>= 1). */
  readonly attempts: number;
  /** How long each request waits for the guest (ms). */
  readonly timeoutMs: number;
}

/** The consoles guests offer nova's proxies (`[vnc]`, `[serial_console]`); null: off. */
export interface ConsoleOptions {
  /** Where a guest's VNC server listens, and the address the noVNC proxy is told to connect to. */
  readonly vnc: { readonly listen: string; readonly proxyclientAddress: string } | null;
  /** Where a guest's serial port listens (also the address the serial proxy is told), and its ports. */
  readonly serial: { readonly address: string; readonly ports: { readonly min: number; readonly max: number } } | null;
}

/** The driver's options, in milliseconds and bytes. */
export interface QemuOptions {
  readonly host: string;
  readonly instancesPath: string;
  readonly binary: string;
  readonly qemuImg: string;
  readonly accel: 'auto' | 'kvm' | 'tcg';
  readonly machineType: string;
  readonly cpuModel: string;
  readonly imagesPath?: string;
  readonly sandbox: boolean;
  /** `[qemu] rbd_secrets_dir`: the volumes' cephx keys, `<secret_uuid>.base64`. */
  readonly rbdSecretsDir: string;
  /** `[qemu] network_namespace`: QEMU and the VIF devices live in this named namespace. */
  readonly netns?: string;
  /** `[os_vif_ovs]`: how VIFs are plugged into Open vSwitch. */
  readonly ovs: { readonly connection: string; readonly vsctl: string; readonly timeoutSec: number; readonly datapathType: string };
  readonly shutdownTimeoutMs: number;
  /** How long a soft reboot waits for the guest's clean shutdown before it is done hard. */
  readonly softRebootTimeoutMs: number;
  readonly destroyTimeoutMs: number;
  /** How a running guest is asked to release a hot-plugged device (`device-release.ts`). */
  readonly deviceDetach: DetachPolicy;
  readonly startTimeoutMs: number;
  readonly qmpTimeoutMs: number;
  readonly migrationListenAddress: string;
  readonly inboundAddress?: string;
  readonly migrationPorts: { readonly min: number; readonly max: number };
  /** Per GiB of RAM + disk; 0: no limit. */
  readonly completionTimeoutMsPerGib: number;
  /** Bytes per second; 0: unlimited. */
  readonly bandwidthBytes: number;
  readonly downtimeMs: number;
  readonly autoConverge: boolean;
  readonly coldTransport: 'auto' | 'local' | 'rsync';
  /** How often a running live migration is polled (ms). */
  readonly migrationPollMs: number;
  /** How often progress is logged while a live migration runs (ms). */
  readonly migrationLogEveryMs: number;
  readonly consoles: ConsoleOptions;
  /** `[workarounds]`: announce a live-migrated guest again once the move has ended; null: not. */
  readonly announceAfterLiveMigration: { readonly count: number; readonly intervalMs: number } | null;
  /** `[glance]`: a fixed endpoint (else the keystone catalog's, when the agent has keystone auth). */
  readonly glance: { readonly endpointOverride?: string; readonly numRetries: number; readonly timeoutMs: number };
  /** `[image_cache]`: where Glance images are kept, and when unused ones go (intervalMs null: never). */
  readonly imageCache: { readonly dir: string; readonly intervalMs: number | null; readonly minAgeMs: number };
}

/** Longest unix socket path Linux accepts (sun_path is 108 bytes with the NUL). */
export const MAX_SOCKET_PATH = 107;

/** Reads the options out of a validated configuration. */
export function qemuOptionsFromConfig(config: AgentConfig): QemuOptions {
  const q = config.qemu;
  const ic = config.image_cache;
  return {
    host: config.DEFAULT.host,
    instancesPath: config.DEFAULT.instances_path,
    binary: q.binary,
    qemuImg: q.qemu_img_binary,
    accel: q.accel,
    machineType: q.machine_type,
    cpuModel: q.cpu_model,
    ...(q.images_path === undefined ? {} : { imagesPath: q.images_path }),
    sandbox: q.sandbox,
    rbdSecretsDir: q.rbd_secrets_dir,
    ...(q.network_namespace === undefined ? {} : { netns: q.network_namespace }),
    ovs: {
      connection: config.os_vif_ovs.ovsdb_connection,
      vsctl: config.os_vif_ovs.ovs_vsctl,
      timeoutSec: config.os_vif_ovs.ovsdb_timeout,
      datapathType: config.os_vif_ovs.datapath_type,
    },
    shutdownTimeoutMs: q.shutdown_timeout * 1000,
    softRebootTimeoutMs: q.wait_soft_reboot_seconds * 1000,
    destroyTimeoutMs: q.destroy_timeout * 1000,
    deviceDetach: { attempts: q.device_detach_attempts, timeoutMs: q.device_detach_timeout * 1000 },
    startTimeoutMs: q.start_timeout * 1000,
    qmpTimeoutMs: q.qmp_command_timeout * 1000,
    migrationListenAddress: q.migration_listen_address ?? '127.0.0.1',
    ...(q.live_migration_inbound_addr === undefined ? {} : { inboundAddress: q.live_migration_inbound_addr }),
    migrationPorts: q.migration_port_range,
    completionTimeoutMsPerGib: q.live_migration_completion_timeout * 1000,
    bandwidthBytes: q.live_migration_bandwidth * 1024 * 1024,
    downtimeMs: q.live_migration_downtime,
    autoConverge: q.live_migration_permit_auto_converge,
    coldTransport: q.cold_migration_transport,
    migrationPollMs: 50,
    migrationLogEveryMs: 1000,
    consoles: {
      vnc: config.vnc.enabled ? { listen: config.vnc.server_listen, proxyclientAddress: config.vnc.server_proxyclient_address } : null,
      serial: config.serial_console.enabled ? { address: config.serial_console.proxyclient_address, ports: config.serial_console.port_range } : null,
    },
    announceAfterLiveMigration: config.workarounds.enable_qemu_monitor_announce_self
      ? { count: config.workarounds.qemu_monitor_announce_self_count, intervalMs: config.workarounds.qemu_monitor_announce_self_interval * 1000 }
      : null,
    glance: {
      ...(config.glance.endpoint_override === undefined ? {} : { endpointOverride: config.glance.endpoint_override }),
      numRetries: config.glance.num_retries,
      timeoutMs: config.glance.timeout * 1000,
    },
    imageCache: {
      dir: join(config.DEFAULT.instances_path, ic.subdirectory_name),
      // nova: 0 runs at the default periodic interval (60 s), -1 never.
      intervalMs: !ic.remove_unused_base_images || ic.manager_interval < 0 ? null : (ic.manager_interval || 60) * 1000,
      minAgeMs: ic.remove_unused_original_minimum_age_seconds * 1000,
    },
  };
}
