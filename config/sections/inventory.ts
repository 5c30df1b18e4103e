/**
 * The sections that shape what the host reports to Placement: `[compute]` (audit and heal policy,
 * host probes, where DISK_GB lives), `[devices]` (GPUs: vGPU types and classes, passthrough,
 * ignored devices) and `[network]` (physnets and bandwidth per interface, with neutron's names;
 * bandwidth only where Neutron does not report it itself).
 *
 * It is: declarations only. It is not: the probes or the provider-tree layout that read them
 * (`virt-drivers/`).
 */
import { z } from 'zod';
import { bool, choice, float, int, list, option, patternList } from '../types';

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
  report_bandwidth_inventory: option(bool(), {
    help:
      "Whether the NIC providers carry bandwidth inventory (NET_BW_EGR_KILOBIT_PER_SEC, NET_BW_IGR_KILOBIT_PER_SEC) from the link speed " +
      "or resource_provider_bandwidths. Leave it false where Neutron's placement service plugin reports bandwidth (the normal " +
      "OpenStack case): Neutron then puts providers of its own under this host's root provider and minimum-bandwidth ports are " +
      'allocated there; a second inventory here would be counted twice and never bound to a port. Set it true only in a cloud ' +
      "without Neutron's placement plugin. NIC facts (physnet and SR-IOV traits, SRIOV_NET_VF, the link speed in discover --facts) " +
      'are reported either way; packet-rate inventory (NET_PACKET_RATE_*) never is.',
    default: 'false',
    expected: 'true or false',
  }),
  resource_provider_bandwidths: option(patternList(/^[A-Za-z0-9_.@-]+:\d*:\d*$/, 'interface:egress:ingress'), {
    help: "Bandwidth (kbit/s) to report per interface, overriding the link speed, as in neutron's resource_provider_bandwidths; an empty direction uses the link speed, 0 reports none. Read only with report_bandwidth_inventory = true.",
    default: '',
    expected: 'a comma-separated list of <interface>:<egress kbps>:<ingress kbps>',
  }),
});
