/**
 * `get_diagnostics` (nova compute RPC 6.x, nova `compute/rpcapi.py`): what this host knows about
 * one of its instances, in the shape of nova's Diagnostics (nova `objects/diagnostics.py`): the
 * power state the driver reports, the driver's name, the vCPUs and memory the instance was given.
 * Fields nothing here measures (uptime, CPU, NIC and disk details) are left out. As nova-compute
 * does, an instance that is not running is refused.
 */
import { InvalidStateError } from '../../model/instance';
import type { FlowContext } from './flow-context';

export interface InstanceDiagnostics {
  readonly state: 'running';
  readonly driver: string;
  readonly num_cpus: number;
  /** In MiB. */
  readonly memory_details: { readonly maximum: number };
}

/** @throws InstanceNotFoundError (no record on this host), InvalidStateError (not running) */
export async function getDiagnostics(c: Pick<FlowContext, 'require' | 'driver'>, uuid: string): Promise<InstanceDiagnostics> {
  const rec = c.require(uuid);
  const { powerState } = await c.driver.getInfo(rec);
  if (powerState !== 'RUNNING') throw new InvalidStateError(uuid, 'get the diagnostics of', `power state ${powerState.toLowerCase()}`);
  return { state: 'running', driver: c.driver.name, num_cpus: rec.flavor.vcpus, memory_details: { maximum: rec.flavor.memory_mb } };
}
