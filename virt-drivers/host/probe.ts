/**
 * The probe contract, Nomad-fingerprinter style: one small probe per resource, each answering
 * "detected, with data", "not present, because ...", or failing with an error; and the runner
 * that gives every probe a deadline and isolates them from one another.
 *
 * It is: the boundary between hardware and the rest of the agent. A probe reads only through the
 * injected `HostFs` and `Exec`, so it runs unchanged on a fixture tree. It is not: where inventory
 * is decided; probes report facts (`facts.ts`), `layout/` turns them into providers.
 *
 * "Not present" and "failed" lead to different trees: an absent resource is removed from the
 * tree, a failed one is left as the tree already had it (one bad read must not withdraw capacity
 * that has allocations).
 */
import type { Logger } from '../../lib/logging/logger';
import type { Clock } from '../../lib/clock';
import type { Exec } from './exec';
import type { HostFs } from './host-fs';

/** What a probe answers when it did not fail. */
export type ProbeResult<T> =
  | { readonly detected: true; readonly data: T; readonly warnings?: readonly string[] }
  | { readonly detected: false; readonly reason: string };

/** Knobs probes read; the driver fills them from its configuration. */
export interface ProbeOptions {
  /** `[DEFAULT] instances_path`, for the disk probe. */
  readonly instancesPath: string;
  /** Deadline for each command a probe runs (ms). */
  readonly commandTimeoutMs: number;
}

/** What a probe is given. Everything is injected; a probe touches no globals. */
export interface ProbeEnv {
  readonly fs: HostFs;
  readonly exec: Exec;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: ProbeOptions;
  /** Aborted when the probe's deadline passes; pass it to `exec.run`. */
  readonly signal: AbortSignal;
}

/** A host probe. `run` must not throw for "not present": it returns `detected: false`. */
export interface Probe<T> {
  readonly name: string;
  /**
   * Looks at the host.
   * @throws an Error (often `ProbeDataError`, `HostReadError` or a `CommandError`) when the
   * resource exists but could not be read or understood
   */
  run(env: ProbeEnv): Promise<ProbeResult<T>>;
}

/** How one probe ended, as the runner saw it. */
export type ProbeOutcome<T> =
  | { readonly status: 'detected'; readonly data: T; readonly warnings: readonly string[]; readonly ms: number }
  | { readonly status: 'absent'; readonly reason: string; readonly ms: number }
  | { readonly status: 'failed'; readonly error: ProbeError; readonly ms: number };

/** A probe failed; `cause` holds what went wrong underneath. */
export class ProbeError extends Error {
  constructor(
    readonly probe: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${probe} probe: ${message}`, options);
    this.name = 'ProbeError';
  }
}

/** A probe did not finish before its deadline; its result is ignored even if it comes later. */
export class ProbeTimeoutError extends ProbeError {
  constructor(probe: string, readonly timeoutMs: number) {
    super(probe, `no answer within ${timeoutMs} ms`);
    this.name = 'ProbeTimeoutError';
  }
}

/** A file or tool output did not have the expected form. Names the source and what was expected. */
export class ProbeDataError extends Error {
  constructor(
    readonly source: string,
    readonly expected: string,
    readonly got: string,
  ) {
    super(`${source}: expected ${expected}, got ${JSON.stringify(got.length > 80 ? `${got.slice(0, 77)}...` : got)}`);
    this.name = 'ProbeDataError';
  }
}

/** Runs one probe with a deadline; never rejects. */
export async function runProbe<T>(
  probe: Probe<T>,
  env: Omit<ProbeEnv, 'signal'>,
  timeoutMs: number,
): Promise<ProbeOutcome<T>> {
  const started = env.clock.now();
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new ProbeTimeoutError(probe.name, timeoutMs);
      controller.abort(err);
      reject(err);
    }, timeoutMs);
  });
  const ms = (): number => env.clock.now() - started;
  try {
    const result = await Promise.race([probe.run({ ...env, signal: controller.signal }), deadline]);
    if (result.detected) {
      const warnings = [...(result.warnings ?? [])];
      for (const w of warnings) env.logger.warn({ probe: probe.name }, w);
      return { status: 'detected', data: result.data, warnings, ms: ms() };
    }
    env.logger.debug({ probe: probe.name, reason: result.reason }, 'not present');
    return { status: 'absent', reason: result.reason, ms: ms() };
  } catch (e) {
    const error =
      e instanceof ProbeError ? e : new ProbeError(probe.name, e instanceof Error ? e.message : String(e), { cause: e });
    env.logger.warn({ probe: probe.name, err: error.message }, 'host probe failed; its part of the tree is left as it was');
    return { status: 'failed', error, ms: ms() };
  } finally {
    clearTimeout(timer);
  }
}

/** Parses a decimal integer from a sysfs/procfs value. @throws ProbeDataError */
export function parseIntStrict(source: string, raw: string | undefined, expected = 'an integer'): number {
  const v = (raw ?? '').trim();
  if (!/^-?\d+$/.test(v)) throw new ProbeDataError(source, expected, v);
  return Number(v);
}

/** Parses a kernel CPU list ("0-3,8,10-11"). @throws ProbeDataError */
export function parseCpuList(source: string, raw: string): number[] {
  const v = raw.trim();
  if (v === '') return [];
  const out: number[] = [];
  for (const part of v.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new ProbeDataError(source, 'a CPU list such as 0-3,8', v);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo) throw new ProbeDataError(source, 'a CPU list such as 0-3,8', v);
    for (let i = lo; i <= hi; i++) out.push(i);
  }
  return out;
}
