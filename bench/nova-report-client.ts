/**
 * nova's own Placement report client (Debian's python3-nova) as a baseline measured in the same
 * run: `bench/nova/report_client.py` drives it the way nova-compute's resource tracker does, over
 * the same provider tree the tracker registers, and prints what it sent. This module writes the
 * driver's input, runs it with the system python3, and checks and types its answer.
 *
 * Where python3-nova is missing it is installed when this process is root; otherwise the outcome
 * says why the baseline was skipped, and the scenarios print that instead of a number.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ProviderTree } from '../model/provider-tree';
import { resolveInventory, type FullInventoryRecord, type Resources } from '../model/provider-types';
import type { InitialRatios } from '../tracker/sync/diff';
import type { TreeSource } from '../tracker/tracker';

/** The scenarios the driver measures, in the order it is given them. */
export type NovaScenario = 'first' | 'steady' | 'refresh' | 'claimed';
/** `consumers` places the input's consumers on the root (not counted) before what follows. */
export type NovaStep = NovaScenario | 'consumers';

export interface MethodCounts {
  readonly GET: number;
  readonly PUT: number;
  readonly POST: number;
  readonly DELETE: number;
}

/** One resource-tracker pass as nova sent it. */
export interface NovaPass {
  readonly requests: MethodCounts;
  /** Answers with status 409. */
  readonly conflicts: number;
  /** Passes run, the first included (a conflict redrives the pass). */
  readonly attempts: number;
  readonly wallMs: number;
  /** CPU time of the driver process during the pass. */
  readonly cpuMs: number;
  /** Requests by route (`GET /resource_providers/{id}/allocations`). */
  readonly routes: Readonly<Record<string, number>>;
  /** The same pass less the resource tracker's allocation reads: what the report client sends. */
  readonly rcOnly: { readonly requests: MethodCounts; readonly wallMs: number };
}

export interface NovaReport {
  readonly novaVersion: string;
  readonly refreshIntervalS: number;
  /** Requests made once when the client is built (version discovery), not in any pass. */
  readonly setupRequests: number;
  readonly scenarios: Readonly<Partial<Record<NovaScenario, NovaPass>>>;
  /** The driver process's resident memory at the end, and its peak. */
  readonly vmRssMb: number;
  readonly vmHwmMb: number;
}

export type NovaOutcome = { readonly ran: true; readonly report: NovaReport } | { readonly ran: false; readonly reason: string };

/** One provider as the driver puts it into nova's ProviderTree (parents come before children). */
export interface NovaProvider {
  readonly uuid: string;
  readonly name: string;
  readonly parent_uuid: string | null;
  readonly inventories: Readonly<Record<string, FullInventoryRecord>>;
  readonly traits: readonly string[];
}

/** A scheduler-style claim on the root, made around the report client (not counted). */
export interface NovaClaim {
  readonly consumer: string;
  readonly project_id: string;
  readonly user_id: string;
  readonly resources: Resources;
}

/** The driver's input, field for field. */
export interface NovaInput {
  readonly placement_url: string;
  readonly nodename: string;
  readonly root_uuid: string;
  readonly tree: readonly NovaProvider[];
  readonly scenarios: readonly NovaStep[];
  readonly tree_after_claim?: readonly NovaProvider[];
  readonly claim?: NovaClaim;
  readonly consumers?: readonly NovaClaim[];
  /** Seconds to idle after the scenarios, before the memory is read. */
  readonly idle_s?: number;
  /** false: the report client alone, without the resource tracker's allocation reads. */
  readonly with_allocations?: boolean;
}

/** Sum of a pass's requests. */
export function totalRequests(c: MethodCounts): number {
  return c.GET + c.PUT + c.POST + c.DELETE;
}

/**
 * The tree `source` describes for `nodename`, as full inventory records: what a virt driver would
 * hand nova, with the same initial allocation ratios the tracker writes for a new class.
 */
export async function novaTree(source: TreeSource, nodename: string, rootUuid: string, ratios: InitialRatios): Promise<NovaProvider[]> {
  const tree = new ProviderTree();
  tree.newRoot(nodename, rootUuid);
  await source.updateProviderTree(tree, nodename);
  return tree.snapshot().map((p) => ({
    uuid: p.uuid,
    name: p.name,
    parent_uuid: p.parent_provider_uuid,
    inventories: Object.fromEntries(Object.entries(p.inventories).map(([rc, rec]) => [rc, resolveInventory(rec, undefined, ratios[rc] ?? 1)])),
    traits: [...p.traits],
  }));
}

function fail(what: string): never {
  throw new Error(`nova report client: ${what}`);
}

function obj(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(`${what} is not an object`);
  return v as Record<string, unknown>;
}

function num(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) fail(`${what} is not a number >= 0`);
  return v;
}

function counts(v: unknown, what: string): MethodCounts {
  const o = obj(v, what);
  return { GET: num(o.GET ?? 0, `${what}.GET`), PUT: num(o.PUT ?? 0, `${what}.PUT`), POST: num(o.POST ?? 0, `${what}.POST`), DELETE: num(o.DELETE ?? 0, `${what}.DELETE`) };
}

