/**
 * The host-probe registry and one discovery pass: every probe by name, run concurrently, each
 * with its own deadline, isolated from the others (`Promise.all` over `runProbe`, which never
 * rejects).
 *
 * It is: the single entry point drivers use to look at real hardware. It is not: a cache; each
 * call probes again (a pass costs tens of milliseconds, and the tracker calls it once per audit).
 */
import type { Logger } from '../../lib/logging/logger';
import type { Clock } from '../../lib/clock';
import { cpuProbe } from './cpu';
import { diskProbe } from './disk';
import type { Exec } from './exec';
import { gpuProbe } from './gpu';
import type { HostFs } from './host-fs';
import { memoryProbe } from './memory';
import { nicProbe } from './nic';
import { runProbe, type Probe, type ProbeOptions, type ProbeOutcome } from './probe';

/** Every built-in probe, by name. */
export const HOST_PROBES = {
  cpu: cpuProbe,
  memory: memoryProbe,
  disk: diskProbe,
  gpu: gpuProbe,
  nic: nicProbe,
} as const;

export type HostProbeName = keyof typeof HOST_PROBES;
export const HOST_PROBE_NAMES = Object.keys(HOST_PROBES) as HostProbeName[];

type DataOf<P> = P extends Probe<infer T> ? T : never;

/** The outcome of each probe, by name. */
export type HostFacts = { readonly [K in HostProbeName]: ProbeOutcome<DataOf<(typeof HOST_PROBES)[K]>> };

export interface DiscoverOptions extends ProbeOptions {
  /** Deadline of each probe as a whole (ms). */
  readonly probeTimeoutMs: number;
  /** Probes the operator turned off: reported as not present. */
  readonly disabled?: readonly string[];
}

export interface DiscoverEnv {
  readonly fs: HostFs;
  readonly exec: Exec;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** Runs every probe once. Never rejects: a failed probe is an outcome, not an exception. */
export async function discoverHost(env: DiscoverEnv, opts: DiscoverOptions): Promise<HostFacts> {
  const disabled = new Set(opts.disabled ?? []);
  const options: ProbeOptions = { instancesPath: opts.instancesPath, commandTimeoutMs: opts.commandTimeoutMs };
  const run = <T>(name: HostProbeName, probe: Probe<T>): Promise<ProbeOutcome<T>> =>
    disabled.has(name)
      ? Promise.resolve({ status: 'absent', reason: 'disabled by [compute] disabled_host_probes', ms: 0 })
      : runProbe(probe, { ...env, logger: env.logger.child({ probe: name }), options }, opts.probeTimeoutMs);
  const [cpu, memory, disk, gpu, nic] = await Promise.all([
    run('cpu', HOST_PROBES.cpu),
    run('memory', HOST_PROBES.memory),
    run('disk', HOST_PROBES.disk),
    run('gpu', HOST_PROBES.gpu),
    run('nic', HOST_PROBES.nic),
  ]);
  return { cpu, memory, disk, gpu, nic };
}
