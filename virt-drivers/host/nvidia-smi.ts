/**
 * nvidia-smi: the GPU list (`--query-gpu` CSV) and MIG GPU/compute instances (`mig -lgi`,
 * `mig -lci`), run through the `Exec` port with a deadline.
 *
 * It is: command lines and parsers for nvidia-smi's output. It is not: NVML; nvidia-smi is the
 * tool every NVIDIA host has, and a hung driver shows up as a hung nvidia-smi that we can kill
 * (systeminformation runs it with execFileSync and no timeout, which would freeze the daemon).
 *
 * Parsers reject output of the wrong form with a `ProbeDataError` naming the command, the line
 * and what was expected; they never guess.
 */
import { CommandFailedError, type Exec } from './exec';
import type { MigProfileFacts } from './facts';
import { naturalCompare } from './natural-order';
import { normalizePciAddress } from './pci';
import { ProbeDataError } from './probe';

export const NVIDIA_SMI = 'nvidia-smi';

/** Queried columns, in this order; the CSV parser relies on it. */
export const GPU_QUERY_FIELDS = ['index', 'pci.bus_id', 'uuid', 'name', 'memory.total', 'mig.mode.current', 'compute_cap'] as const;

export const GPU_QUERY_ARGS = [`--query-gpu=${GPU_QUERY_FIELDS.join(',')}`, '--format=csv,noheader,nounits'] as const;
export const MIG_GI_ARGS = ['mig', '-lgi'] as const;
export const MIG_CI_ARGS = ['mig', '-lci'] as const;

/** One row of the `--query-gpu` CSV. */
export interface NvidiaGpuRow {
  readonly index: number;
  readonly address: string;
  readonly uuid: string;
  readonly name: string;
  readonly memoryMb?: number;
  readonly migEnabled: boolean;
  readonly computeCapability?: string;
}

const NA = /^\[?N\/A\]?$|^\[Not Supported\]$|^$/;

/** Parses the `--query-gpu` CSV (noheader, nounits). @throws ProbeDataError */
export function parseGpuQuery(text: string): NvidiaGpuRow[] {
  const source = `${NVIDIA_SMI} ${GPU_QUERY_ARGS.join(' ')}`;
  const rows: NvidiaGpuRow[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const cols = line.split(',').map((c) => c.trim());
    if (cols.length !== GPU_QUERY_FIELDS.length) {
      throw new ProbeDataError(source, `${GPU_QUERY_FIELDS.length} comma-separated columns (${GPU_QUERY_FIELDS.join(', ')})`, line);
    }
    const [index = '', bus = '', uuid = '', name = '', memory = '', mig = '', cc = ''] = cols;
    if (!/^\d+$/.test(index)) throw new ProbeDataError(`${source} (index)`, 'a GPU index', line);
    if (!NA.test(memory) && !/^\d+$/.test(memory)) throw new ProbeDataError(`${source} (memory.total)`, 'MiB without units', line);
    if (!/^(Enabled|Disabled)$/.test(mig) && !NA.test(mig)) throw new ProbeDataError(`${source} (mig.mode.current)`, 'Enabled, Disabled or [N/A]', line);
    if (!NA.test(cc) && !/^\d+\.\d+$/.test(cc)) throw new ProbeDataError(`${source} (compute_cap)`, 'a version such as 9.0', line);
    rows.push({
      index: Number(index),
      address: normalizePciAddress(`${source} (pci.bus_id)`, bus),
      uuid,
      name,
      ...(NA.test(memory) ? {} : { memoryMb: Number(memory) }),
      migEnabled: mig === 'Enabled',
      ...(NA.test(cc) ? {} : { computeCapability: cc }),
    });
  }
  return rows;
}

interface GpuInstance {
  gpu: number;
  profile: string;
  id: number;
}

const GI_ROW = /^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s+\|$/;
const CI_ROW = /^\|\s+(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s+\|$/;

function tableRows(text: string, header: string, none: RegExp, command: string): string[] | undefined {
  if (none.test(text)) return undefined;
  if (!text.includes(header)) throw new ProbeDataError(command, `a table headed "${header}"`, text.trim().split('\n')[0] ?? '');
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /^\|\s+\d/.test(l));
}

