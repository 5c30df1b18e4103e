/**
 * Every option the agent reads, with nova's names wherever nova has the option, its type, default,
 * and help text. This table is the single source for validation (`loader.ts`), the example file
 * (`compute-agent.conf.example`, checked by a test to document every option here) and the masking
 * of secrets.
 *
 * Defaults are written as they would appear in the file, so `$state_path` interpolation and the
 * example file treat them exactly like operator input.
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
  httpUrl,
  int,
  list,
  listenAddress,
  nonEmpty,
  optFloat,
  option,
  optPath,
  patternList,
  str,
} from './types';
import { qemuSection } from './qemu';
import { transportUrl } from './transport-url';

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

export const AUTH_TYPES = ['noauth', 'password', 'v3applicationcredential'] as const;

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
  compute_driver: option(
    z.string().transform((v, ctx) => {
      const t = v.trim();
      if (/^[A-Za-z][A-Za-z0-9_.-]*$/.test(t)) return t;
      ctx.addIssue({ code: 'custom', message: 'not a driver name' });
      return z.NEVER;
    }),
    {
      help: 'Virt driver that discovers this host and runs its instances (see `compute-agent discover`).',
      default: 'fake',
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
  nova_service_version: option(int(1), {
    help: 'nova-compute service version the agent registers with (control_plane = nova). nova gates features and caps compute RPC by the lowest one; 64 is Zed.',
    default: '64',
    expected: 'an integer >= 1',
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
  graceful_shutdown_timeout: option(int(0), {
    help: 'Seconds a SIGTERM waits for operations in flight before the agent exits; 0 waits forever.',
    default: '60',
    expected: 'an integer >= 0 (seconds)',
  }),
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

export const placementSection = z.object({
  auth_type: option(choice(AUTH_TYPES), {
    help: 'How to authenticate to Placement: noauth (fixed token "admin", for noauth2 deployments), password or v3applicationcredential (keystone v3).',
    default: 'noauth',
    expected: 'one of noauth, password, v3applicationcredential',
  }),
  auth_url: option(httpUrl(), {
    help: 'Keystone endpoint, e.g. https://keystone.example:5000/v3.',
    default: '',
    expected: 'an http(s) URL',
  }),
  username: option(str(), { help: 'Keystone user (auth_type = password).', default: '', expected: 'a user name' }),
  password: option(str(), {
    help: 'Keystone password (auth_type = password). The value runs to the end of the line; ; and # are part of it.',
    default: '',
    expected: 'a password',
    secret: true,
  }),
  project_name: option(str(), { help: 'Keystone project (auth_type = password).', default: '', expected: 'a project name' }),
  user_domain_name: option(str(), { help: 'Domain of the user.', default: 'Default', expected: 'a domain name' }),
  project_domain_name: option(str(), { help: 'Domain of the project.', default: 'Default', expected: 'a domain name' }),
  application_credential_id: option(str(), {
    help: 'Application credential id (auth_type = v3applicationcredential).',
    default: '',
    expected: 'an application credential id',
  }),
  application_credential_secret: option(str(), {
    help: 'Application credential secret (auth_type = v3applicationcredential).',
    default: '',
    expected: 'a secret',
    secret: true,
  }),
  region_name: option(str(), { help: 'Region to pick from the service catalog.', default: '', expected: 'a region name' }),
  valid_interfaces: option(list(), {
    help: 'Catalog interfaces to try, in order.',
    default: 'internal,public',
    expected: 'a comma-separated list of internal, public, admin',
  }),
  endpoint_override: option(httpUrl(), {
    help: 'Placement URL, bypassing the catalog. With auth_type = noauth it defaults to http://127.0.0.1:8778.',
    default: '',
    expected: 'an http(s) URL such as http://127.0.0.1:8778',
  }),
  cafile: option(optPath(), {
    help: 'CA bundle to verify Placement and keystone over https; empty uses the system store.',
    default: '',
    expected: 'an absolute path',
  }),
  timeout: option(float(0, true), {
    help: 'Seconds before a Placement request is abandoned.',
    default: '30',
    expected: 'a number > 0 (seconds)',
  }),
});

/** Host probe names, as `virt-drivers/host/discover.ts` registers them. */
export const HOST_PROBE_NAMES = ['cpu', 'memory', 'disk', 'gpu', 'nic'] as const;

