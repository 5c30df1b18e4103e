/**
 * The `[DEFAULT]` section: who this host is (name, state and instance directories), how it reaches
 * the RPC bus and which control plane drives it, what it keeps back from Placement (reserved
 * amounts, allocation ratios), and the audit, shutdown and logging knobs. Names are nova's
 * `nova.conf` `[DEFAULT]` names wherever nova has the option.
 *
 * It is: declarations only (type, default, help, expected form). It is not: where the values are
 * read or interpolated (`../loader.ts`).
 */
import { hostname } from 'node:os';
import { z } from 'zod';
import {
  absPath,
  auditIntervalType,
  bool,
  choice,
  float,
  hostName,
  ipAddress,
  int,
  nonEmpty,
  optFloat,
  option,
  serviceVersion,
  str,
} from '../types';
import { transportUrl } from '../transport-url';
import { primaryAddress } from '../host-address';
import { vifPluggingOptions } from './neutron';
import { blockDeviceOptions } from './cinder';

const ratio = (name: string): z.ZodType<number | undefined, string> =>
  option(optFloat(0, true), {
    help:
      `${name} allocation ratio written to Placement. Unset (the default) means the agent writes ` +
      `initial_${name.toLowerCase()}_allocation_ratio when it creates the inventory and afterwards ` +
      `keeps whatever ratio an operator set in Placement, as nova does since Stein.`,
    default: '',
    expected: 'a number > 0, or empty to keep the ratio set in Placement',
  });

const initialRatio = (name: string, value: string): z.ZodType<number, string> =>
  option(float(0, true), {
    help: `${name} allocation ratio used when the inventory is first created and ${name.toLowerCase()}_allocation_ratio is unset.`,
    default: value,
    expected: 'a number > 0',
  });

