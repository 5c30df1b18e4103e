/**
 * `npm run bench [-- --quick] [-- --only name,...]`: runs every scenario, writes
 * `bench/results/<name>.json` and `bench/results/latest.md`, and prints the table. `--quick` is a
 * CI-sized smoke run that proves the scenarios work and says nothing about speed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { machine, markdownTable, RESULTS_DIR, writeResult, type BenchOptions, type BenchResult } from './lib';
import { runComputeBench } from './compute';
import { benchDiscovery } from './discovery';
import { runFleetBench } from './fleet';
import { runFootprintBench } from './footprint';
import { runHostileInputBench } from './hostile-input';
import { runNetworkBootBench } from './network-boot';
import { runPlacementSyncBench } from './placement-sync';
import { withBenchTable } from './readme';
import { runRpcBench } from './rpc';
import { runSnapshotBench } from './snapshot';
import { runVolumesBench } from './volumes';

/** The discovery benchmark's result as table rows. */
async function discoveryScenario(opts: BenchOptions): Promise<BenchResult> {
  const r = await benchDiscovery(opts.quick ? 3 : 9, opts.quick ? 1 : 2);
  const s = 'discovery, fake driver on this host';
  return {
    name: 'discovery',
    rows: [
      { scenario: s, metric: 'wall (median)', value: r.wallMs.median, unit: 'ms', goal: `< ${r.goals.wallMs} ms` },
      { scenario: s, metric: 'event-loop stall (median / max)', value: `${r.stallMs.median} / ${r.stallMs.max} ms`, goal: `< ${r.goals.stallMs} ms` },
      { scenario: s, metric: 'first (cold) pass', value: r.coldWallMs, unit: 'ms' },
    ],
    details: r,
  };
}

type Scenario = (opts: BenchOptions) => Promise<BenchResult>;

/** Every scenario by name; add new ones here. */
export const SCENARIOS: Readonly<Record<string, Scenario>> = {
  discovery: discoveryScenario,
  'placement-sync': runPlacementSyncBench,
  compute: runComputeBench,
  rpc: (opts) => runRpcBench({ quick: opts.quick }),
  footprint: runFootprintBench,
  'hostile-input': runHostileInputBench,
  fleet: runFleetBench,
  'network-boot': runNetworkBootBench,
  volumes: runVolumesBench,
  snapshot: runSnapshotBench,
};

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const onlyArg = process.argv.find((a) => a.startsWith('--only='));
  const only = onlyArg ? onlyArg.slice('--only='.length).split(',') : Object.keys(SCENARIOS);
  const unknown = only.filter((n) => !SCENARIOS[n]);
  if (unknown.length) throw new Error(`unknown scenario(s): ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  const sections: string[] = [];
  const started = Date.now();
  const m = machine();
  const header = `Measured ${new Date().toISOString().slice(0, 10)} on ${m.cpus} x ${m.model}, ${m.memory_gb} GB, Node ${m.node}${quick ? ' (--quick: smoke sizes, not for comparison)' : ''}.`;
  for (const name of only) {
    const scenario = SCENARIOS[name];
    if (!scenario) continue;
    process.stderr.write(`bench: ${name}...\n`);
    const t0 = Date.now();
    const result = await scenario({ quick });
    writeResult(result, quick);
    sections.push(`### ${name}\n\n${markdownTable(result.rows)}\n`);
    process.stderr.write(`bench: ${name} done in ${Math.round((Date.now() - t0) / 1000)} s\n`);
  }
  const complete = !onlyArg;
  const wall = `${Math.round((Date.now() - started) / 1000)} s`;
  const args = [quick ? '--quick' : '', onlyArg ?? ''].filter((a) => a !== '');
  const md = `${header}\n\nReproduce: \`npm run bench${args.length ? ` -- ${args.join(' ')}` : ''}\` (${wall} in all)\n\n${sections.join('\n')}`;
  // A partial run must not pass for the latest full one (nor overwrite it).
  writeFileSync(join(RESULTS_DIR, !complete ? 'latest-partial.md' : quick ? 'latest-quick.md' : 'latest.md'), md);
  if (complete && !quick) {
    const readme = join(__dirname, '..', '..', 'README.md');
    writeFileSync(readme, withBenchTable(readFileSync(readme, 'utf8'), md));
  }
  console.log(md);
}

main().catch((e: unknown) => {
  console.error(`bench: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 1;
});
