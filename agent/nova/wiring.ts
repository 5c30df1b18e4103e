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
import { NOVA_OBJECT_VERSIONS } from './versions';

export interface NovaParts {
  readonly conductor: ConductorClient;
  readonly service: NovaService;
  readonly controlPlane: NovaControlPlane;
}

export function createNovaParts(config: AgentConfig, client: RpcClient, logger: Logger): NovaParts {
  const d = config.DEFAULT;
  const conductor = new ConductorClient({ client, exchange: d.control_exchange, timeoutMs: d.rpc_response_timeout * 1000, versions: NOVA_OBJECT_VERSIONS });
  const service = new NovaService({ conductor, host: d.host, serviceVersion: d.nova_service_version, reportIntervalMs: d.report_interval * 1000, logger, pingTimeoutMs: d.rpc_response_timeout * 1000 });
  const controlPlane = new NovaControlPlane({ conductor, host: d.host, logger });
  return { conductor, service, controlPlane };
}

/** The root provider's inventory as nova's ComputeNode fields (totals; ratios as Placement has them). */
export function computeNodeFacts(config: AgentConfig, tracker: ResourceTracker): ComputeNodeFacts {
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
    hypervisor_type: d.compute_driver === 'qemu' ? 'QEMU' : d.compute_driver,
    hypervisor_version: 1,
  };
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
