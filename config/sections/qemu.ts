/**
 * The `[qemu]` section: options of the QEMU virt driver (`compute_driver = qemu`).
 *
 * Names follow nova's libvirt driver where nova has the option (`live_migration_completion_timeout`,
 * `live_migration_bandwidth`, `live_migration_downtime`, `live_migration_permit_auto_converge`,
 * `live_migration_inbound_addr`, `shutdown_timeout`), and libvirt's qemu.conf for the migration
 * port range. It is: declarations only (the driver turns them into typed values in
 * `virt-drivers/qemu/options.ts`). It is not: read by any other driver.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { absPath, bool, choice, float, int, nonEmpty, option, optPath, portRange } from '../types';

/** An IP address literal (v4 or v6), or empty when `optional`. */
const ipAddress = (optional: boolean): z.ZodType<string | undefined, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim().replace(/^\[(.*)\]$/, '$1');
    if (v === '' && optional) return undefined;
    if (isIP(v) !== 0) return v;
    ctx.addIssue({ code: 'custom', message: 'not an IP address' });
    return z.NEVER;
  });

/** A network namespace name as `ip netns` takes it (a file name under /run/netns), or empty. */
const netnsName = (): z.ZodType<string | undefined, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (v === '') return undefined;
    if (/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$/.test(v)) return v;
    ctx.addIssue({ code: 'custom', message: 'not a network namespace name' });
    return z.NEVER;
  });

/** The accelerator choices of `[qemu] accel`. */
export const QEMU_ACCELS = ['auto', 'kvm', 'tcg'] as const;

