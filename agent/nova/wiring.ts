/**
 * Nova mode's parts (control_plane = nova), built from the configuration over the agent's RPC
 * client: the conductor client, the service registration with its heartbeat, the control plane
 * the compute flows report to, and the compute node's capacity from the provider tree.
 */
import type { AgentConfig } from '../../config/schema';
import type { ResourceTracker } from '../../tracker/tracker';
import type { InstanceRecord } from '../../model/instance';
import type { Logger } from '../../lib/logging/logger';
import type { RpcClient } from '../rpc/endpoint/client';
import { ConductorClient } from './conductor';
import { NovaControlPlane } from './control-plane';
import { NovaService, type ComputeNodeFacts, type NodeUsage } from './service';
import { ZED } from './releases';
import { cpuInfoJson } from './cpu-info';
import type { VirtDriver } from '../../virt-drivers/driver';
import type { CpuFacts } from '../../virt-drivers/host/facts';

export interface NovaParts {
  readonly conductor: ConductorClient;
  readonly service: NovaService;
  readonly controlPlane: NovaControlPlane;
}

export function createNovaParts(config: AgentConfig, client: RpcClient, logger: Logger): NovaParts {
  const d = config.DEFAULT;
  // Zed's manifest until registration picks the release: every class in it is as old or older than 2025.1's.
  const conductor = new ConductorClient({ client, exchange: d.control_exchange, timeoutMs: d.rpc_response_timeout * 1000, versions: ZED.objects });
  const service = new NovaService({ conductor, host: d.host, serviceVersion: d.nova_service_version, hostIp: d.my_ip, reportIntervalMs: d.report_interval * 1000, logger, pingTimeoutMs: d.rpc_response_timeout * 1000 });
  const controlPlane = new NovaControlPlane({ conductor, host: d.host, myIp: d.my_ip, computeNodeId: () => service.computeNodeId, logger, consoles: config.vnc.enabled || config.serial_console.enabled });
  return { conductor, service, controlPlane };
}

/**
 * The root provider's inventory as nova's ComputeNode fields (totals; ratios as Placement has
 * them), with the driver's hypervisor version and the CPU of its last host facts.
 */
export function computeNodeFacts(config: AgentConfig, tracker: ResourceTracker, driver: VirtDriver): ComputeNodeFacts {
  const root = tracker.ourProviders().find((p) => p.uuid === tracker.rootUuid);
  const inv = root?.inventories ?? {};
  const total = (rc: string): number => inv[rc]?.total ?? 0;
  const ratio = (rc: string, fallback: number): number => inv[rc]?.allocation_ratio ?? fallback;
  const d = config.DEFAULT;
  return {
    vcpus: total('VCPU'),
    memory_mb: total('MEMORY_MB'),
    local_gb: total('DISK_GB'),
    cpu_allocation_ratio: ratio('VCPU', d.cpu_allocation_ratio ?? d.initial_cpu_allocation_ratio),
    ram_allocation_ratio: ratio('MEMORY_MB', d.ram_allocation_ratio ?? d.initial_ram_allocation_ratio),
    disk_allocation_ratio: ratio('DISK_GB', d.disk_allocation_ratio ?? d.initial_disk_allocation_ratio),
    hypervisor_type: driver.name === 'qemu' ? 'QEMU' : driver.name,
    hypervisor_version: driver.hypervisorVersion?.() ?? 0,
    cpu_info: cpuInfoJson(cpuFacts(driver)),
  };
}

function cpuFacts(driver: VirtDriver): CpuFacts | undefined {
  const cpu = driver.lastHostFacts?.()?.cpu;
  return cpu?.status === 'detected' ? cpu.data : undefined;
}

/** What `instances` (this host's records, incoming moves included: they hold a claim here) use. */
export function usageOf(instances: readonly InstanceRecord[]): NodeUsage {
  let vcpus = 0;
  let memory = 0;
  let disk = 0;
  for (const r of instances) {
    const f = r.migration?.role === 'dest' && r.migration.new_flavor ? r.migration.new_flavor : r.flavor;
    vcpus += f.vcpus;
    memory += f.memory_mb;
    disk += f.root_gb + f.ephemeral_gb;
  }
  return { vcpus_used: vcpus, memory_mb_used: memory, local_gb_used: disk, running_vms: instances.length };
}