export const computeSection = z.object({
  heal_allocations_grace: option(int(0), {
    help:
      'Seconds an allocation must stay orphaned (or missing) across audits before heal acts on it. A move between hosts ' +
      'looks orphaned on the source for a moment (the destination swapped the allocations before the source heard of ' +
      'the move); healing it then would remove the allocation of a running instance.',
    default: '600',
    expected: 'an integer >= 0 (seconds)',
  }),
  heal_allocations: option(choice(['report', 'heal'] as const), {
    help:
      'What the audit does when allocations on this host do not match its instances: report logs orphaned and missing ' +
      'allocations; heal also removes orphaned ones from this host and writes missing ones. Consumers with an operation ' +
      'in flight are never touched.',
    default: 'report',
    expected: 'report or heal',
  }),
  resource_provider_association_refresh: option(int(0), {
    help: 'Seconds between forced refreshes of cached traits, aggregates and inventories of our providers; 0 disables the forced refresh (a 409 still refreshes).',
    default: '300',
    expected: 'an integer >= 0 (seconds)',
  }),
  probe_timeout: option(float(0, true), {
    help: 'Seconds each host probe (cpu, memory, disk, gpu, nic) may take. A probe that runs over is abandoned and its part of the provider tree is left as it was; the other probes still report.',
    default: '10',
    expected: 'a number > 0 (seconds)',
  }),
  probe_command_timeout: option(float(0, true), {
    help: 'Seconds each tool a probe runs (nvidia-smi) may take before it is killed. Keep it below probe_timeout so a hung tool degrades one device instead of the whole probe.',
    default: '5',
    expected: 'a number > 0 (seconds)',
  }),
  disabled_host_probes: option(patternList(new RegExp(`^(${HOST_PROBE_NAMES.join('|')})$`), HOST_PROBE_NAMES.join(' or ')), {
    help: 'Host probes not to run; what they would report is treated as not present (for example gpu on a host whose GPUs nova must not see).',
    default: '',
    expected: `a comma-separated list of ${HOST_PROBE_NAMES.join(', ')}`,
  }),
  disk_gb_on_root: option(choice(['auto', 'true', 'false'] as const), {
    help: 'Whether the root provider reports DISK_GB for the instances_path filesystem. auto: yes, unless the provider tree holds a sharing provider (trait MISC_SHARES_VIA_AGGREGATE, DISK_GB inventory) in one of the root provider\'s aggregates; true: always; false: never (storage is served by a sharing provider).',
    default: 'auto',
    expected: 'auto, true or false',
  }),
});

export const devicesSection = z.object({
  enabled_mdev_types: option(patternList(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, 'an mdev type name such as nvidia-35'), {
    help: 'Mediated-device (vGPU) types offered, in order of preference: a GPU offering one of them is reported as VGPU (or its mdev_classes class) with total = existing + available_instances of the first listed type it supports. Empty: no vGPU.',
    default: '',
    expected: 'a comma-separated list of mdev type names such as nvidia-35,nvidia-36',
  }),
  mdev_classes: option(patternList(/^[A-Za-z0-9][A-Za-z0-9_.-]*:(VGPU|CUSTOM_[A-Z0-9_]+)$/, 'type:CLASS'), {
    help: "Resource class per mdev type (nova's [mdev_<type>] mdev_class); types not listed use VGPU.",
    default: '',
    expected: 'a comma-separated list of <mdev type>:<VGPU or CUSTOM_NAME>',
  }),
  vgpu_provider_layout: option(choice(['per_gpu', 'root'] as const), {
    help: "Where vGPU inventory lives: per_gpu (one child provider per physical GPU, nova's layout since Stein) or root (the pre-Stein layout, all vGPUs on the compute node provider). Switching moves existing allocations (a reshape).",
    default: 'per_gpu',
    expected: 'per_gpu or root',
  }),
  report_passthrough_gpus: option(bool(), {
    help: 'Report GPUs that offer neither an enabled mdev type nor MIG instances as PGPU (whole-device passthrough), one child provider each.',
    default: 'true',
    expected: 'true or false',
  }),
  ignored_devices: option(list(), {
    help: 'GPUs (PCI address 0000:3b:00.0) and network interfaces (name) never reported, whatever the probes find.',
    default: '',
    expected: 'a comma-separated list of PCI addresses and interface names',
  }),
});

