/**
 * `get_diagnostics` and `get_instance_diagnostics` (nova compute RPC 6.x, nova `compute/rpcapi.py`):
 * what this host knows about one of its instances. The first (the API's legacy form) in the shape
 * of nova's Diagnostics (nova `objects/diagnostics.py`): the power state the driver reports, the
 * driver's name, the vCPUs and memory the instance was given, fields nothing here measures left
 * out, and, as nova-compute does, an instance that is not running refused. The second (the API's
 * standard form since microversion 2.48) as nova's Diagnostics object itself.
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

/** nova's InstancePowerState values, by the driver's power state. */
const NOVA_POWER = { NOSTATE: 'pending', RUNNING: 'running', PAUSED: 'paused', SHUTDOWN: 'shutdown', CRASHED: 'crashed', SUSPENDED: 'suspended' } as const;

/** A nova object primitive of version 1.0 (every diagnostics object is still at 1.0 in nova 31). */
function novaObject(name: string, data: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return { 'nova_object.name': name, 'nova_object.namespace': 'nova', 'nova_object.version': '1.0', 'nova_object.data': { ...data }, 'nova_object.changes': Object.keys(data) };
}

/**
 * `get_instance_diagnostics` (microversion 2.48's standard form): nova's Diagnostics object, as the
 * libvirt driver fills it from what this host knows: the power state, uptime since launch, the
 * flavor's vCPUs and memory, one NIC per port (its MAC) and one disk per local root disk and
 * volume. Counters nothing here measures (CPU time, NIC and disk I/O) are null, as nova allows.
 * `driver` is `libvirt`: nova's enum has no value for a driver that runs QEMU without libvirt, and
 * these are the libvirt driver's fields; `hypervisor` says `qemu`. Any power state is answered.
 * @throws InstanceNotFoundError
 */
export async function getInstanceDiagnostics(c: Pick<FlowContext, 'require' | 'driver'>, uuid: string, now: () => number = Date.now): Promise<Record<string, unknown>> {
  const rec = c.require(uuid);
  const { powerState } = await c.driver.getInfo(rec);
  const macs = (rec.network_info ?? []).map((v) => v.address);
  const disks = (rec.image_ref ? 1 : 0) + (rec.volumes?.length ?? 0);
  const launched = rec.launched_at ? Date.parse(rec.launched_at) : NaN;
  return novaObject('Diagnostics', {
    state: NOVA_POWER[powerState],
    driver: 'libvirt',
    hypervisor: 'qemu',
    hypervisor_os: 'linux',
    uptime: Number.isFinite(launched) ? Math.max(0, Math.floor((now() - launched) / 1000)) : null,
    config_drive: false,
    memory_details: novaObject('MemoryDiagnostics', { maximum: rec.flavor.memory_mb, used: null }),
    cpu_details: Array.from({ length: rec.flavor.vcpus }, (_, id) => novaObject('CpuDiagnostics', { id, time: null, utilisation: null })),
    nic_details: macs.map((mac) => novaObject('NicDiagnostics', { mac_address: mac })),
    disk_details: Array.from({ length: disks }, () => novaObject('DiskDiagnostics', {})),
    num_cpus: rec.flavor.vcpus,
    num_nics: macs.length,
    num_disks: disks,
  });
}