/** The `[qemu]` section's options. */
export const qemuSection = z.object({
  binary: option(nonEmpty(), {
    help: 'QEMU system emulator to run, a path or a name looked up in PATH.',
    default: 'qemu-system-x86_64',
    expected: 'an executable name or path',
  }),
  qemu_img_binary: option(nonEmpty(), {
    help: 'qemu-img, which creates the qcow2 overlay of each instance on its image.',
    default: 'qemu-img',
    expected: 'an executable name or path',
  }),
  accel: option(choice(QEMU_ACCELS), {
    help:
      'Accelerator: kvm, tcg (emulation), or auto: kvm when /dev/kvm can be opened and the CPU has hardware ' +
      'virtualization (vmx or svm), else tcg. Both hosts of a live migration must run the same accelerator.',
    default: 'auto',
    expected: 'auto, kvm or tcg',
  }),
  machine_type: option(nonEmpty(), {
    help: "QEMU machine type of new instances (nova's hw_machine_type); a migrating instance keeps its own.",
    default: 'q35',
    expected: 'a machine type such as q35 or pc-q35-7.2',
  }),
  cpu_model: option(nonEmpty(), {
    help:
      'QEMU CPU model of new instances. max exposes everything the accelerator offers; between hosts with ' +
      'different CPUs, name a common model (e.g. Cascadelake-Server) so instances can live-migrate.',
    default: 'max',
    expected: 'a QEMU CPU model name',
  }),
  images_path: option(optPath(), {
    help:
      'Directory of local images: an image_ref that is not an absolute path names a file here. Empty: image_ref ' +
      'must be an absolute path to a raw or qcow2 image.',
    default: '',
    expected: 'an absolute path, or empty',
  }),
  rbd_secrets_dir: option(absPath(), {
    help:
      "Directory of the cephx keys QEMU opens Cinder RBD volumes with: <secret_uuid>.base64 for each secret_uuid " +
      "Cinder names (its rbd_secret_uuid), holding the key as `ceph auth get-key client.<rbd_user>` prints it " +
      "(base64, no newline), mode 0600, owned by the agent's user (libvirt keeps /etc/libvirt/secrets/<uuid>.base64 " +
      'alike). QEMU reads the file itself; the key is never on a command line or in a log.',
    default: '/etc/compute-agent/secrets',
    expected: 'an absolute path',
  }),
  sandbox: option(bool(), {
    help: "Run QEMU under its seccomp sandbox (-sandbox on with obsolete, elevateprivileges, spawn and resourcecontrol denied), as libvirt does.",
    default: 'true',
    expected: 'true or false',
  }),
  network_namespace: option(netnsName(), {
    help:
      "Named network namespace (ip netns) this host's VIF devices are created in and QEMU runs in, for several " +
      "simulated compute hosts on one machine, each with its own Open vSwitch. Empty: the agent's own namespace. " +
      'Live migration between namespaced hosts is not supported (its TCP endpoints would be in different namespaces).',
    default: '',
    expected: 'a namespace name (letters, digits, _ . -), or empty',
  }),
  shutdown_timeout: option(int(0), {
    help:
      "Seconds a clean power off waits for the guest to shut down after the ACPI power button before the VM is " +
      "stopped hard (nova's [DEFAULT] shutdown_timeout); also used before a cold migration.",
    default: '60',
    expected: 'an integer >= 0 (seconds)',
  }),
  wait_soft_reboot_seconds: option(int(0), {
    help:
      "Seconds a soft reboot waits for the guest to shut down after the ACPI power button before it is done hard " +
      "(nova's [libvirt] wait_soft_reboot_seconds).",
    default: '120',
    expected: 'an integer >= 0 (seconds)',
  }),
  device_detach_attempts: option(int(1), {
    help:
      "How many times a device (a volume's disk, a NIC) is asked of a running guest before its detach fails and " +
      "it stays attached (nova's [libvirt] device_detach_attempts): a guest still booting misses the first request.",
    default: '8',
    expected: 'an integer >= 1',
  }),
  device_detach_timeout: option(int(1), {
    help: "Seconds each of those requests waits for the guest to release the device (nova's [libvirt] device_detach_timeout).",
    default: '20',
    expected: 'an integer >= 1 (seconds)',
  }),
  destroy_timeout: option(float(0, true), {
    help: 'Seconds a VM being stopped hard gets to exit after QMP quit, and again after SIGTERM, before SIGKILL.',
    default: '10',
    expected: 'a number > 0 (seconds)',
  }),
  start_timeout: option(float(0, true), {
    help: 'Seconds a started QEMU has to answer on its QMP socket before the start is declared failed.',
    default: '30',
    expected: 'a number > 0 (seconds)',
  }),
  qmp_command_timeout: option(float(0, true), {
    help: 'Seconds a QMP command may take before it is abandoned.',
    default: '30',
    expected: 'a number > 0 (seconds)',
  }),
  migration_listen_address: option(ipAddress(false), {
    help:
      'Address a live-migration destination listens on for the incoming VM state and disk copy. Use this host\'s ' +
      'address on the migration network (or 0.0.0.0) for real deployments; the default keeps it on loopback.',
    default: '127.0.0.1',
    expected: 'an IP address',
  }),
  live_migration_inbound_addr: option(ipAddress(true), {
    help:
      'Address sources connect to when migrating to this host. Empty: migration_listen_address, or when that is ' +
      'a wildcard, the address (else the name) the migration names this host by.',
    default: '',
    expected: 'an IP address, or empty',
  }),
  migration_port_range: option(portRange('-'), {
    help:
      "TCP ports a live-migration destination listens on (one for the VM state, one for the disk copy), tried in " +
      "order until one is free (libvirt's migration_port_min-migration_port_max). Open them on the migration network.",
    default: '49152-49215',
    expected: 'MIN-MAX, e.g. 49152-49215',
  }),
  live_migration_completion_timeout: option(int(0), {
    help:
      "Seconds per GiB of RAM plus disk (at least 2 GiB counted) a live migration may take before it is aborted " +
      "and the instance stays on the source, as nova's option; 0 disables the limit.",
    default: '800',
    expected: 'an integer >= 0 (seconds per GiB)',
  }),
  live_migration_bandwidth: option(int(0), {
    help: 'Maximum live-migration bandwidth in MiB/s, for the VM state and the disk copy each; 0 means unlimited.',
    default: '0',
    expected: 'an integer >= 0 (MiB/s)',
  }),
  live_migration_downtime: option(int(100), {
    help: 'Maximum pause (ms) of the instance when a live migration switches over to the destination.',
    default: '500',
    expected: 'an integer >= 100 (milliseconds)',
  }),
  live_migration_permit_auto_converge: option(bool(), {
    help: 'Let QEMU slow the guest\'s vCPUs down when it dirties memory faster than the migration can send it.',
    default: 'false',
    expected: 'true or false',
  }),
  cold_migration_transport: option(choice(['auto', 'local', 'rsync'] as const), {
    help:
      'How a cold-migration destination fetches the instance files from the source: local copies them from the ' +
      "source's instances_path as seen here (shared storage, or both agents on one machine); rsync pulls them over " +
      'ssh from the source host (keys between compute hosts, as nova needs); auto is local when the source ' +
      'directory is visible here, else rsync.',
    default: 'auto',
    expected: 'auto, local or rsync',
  }),
});

/** The validated `[qemu]` section. */
export type QemuSection = z.output<typeof qemuSection>;