export const networkSection = z.object({
  physical_device_mappings: option(patternList(/^[A-Za-z0-9_.-]+:[A-Za-z0-9_.@-]+$/, 'physnet:interface'), {
    help: "Physical networks each interface reaches, as in neutron's [sriov_nic] physical_device_mappings; an interface may be listed under several physnets. Each becomes a CUSTOM_PHYSNET_<NAME> trait on the interface's provider.",
    default: '',
    expected: 'a comma-separated list of <physnet>:<interface>',
  }),
  resource_provider_bandwidths: option(patternList(/^[A-Za-z0-9_.@-]+:\d*:\d*$/, 'interface:egress:ingress'), {
    help: "Bandwidth (kbit/s) to report per interface, overriding the link speed, as in neutron's resource_provider_bandwidths; an empty direction uses the link speed, 0 reports none.",
    default: '',
    expected: 'a comma-separated list of <interface>:<egress kbps>:<ingress kbps>',
  }),
});

export const fakeSection = z.object({
  instances_file: option(optPath(), {
    help:
      'Where the fake hypervisor keeps its instances, so they outlive an agent restart as real VMs do (crash tests set it, ' +
      'e.g. $state_path/fake-instances.json). Empty keeps them in memory only: they vanish with the agent.',
    default: '',
    expected: 'an absolute path, or empty',
  }),
  host_file: option(optPath(), {
    help: 'YAML or JSON file describing the host the fake driver reports (CPU, memory, disk, GPUs, NICs, NUMA, sharing storage); re-read when it changes. Empty: the fake driver reports the real host from its probes.',
    default: '',
    expected: 'an absolute path',
  }),
});

