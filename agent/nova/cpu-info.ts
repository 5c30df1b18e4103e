/**
 * The ComputeNode's `cpu_info`: JSON shaped as nova's libvirt driver shapes it (`_get_cpu_info`):
 * `arch`, `model`, `vendor`, `topology` {`cells`, `sockets`, `cores`, `threads`} and `features`.
 * nova-api shows it in os-hypervisors, and the scheduler's ComputeCapabilitiesFilter matches flavor
 * extra specs such as `capabilities:cpu_info:features` against it.
 *
 * From the host's CPU facts (sysfs and /proc/cpuinfo, not libvirt): `vendor` is libvirt's name for
 * the vendor id (GenuineIntel: Intel); `model` is the CPU's model name as the kernel prints it
 * (libvirt would name its closest CPU model, which needs libvirt's CPU map); `topology` is per
 * libvirt's convention, sockets per NUMA cell, cores per socket, threads per core; `features` are
 * the kernel's flag names, sorted, with the few libvirt spells otherwise renamed.
 *
 * Not here: where the facts come from (the virt driver's host probes).
 */
import type { CpuFacts } from '../../virt-drivers/host/facts';

/** vendor_id of /proc/cpuinfo -> libvirt's vendor name. */
const VENDORS: Readonly<Record<string, string>> = { GenuineIntel: 'Intel', AuthenticAMD: 'AMD', HygonGenuine: 'Hygon', CentaurHauls: 'VIA' };

/** Kernel flag -> libvirt feature name, where they differ. */
const FEATURE_NAMES: Readonly<Record<string, string>> = { sse4_1: 'sse4.1', sse4_2: 'sse4.2', pclmulqdq: 'pclmuldq', tsc_deadline_timer: 'tsc-deadline' };

export interface CpuInfo {
  readonly arch: string;
  readonly model: string;
  readonly vendor: string;
  readonly topology: { readonly cells: number; readonly sockets: number; readonly cores: number; readonly threads: number };
  readonly features: readonly string[];
}

/** `cpu` as nova's cpu_info; `fallbackArch` when the facts do not name the architecture. */
export function cpuInfo(cpu: CpuFacts, fallbackArch = 'x86_64'): CpuInfo {
  const cells = Math.max(1, cpu.numaNodes.length);
  const sockets = Math.max(1, cpu.sockets);
  const perCell = sockets % cells === 0 ? sockets / cells : sockets;
  const threads = Math.max(1, cpu.threadsPerCore);
  const cores = Math.max(1, Math.round(cpu.cores / sockets));
  const features = [...new Set(cpu.flags.map((f) => FEATURE_NAMES[f] ?? f))].sort();
  return {
    arch: cpu.arch ?? fallbackArch,
    model: cpu.model ?? '',
    vendor: cpu.vendor === undefined ? '' : (VENDORS[cpu.vendor] ?? cpu.vendor),
    topology: { cells, sockets: perCell, cores, threads },
    features,
  };
}

/** The `cpu_info` string: the JSON of `cpuInfo`, or `{}` without CPU facts (nova's fake driver's value). */
export function cpuInfoJson(cpu: CpuFacts | undefined): string {
  return cpu ? JSON.stringify(cpuInfo(cpu)) : '{}';
}