/** Parses `nvidia-smi mig -lgi`. @throws ProbeDataError */
export function parseGpuInstances(text: string): GpuInstance[] {
  const command = `${NVIDIA_SMI} ${MIG_GI_ARGS.join(' ')}`;
  const rows = tableRows(text, 'GPU instances:', /No GPU instances found/i, command) ?? [];
  return rows.map((row) => {
    const m = GI_ROW.exec(row);
    if (!m) throw new ProbeDataError(command, 'a row "| GPU  MIG <profile>  <profile id>  <instance id>  <start>:<size> |"', row);
    return { gpu: Number(m[1]), profile: m[2] ?? '', id: Number(m[4]) };
  });
}

/** Parses `nvidia-smi mig -lci` into the set of "<gpu>/<gpu instance id>" that have a compute instance. @throws ProbeDataError */
export function parseComputeInstances(text: string): Set<string> {
  const command = `${NVIDIA_SMI} ${MIG_CI_ARGS.join(' ')}`;
  const rows = tableRows(text, 'Compute instances:', /No compute instances found/i, command) ?? [];
  const out = new Set<string>();
  for (const row of rows) {
    const m = CI_ROW.exec(row);
    if (!m) throw new ProbeDataError(command, 'a row "| GPU  <GPU instance id>  MIG <profile>  <profile id>  <instance id>  <start>:<size> |"', row);
    out.add(`${m[1]}/${m[2]}`);
  }
  return out;
}

/** MIG profiles per GPU index: GPU instances with at least one compute instance, counted by profile. */
export function migProfilesByGpu(gis: GpuInstance[], withCi: Set<string>): Map<number, MigProfileFacts[]> {
  const counts = new Map<number, Map<string, number>>();
  for (const gi of gis) {
    if (!withCi.has(`${gi.gpu}/${gi.id}`)) continue;
    const perGpu = counts.get(gi.gpu) ?? new Map<string, number>();
    perGpu.set(gi.profile, (perGpu.get(gi.profile) ?? 0) + 1);
    counts.set(gi.gpu, perGpu);
  }
  const out = new Map<number, MigProfileFacts[]>();
  for (const [gpu, perGpu] of counts) {
    out.set(
      gpu,
      [...perGpu].map(([profile, count]) => ({ profile, count })).sort((a, b) => naturalCompare(a.profile, b.profile)),
    );
  }
  return out;
}

/** nvidia-smi exits non-zero when a MIG listing is empty; its text says so. */
async function runListing(exec: Exec, args: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<string> {
  try {
    return (await exec.run(NVIDIA_SMI, args, { timeoutMs, ...(signal ? { signal } : {}) })).stdout;
  } catch (e) {
    if (e instanceof CommandFailedError && /No (GPU|compute) instances found/i.test(`${e.stdout}\n${e.stderr}`)) {
      return `${e.stdout}\n${e.stderr}`;
    }
    throw e;
  }
}

/** What nvidia-smi says about the GPUs it drives. */
export interface NvidiaReport {
  readonly gpus: readonly NvidiaGpuRow[];
  /** MIG profiles by PCI address, for GPUs with MIG enabled. */
  readonly mig: ReadonlyMap<string, readonly MigProfileFacts[]>;
}

/**
 * Runs nvidia-smi: the GPU query, then the MIG listings when a GPU has MIG enabled.
 * @throws CommandError (not found, timeout, failure), ProbeDataError (unexpected output)
 */
export async function queryNvidia(exec: Exec, timeoutMs: number, signal?: AbortSignal): Promise<NvidiaReport> {
  const opts = { timeoutMs, ...(signal ? { signal } : {}) };
  const gpus = parseGpuQuery((await exec.run(NVIDIA_SMI, GPU_QUERY_ARGS, opts)).stdout);
  const mig = new Map<string, MigProfileFacts[]>();
  if (gpus.some((g) => g.migEnabled)) {
    const [giText, ciText] = [await runListing(exec, MIG_GI_ARGS, timeoutMs, signal), await runListing(exec, MIG_CI_ARGS, timeoutMs, signal)];
    const byIndex = migProfilesByGpu(parseGpuInstances(giText), parseComputeInstances(ciText));
    for (const g of gpus) if (g.migEnabled) mig.set(g.address, byIndex.get(g.index) ?? []);
  }
  return { gpus, mig };
}