export const rabbitSection = z.object({
  heartbeat_timeout_threshold: option(int(0), {
    help: 'Seconds without broker traffic before the connection is declared dead; 0 disables AMQP heartbeats.',
    default: '60',
    expected: 'an integer >= 0 (seconds)',
  }),
  ssl: option(bool(), { help: 'Connect with TLS (amqps).', default: 'false', expected: 'true or false' }),
  ssl_ca_file: option(optPath(), { help: 'CA bundle for the broker certificate.', default: '', expected: 'an absolute path' }),
  ssl_cert_file: option(optPath(), { help: 'Client certificate (PEM).', default: '', expected: 'an absolute path' }),
  ssl_key_file: option(optPath(), { help: 'Client key (PEM).', default: '', expected: 'an absolute path' }),
  rabbit_quorum_queue: option(bool(), {
    help: 'Declare the RPC queues as quorum queues (x-queue-type=quorum), as oslo does; must match the rest of the deployment.',
    default: 'false',
    expected: 'true or false',
  }),
  amqp_durable_queues: option(bool(), {
    help: 'Declare durable queues and exchanges; must match the rest of the deployment.',
    default: 'false',
    expected: 'true or false',
  }),
  amqp_auto_delete: option(bool(), {
    help: 'Declare auto-delete queues and exchanges; must match the rest of the deployment.',
    default: 'false',
    expected: 'true or false',
  }),
  rabbit_ha_queues: option(bool(), {
    help: 'Declare the RPC queues with x-ha-policy=all (legacy mirrored queues), as oslo does; must match the rest of the deployment. Cannot be combined with rabbit_quorum_queue.',
    default: 'false',
    expected: 'true or false',
  }),
  rabbit_quorum_delivery_limit: option(int(0), {
    help: 'x-delivery-limit of quorum queues (with rabbit_quorum_queue); 0 sets none. Must match the rest of the deployment.',
    default: '0',
    expected: 'an integer >= 0',
  }),
  rabbit_quorum_max_memory_length: option(int(0), {
    help: 'x-max-in-memory-length of quorum queues (with rabbit_quorum_queue); 0 sets none. oslo.messaging 14 spells it rabbit_quroum_max_memory_length.',
    default: '0',
    expected: 'an integer >= 0',
  }),
  rabbit_quorum_max_memory_bytes: option(int(0), {
    help: 'x-max-in-memory-bytes of quorum queues (with rabbit_quorum_queue); 0 sets none. oslo.messaging 14 spells it rabbit_quroum_max_memory_bytes.',
    default: '0',
    expected: 'an integer >= 0',
  }),
  rabbit_transient_queues_ttl: option(int(1), {
    help: 'Seconds an unused reply or fanout queue lives before RabbitMQ deletes it (x-expires).',
    default: '1800',
    expected: 'an integer >= 1 (seconds)',
  }),
  rabbit_qos_prefetch_count: option(int(0), {
    help: 'Unacknowledged RPC requests the broker may push to the agent; 0 means DEFAULT.executor_thread_pool_size (oslo: unlimited).',
    default: '0',
    expected: 'an integer >= 0',
  }),
  rabbit_retry_interval: option(int(1), {
    help: 'Seconds before the first reconnection attempt after the broker connection is lost.',
    default: '1',
    expected: 'an integer >= 1 (seconds)',
  }),
  rabbit_retry_backoff: option(int(0), {
    help: 'Seconds added to the delay for every further reconnection attempt.',
    default: '2',
    expected: 'an integer >= 0 (seconds)',
  }),
  rabbit_interval_max: option(int(1), {
    help: 'Longest delay between reconnection attempts.',
    default: '30',
    expected: 'an integer >= 1 (seconds)',
  }),
  kombu_failover_strategy: option(choice(['round-robin', 'shuffle'] as const), {
    help: 'How the next broker of transport_url is chosen after a connection failure.',
    default: 'round-robin',
    expected: 'round-robin or shuffle',
  }),
  kombu_reconnect_delay: option(float(0), {
    help: 'Seconds to wait before consuming again after the broker cancelled a consumer (queue deleted or failed over).',
    default: '1.0',
    expected: 'a number >= 0 (seconds)',
  }),
  kombu_missing_consumer_retry_timeout: option(int(1), {
    help: 'Seconds the agent keeps retrying a reply whose reply queue does not exist (yet) before abandoning it.',
    default: '60',
    expected: 'an integer >= 1 (seconds)',
  }),
});

export const metricsSection = z.object({
  listen: option(listenAddress(), {
    help: 'Address of the HTTP endpoint serving /metrics (Prometheus) and /healthz; empty disables it. Keep it on loopback or a management network: it has no authentication.',
    default: '127.0.0.1:9180',
    expected: 'host:port (e.g. 127.0.0.1:9180), or empty',
  }),
});

export const configSchema = z.object({
  DEFAULT: defaultSection,
  placement: placementSection,
  compute: computeSection,
  devices: devicesSection,
  network: networkSection,
  fake: fakeSection,
  qemu: qemuSection,
  oslo_messaging_rabbit: rabbitSection,
  metrics: metricsSection,
});

/** The validated, typed configuration the agent runs with. */
export type AgentConfig = z.output<typeof configSchema>;
export type SectionName = keyof AgentConfig;
export const SECTION_NAMES = Object.keys(configSchema.shape) as SectionName[];