export const defaultSection = z.object({
  host: option(hostName(), {
    help: 'Name of this host: the compute node name, the RPC queue compute.<host>, the root provider name. Defaults to the machine hostname.',
    expected: "a host name (letters, digits, '.', '-', '_')",
    default: () => hostname(),
    defaultShown: '<this machine\'s hostname>',
  }),
  state_path: option(absPath(), {
    help: 'Directory for the agent state: the compute node uuid (compute_id), the journal, checkpoints.',
    default: '/var/lib/compute-agent',
    expected: 'an absolute path',
  }),
  instances_path: option(absPath(), {
    help: 'Directory holding instance files; its filesystem is reported as DISK_GB.',
    default: '$state_path/instances',
    expected: 'an absolute path',
  }),
  transport_url: option(transportUrl(), {
    help: 'oslo.messaging transport URL. Several brokers are separated by commas; percent-encode @ / , # in passwords.',
    default: 'rabbit://guest:guest@127.0.0.1:5672/',
    expected: 'rabbit://user:password@host:port[,user:password@host2:port]/vhost',
    secret: true,
  }),
  control_exchange: option(nonEmpty(), {
    help: 'AMQP topic exchange the RPC topics live in (nova uses "nova").',
    default: 'nova',
    expected: 'a non-empty exchange name',
  }),
  rpc_response_timeout: option(int(1), {
    help: 'Seconds the agent waits for the reply to an RPC call it makes (oslo.messaging rpc_response_timeout).',
    default: '60',
    expected: 'an integer >= 1 (seconds)',
  }),
  executor_thread_pool_size: option(int(1), {
    help:
      'RPC requests handled at once (oslo.messaging executor_thread_pool_size). Also the prefetch bound when ' +
      '[oslo_messaging_rabbit] rabbit_qos_prefetch_count is 0: the agent never takes unbounded work from the broker.',
    default: '64',
    expected: 'an integer >= 1',
  }),
  rpc_max_message_bytes: option(int(1024), {
    help:
      'Largest RPC request body the agent decodes. A larger call is answered with a failure naming the limit; a larger cast is logged and dropped (or dead-lettered).',
    default: '8388608',
    expected: 'an integer >= 1024 (bytes)',
  }),
  rpc_dead_letter_exchange: option(str(), {
    help:
      'When set, requests the agent cannot process (not JSON, no envelope, unknown method, bad arguments, too large) are republished, with the reason in the x-compute-agent-reason header, to this durable topic exchange and kept in a durable queue of the same name. Empty drops them after logging.',
    default: '',
    expected: 'an exchange name, or empty',
  }),
  rpc_ping_enabled: option(bool(), {
    help: 'Answer the oslo_rpc_server_ping call (version 1.0, no namespace) with "pong", as oslo.messaging servers do for health probes.',
    default: 'false',
    expected: 'true or false',
  }),
  compute_driver: option(
    z.string().transform((v, ctx) => {
      const t = v.trim();
      if (t === '') return undefined;
      if (/^[A-Za-z][A-Za-z0-9_.-]*$/.test(t)) return t;
      ctx.addIssue({ code: 'custom', message: 'not a driver name' });
      return z.NEVER;
    }),
    {
      help:
        'Virt driver that discovers this host and runs its instances: fake (the real host\'s inventory, simulated ' +
        'instances) or qemu (real VMs). No default: run, sync, plan and discover refuse to start without it, because ' +
        'a host that silently ran the fake driver would take real allocations for instances that do not exist.',
      default: '',
      expected: 'a registered driver name such as fake or qemu',
    },
  ),
  control_plane: option(choice(['standalone', 'nova'] as const), {
    help:
      'Who drives this host. standalone: the agent alone (outcomes as versioned notifications). nova: a real nova ' +
      'control plane; the agent registers as nova-compute through nova-conductor (service, compute node, heartbeats), ' +
      'saves every instance and migration step there, and takes the scheduler\'s claims instead of claiming itself.',
    default: 'standalone',
    expected: 'standalone or nova',
  }),
  report_interval: option(int(1), {
    help: 'Seconds between service heartbeats to nova-conductor (control_plane = nova); nova calls a service down after its service_down_time without one.',
    default: '10',
    expected: 'an integer >= 1 (seconds)',
  }),
  nova_service_version: option(serviceVersion(), {
    help:
      'nova-compute service version the agent registers with (control_plane = nova): a promise of that release\'s compute RPC ' +
      'and object versions. nova gates features and caps compute RPC by the lowest one, and from 2023.2 its services refuse to ' +
      'start beside computes older than their oldest supported release. auto: the release nova-conductor runs (its service ' +
      'version, asked at start-up). 64: Zed (compute RPC 6.1). 68: 2025.1 (compute RPC 6.4).',
    default: 'auto',
    expected: 'auto, 64 (Zed) or 68 (2025.1)',
  }),
  my_ip: option(ipAddress(), {
    help:
      "This host's IP address, as nova's my_ip: the ComputeNode's host_ip and the address a move's destination reports " +
      '(Migration dest_host). Defaults to the address of the interface the default route leaves by (IPv4 first).',
    default: () => primaryAddress(),
    defaultShown: "<this host's primary IPv4 address>",
    expected: 'an IPv4 or IPv6 address',
  }),
  reserved_host_memory_mb: option(int(0), {
    help: 'Memory (MiB) kept for the host: reported as MEMORY_MB reserved.',
    default: '512',
    expected: 'an integer >= 0',
  }),
  reserved_host_disk_mb: option(int(0), {
    help: 'Disk (MiB) kept for the host: reported as DISK_GB reserved, rounded up to whole GiB.',
    default: '0',
    expected: 'an integer >= 0',
  }),
  reserved_host_cpus: option(int(0), {
    help: 'Host CPUs kept for the host: reported as VCPU reserved.',
    default: '0',
    expected: 'an integer >= 0',
  }),
  cpu_allocation_ratio: ratio('CPU'),
  ram_allocation_ratio: ratio('RAM'),
  disk_allocation_ratio: ratio('DISK'),
  initial_cpu_allocation_ratio: initialRatio('CPU', '4.0'),
  initial_ram_allocation_ratio: initialRatio('RAM', '1.0'),
  initial_disk_allocation_ratio: initialRatio('DISK', '1.0'),
  update_resources_interval: option(auditIntervalType(), {
    help:
      'Seconds between audits (rediscover, sync Placement, check allocations). 0 means the default of 60; a negative value ' +
      'disables the periodic audit. The interval must divide a minute, an hour or a day evenly (cron steps); each host ' +
      'runs at its own offset within it, so a fleet does not audit in the same second.',
    default: '0',
    expected: 'an integer that divides 60, 3600 or 86400 evenly (e.g. 30, 60, 120, 300), 0 for 60, or negative to disable',
  }),
  shelved_offload_time: option(int(-1), {
    help:
      "Seconds a shelved server stays on this host (powered off, its disk and allocation kept) before it is offloaded " +
      "(nova's option of the same name): 0 offloads it at once, -1 never; unshelving a server still here starts it again.",
    default: '0',
    expected: 'an integer >= -1 (seconds; 0 at once, -1 never)',
  }),
  reclaim_instance_interval: option(int(), {
    help:
      "Seconds a soft-deleted server stays on this host, powered off with its disks, ports, volumes and allocations, before " +
      "this host deletes it for good (nova's option of the same name; nova-api soft-deletes only when its own value is above " +
      '0). A restore within that time starts it again. 0 or less: soft-deleted servers are kept until deleted or restored.',
    default: '0',
    expected: 'an integer (seconds; 0 or less: never reclaimed here)',
  }),
  sync_power_state_interval: option(int(), {
    help:
      "Seconds between power-state syncs (nova's option of the same name): the hypervisor's power state of each instance with " +
      'no task is recorded, an ACTIVE instance whose guest shut down or died is stopped, a STOPPED one whose guest runs is ' +
      'powered off. 0 means 60; a negative value disables the sync.',
    default: '600',
    expected: 'an integer (seconds; 0 for 60, negative to disable)',
  }),
  graceful_shutdown_timeout: option(int(0), {
    help: 'Seconds a SIGTERM waits for operations in flight before the agent exits; 0 waits forever.',
    default: '60',
    expected: 'an integer >= 0 (seconds)',
  }),
  ...vifPluggingOptions,
  ...blockDeviceOptions,
  debug: option(bool(), {
    help: 'Log at debug level (overrides log_level).',
    default: 'false',
    expected: 'true or false',
  }),
  log_level: option(choice(['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const), {
    help: 'Minimum level of the JSON log lines written to stdout (journald collects them).',
    default: 'info',
    expected: 'one of trace, debug, info, warn, error, fatal',
  }),
});