function pass(v: unknown, what: string): NovaPass {
  const o = obj(v, what);
  const rc = obj(o.rc_only, `${what}.rc_only`);
  const routes = obj(o.routes ?? {}, `${what}.routes`);
  return {
    requests: counts(o.requests, `${what}.requests`),
    conflicts: num(o.conflicts, `${what}.conflicts`),
    attempts: num(o.attempts, `${what}.attempts`),
    wallMs: num(o.wall_ms, `${what}.wall_ms`),
    cpuMs: num(o.cpu_ms, `${what}.cpu_ms`),
    routes: Object.fromEntries(Object.entries(routes).map(([k, n]) => [k, num(n, `${what}.routes[${k}]`)])),
    rcOnly: { requests: counts(rc.requests, `${what}.rc_only.requests`), wallMs: num(rc.wall_ms, `${what}.rc_only.wall_ms`) },
  };
}

const SCENARIOS: readonly NovaScenario[] = ['first', 'steady', 'refresh', 'claimed'];

/** The driver's stdout (one JSON document, its last line), checked field by field. */
export function parseNovaReport(stdout: string): NovaReport {
  const line = stdout.trim().split('\n').pop() ?? '';
  let doc: unknown;
  try {
    doc = JSON.parse(line);
  } catch {
    fail(`its output is not JSON: ${line.slice(0, 200)}`);
  }
  const o = obj(doc, 'the report');
  const scenarios = obj(o.scenarios, 'scenarios');
  const unknown = Object.keys(scenarios).filter((k) => !(SCENARIOS as readonly string[]).includes(k));
  if (unknown.length) fail(`unknown scenario(s) ${unknown.join(', ')}`);
  const passes: Partial<Record<NovaScenario, NovaPass>> = {};
  for (const s of SCENARIOS) if (scenarios[s] !== undefined) passes[s] = pass(scenarios[s], s);
  if (typeof o.nova_version !== 'string') fail('nova_version is missing');
  return {
    novaVersion: o.nova_version,
    refreshIntervalS: num(o.refresh_interval_s, 'refresh_interval_s'),
    setupRequests: num(o.setup_requests, 'setup_requests'),
    scenarios: passes,
    vmRssMb: num(o.vm_rss_kb, 'vm_rss_kb') / 1024,
    vmHwmMb: num(o.vm_hwm_kb, 'vm_hwm_kb') / 1024,
  };
}

/** A finished process: its exit code (null when killed) and what it printed. */
export interface ProcessResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a program with `stdin` as its input, killed after `timeoutMs`. */
export type ProcessRunner = (file: string, args: readonly string[], stdin: string, timeoutMs: number) => Promise<ProcessResult>;

/** The real runner. PYTHONPATH and PYTHONHOME are dropped so the system python3 sees only its own packages. */
export const childProcessRunner: ProcessRunner = (file, args, stdin, timeoutMs) =>
  new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    delete env.PYTHONPATH;
    delete env.PYTHONHOME;
    const child = spawn(file, [...args], { env, stdio: ['pipe', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });

const PYTHON = '/usr/bin/python3';
const DRIVER = join(__dirname, '..', '..', 'bench', 'nova', 'report_client.py');
const lastLine = (s: string): string => s.trim().split('\n').pop() ?? '';

export class NovaReportClient {
  private missing: Promise<string | undefined> | undefined;

  constructor(
    private readonly run: ProcessRunner = childProcessRunner,
    private readonly isRoot: boolean = process.getuid?.() === 0,
  ) {}

  /** Why nova's report client cannot run here, or undefined when it can (installed if missing and root). */
  unavailable(): Promise<string | undefined> {
    this.missing ??= this.check();
    return this.missing;
  }

  private async check(): Promise<string | undefined> {
    const probe = (): Promise<ProcessResult> => this.run(PYTHON, ['-c', 'import nova.scheduler.client.report'], '', 120000).catch((e: unknown) => ({ code: 1, stdout: '', stderr: String(e) }));
    if ((await probe()).code === 0) return undefined;
    if (!this.isRoot) return 'python3-nova is not installed and this is not root to install it';
    const apt = await this.run('apt-get', ['install', '-y', '--no-install-recommends', 'python3-nova'], '', 600000).catch((e: unknown) => ({ code: 1, stdout: '', stderr: String(e) }));
    if (apt.code !== 0) return `python3-nova is not installed and apt-get install failed: ${lastLine(apt.stderr)}`;
    const after = await probe();
    return after.code === 0 ? undefined : `python3-nova does not import: ${lastLine(after.stderr)}`;
  }

  /** Runs the driver once; a driver that fails is an error, a missing nova a skipped outcome. */
  async measure(input: NovaInput, timeoutMs = 600000): Promise<NovaOutcome> {
    const reason = await this.unavailable();
    if (reason !== undefined) return { ran: false, reason };
    const r = await this.run(PYTHON, [DRIVER], JSON.stringify(input), timeoutMs);
    if (r.code !== 0) throw new Error(`nova report client exited ${r.code ?? 'on a signal'}: ${r.stderr.trim().split('\n').slice(-5).join(' | ')}`);
    return { ran: true, report: parseNovaReport(r.stdout) };
  }
}

