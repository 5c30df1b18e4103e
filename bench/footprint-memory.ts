/**
 * Where the daemon's resident memory goes, for the footprint scenario. From /proc: RSS split into
 * file-backed pages (the `node` binary and its shared libraries, mapped from disk and shared by
 * every node process on the host) and private anonymous memory (the V8 heap, malloc, thread
 * stacks), sampled until V8 has settled after start-up. Through the inspector, after a full GC: V8
 * heap used and committed, external memory, and the modules loaded.
 *
 * Why settle: start-up leaves garbage and a grown young generation; V8's memory reducer returns
 * them to the system a few seconds after the last full GC when the process allocates little (8 s
 * here), so a sample taken right after start-up measures start-up, not the idle daemon.
 */
import { collectAndEvaluate } from './inspector';
import { statusMbs } from './proc';

const MB = 2 ** 20;

/** Resident memory of a process, in MB. */
export interface RssSplit {
  readonly rss: number;
  /** File-backed pages: the node binary and libraries (shared with other processes). */
  readonly file: number;
  /** Private anonymous memory: V8 heap, malloc, stacks. */
  readonly anon: number;
}

export function rssSplit(pid: number): RssSplit {
  const mb = statusMbs(pid, ['VmRSS', 'RssFile', 'RssAnon']);
  return { rss: mb.VmRSS, file: mb.RssFile, anon: mb.RssAnon };
}

/** Samples RSS once a second for `seconds`; the last sample is the settled one. */
export async function settledRss(pid: number, seconds: number): Promise<{ readonly settled: RssSplit; readonly series: readonly number[] }> {
  const series: number[] = [];
  for (let i = 0; i < seconds; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    series.push(Math.round(rssSplit(pid).rss * 10) / 10);
  }
  return { settled: rssSplit(pid), series };
}

/** What the inspector reads from the daemon after a full GC (sizes in MB). */
export interface HeapBreakdown {
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly external: number;
  readonly arrayBuffers: number;
  /** Modules in `require.cache`: all, and those from node_modules. */
  readonly modules: number;
  readonly packageModules: number;
  /** Node's own built-in modules loaded. */
  readonly builtins: number;
  /** RSS split read right after the GC, in the inspected process. */
  readonly split: RssSplit;
}

// Evaluated in the daemon's main context, where `require` is not a global: the main module's
// constructor is node's Module, whose `_cache` is `require.cache`.
const EXPRESSION = `(() => {
  const m = process.memoryUsage();
  const cache = Object.keys(process.mainModule.constructor._cache);
  const status = process.mainModule.require('node:fs').readFileSync('/proc/self/status', 'utf8');
  const kb = (f) => Number(new RegExp(f + ':\\\\s+(\\\\d+) kB').exec(status)[1]) / 1024;
  return JSON.stringify({
    heapUsed: m.heapUsed / ${MB}, heapTotal: m.heapTotal / ${MB}, external: m.external / ${MB}, arrayBuffers: m.arrayBuffers / ${MB},
    modules: cache.length, packageModules: cache.filter((k) => k.includes('/node_modules/')).length,
    builtins: process.moduleLoadList.filter((k) => k.startsWith('NativeModule ')).length,
    split: { rss: kb('VmRSS'), file: kb('RssFile'), anon: kb('RssAnon') },
  });
})()`;

/** Forces a full GC in the daemon inspected on `port` and reads the breakdown. */
export async function heapBreakdown(port: number): Promise<HeapBreakdown> {
  return JSON.parse(await collectAndEvaluate(port, EXPRESSION)) as HeapBreakdown;
}
