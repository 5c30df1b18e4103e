/**
 * CPU probe: logical CPUs online, sockets, cores, threads per core, vendor, model, flags, NUMA
 * nodes and their CPUs.
 *
 * Sources, and why not systeminformation: `si.cpu()` runs `lscpu` and `dmidecode` (no timeout)
 * and may fall back to `execSync('cat /proc/cpuinfo')` for the clock speed, it cannot be pointed
 * at a fixture tree, and it has no NUMA topology. Everything here is in sysfs/procfs:
 * - online CPUs: /sys/devices/system/cpu/online (what the scheduler can use; VCPU total);
 * - topology: cpuN/topology/{physical_package_id,core_id} for each online CPU;
 * - vendor, model, flags: the first processor block of /proc/cpuinfo;
 * - architecture: /proc/sys/kernel/arch;
 * - NUMA: /sys/devices/system/node/online and nodeN/cpulist.
 */
import type { CpuFacts, NumaCpuFacts } from './facts';
import type { HostFs } from './host-fs';
import { parseCpuList, parseIntStrict, type Probe, type ProbeResult } from './probe';

const CPU = '/sys/devices/system/cpu';
const NODE = '/sys/devices/system/node';

interface CpuInfo {
  processors: number;
  vendor?: string;
  model?: string;
  flags: string[];
}

/**
 * The first processor block of /proc/cpuinfo, plus the number of processor blocks. Only the first
 * block is split into lines: on a big host the file is hundreds of kB of identical blocks.
 */
export function parseCpuInfo(text: string): CpuInfo {
  const info: CpuInfo = { processors: 0, flags: [] };
  for (let i = text.startsWith('processor') ? 0 : text.indexOf('\nprocessor'); i !== -1; i = text.indexOf('\nprocessor', i + 1)) {
    info.processors += 1;
  }
  const end = text.search(/\n\s*\n/);
  for (const line of (end === -1 ? text : text.slice(0, end)).split('\n')) {
    const idx = line.indexOf(':');
    if (idx < 0) continue;
    const key = line.slice(0, idx).trim().toLowerCase();
    const value = line.slice(idx + 1).trim();
    if (key === 'vendor_id') info.vendor = value;
    else if (key === 'model name') info.model = value;
    else if (key === 'flags' || key === 'features') info.flags = value.split(/\s+/).filter((f) => f !== '');
  }
  return info;
}

async function onlineCpus(fs: HostFs, cpuinfo: CpuInfo): Promise<number[] | undefined> {
  const online = await fs.readValue(`${CPU}/online`);
  if (online !== undefined) return parseCpuList(`${CPU}/online`, online);
  if (cpuinfo.processors > 0) return Array.from({ length: cpuinfo.processors }, (_, i) => i);
  return undefined;
}

async function topology(fs: HostFs, cpus: number[]): Promise<{ sockets: number; cores: number }> {
  const pairs = await Promise.all(
    cpus.map(async (cpu) => {
      const base = `${CPU}/cpu${cpu}/topology`;
      const pkg = await fs.readValue(`${base}/physical_package_id`);
      const core = await fs.readValue(`${base}/core_id`);
      // Without topology files (some containers and VMs) every CPU counts as its own core.
      return {
        pkg: pkg === undefined ? 0 : parseIntStrict(`${base}/physical_package_id`, pkg),
        core: core === undefined ? cpu : parseIntStrict(`${base}/core_id`, core),
      };
    }),
  );
  const sockets = new Set(pairs.map((p) => p.pkg));
  const cores = new Set(pairs.map((p) => `${p.pkg}:${p.core}`));
  return { sockets: sockets.size, cores: cores.size };
}

async function numaNodes(fs: HostFs): Promise<NumaCpuFacts[]> {
  const online = await fs.readValue(`${NODE}/online`);
  if (online === undefined) return [];
  const ids = parseCpuList(`${NODE}/online`, online);
  return Promise.all(
    ids.map(async (id) => {
      const path = `${NODE}/node${id}/cpulist`;
      const list = await fs.readValue(path);
      return { id, cpus: list === undefined ? [] : parseCpuList(path, list) };
    }),
  );
}

export const cpuProbe: Probe<CpuFacts> = {
  name: 'cpu',
  async run({ fs }): Promise<ProbeResult<CpuFacts>> {
    const text = await fs.read('/proc/cpuinfo');
    const info = parseCpuInfo(text ?? '');
    const cpus = await onlineCpus(fs, info);
    if (cpus === undefined || cpus.length === 0) {
      return { detected: false, reason: `neither ${CPU}/online nor /proc/cpuinfo lists a CPU` };
    }
    const [topo, nodes, arch] = await Promise.all([topology(fs, cpus), numaNodes(fs), fs.readValue('/proc/sys/kernel/arch')]);
    return {
      detected: true,
      data: {
        online: cpus.length,
        sockets: topo.sockets,
        cores: topo.cores,
        threadsPerCore: Math.max(1, Math.round(cpus.length / topo.cores)),
        ...(info.vendor ? { vendor: info.vendor } : {}),
        ...(info.model ? { model: info.model } : {}),
        ...(arch ? { arch } : {}),
        flags: [...new Set(info.flags)].sort(),
        numaNodes: nodes,
      },
    };
  },
};
