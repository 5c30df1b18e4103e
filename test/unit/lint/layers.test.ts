/**
 * The layer and cycle rules (.dependency-cruiser.js) catch what they are for: dependency-cruiser,
 * with the repository's own config, runs over a small tree written to a temporary directory in the
 * repository's folder shape, holding one violation of each rule and a set of allowed imports; and
 * over the repository itself, which must pass.
 *
 * The CLI runs in a child process: dependency-cruiser is an ES module, which jest's CommonJS
 * runtime cannot load.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const REPO = join(__dirname, '..', '..', '..');
const CLI = join(REPO, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
const CONFIG = join(REPO, '.dependency-cruiser.js');

/** Runs dependency-cruiser with the repository's config over `cwd`; its `err` report and status. */
function cruise(cwd: string): { status: number | null; report: string } {
  const r = spawnSync(process.execPath, [CLI, '--config', CONFIG, '--output-type', 'err', '.'], { cwd, encoding: 'utf8' });
  return { status: r.status, report: `${r.stdout}${r.stderr}` };
}

/** A module that imports each of `targets` (paths from the tree's root, without `.ts`). */
function importing(from: string, ...targets: string[]): string {
  const lines = targets.map((t, i) => {
    let rel = join(...dirname(from).split('/').map(() => '..'), t);
    if (!rel.startsWith('.')) rel = `./${rel}`;
    return `import { x as x${i} } from '${rel}';`;
  });
  return `${lines.join('\n')}\nexport const x = [${targets.map((_, i) => `x${i}`).join(', ')}].length;\n`;
}

/** Each rule broken once: [rule, importing file, imported file]. */
const VIOLATIONS: ReadonlyArray<readonly [string, string, string]> = [
  ['lib-imports-no-project-folder', 'lib/clock.ts', 'model/instance.ts'],
  ['model-imports-only-lib', 'model/instance.ts', 'config/schema.ts'],
  ['config-imports-only-lib-and-model', 'config/schema.ts', 'tracker/audit.ts'],
  ['tracker-imports-only-config-model-lib', 'tracker/audit.ts', 'agent/daemon.ts'],
  ['tracker-imports-only-config-model-lib', 'tracker/sync/sync.ts', 'virt-drivers/driver.ts'],
  ['virt-drivers-import-only-config-model-lib', 'virt-drivers/driver.ts', 'tracker/tracker.ts'],
  ['virt-drivers-import-only-config-model-lib', 'virt-drivers/qemu/driver.ts', 'agent/wiring.ts'],
  ['product-imports-no-test', 'agent/daemon.ts', 'test/helpers/fake-exec.ts'],
  ['rpc-amqp-imports-no-oslo-or-endpoint', 'agent/rpc/amqp/broker.ts', 'agent/rpc/oslo/envelope.ts'],
  ['rpc-amqp-imports-no-oslo-or-endpoint', 'agent/rpc/amqp/publisher.ts', 'agent/rpc/endpoint/server.ts'],
  ['rpc-oslo-imports-no-endpoint', 'agent/rpc/oslo/envelope.ts', 'agent/rpc/endpoint/client.ts'],
  ['rpc-imports-no-compute-or-nova', 'agent/rpc/endpoint/server.ts', 'agent/compute/manager.ts'],
  ['rpc-imports-no-compute-or-nova', 'agent/rpc/endpoint/client.ts', 'agent/nova/conductor.ts'],
];

/** Imports the floors allow: none of these may be reported. */
const ALLOWED: ReadonlyArray<readonly [string, ...string[]]> = [
  ['lib/backoff.ts', 'lib/logging/logger'],
  ['model/tree.ts', 'lib/backoff'],
  ['config/loader.ts', 'model/tree', 'lib/backoff'],
  ['tracker/tracker.ts', 'config/loader', 'model/tree', 'lib/backoff'],
  ['virt-drivers/registry.ts', 'config/loader', 'model/tree', 'lib/backoff'],
  ['agent/wiring.ts', 'tracker/tracker', 'virt-drivers/registry', 'agent/rpc/endpoint/dispatcher'],
  ['agent/rpc/endpoint/dispatcher.ts', 'agent/rpc/oslo/wire', 'agent/rpc/amqp/transport'],
  ['agent/compute/flows.ts', 'agent/rpc/endpoint/dispatcher', 'agent/nova/calls'],
  ['test/unit/flows.test.ts', 'agent/compute/flows', 'test/helpers/fakes'],
];

describe('layer rules', () => {
  let root: string;
  let synthetic: { status: number | null; report: string };

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'layers-'));
    const files = new Map<string, string[]>();
    const add = (from: string, ...to: string[]): void => {
      files.set(from, [...(files.get(from) ?? []), ...to]);
      for (const t of to) if (!files.has(`${t}.ts`)) files.set(`${t}.ts`, []);
    };
    for (const [, from, to] of VIOLATIONS) add(from, to.replace(/\.ts$/, ''));
    for (const [from, ...to] of ALLOWED) add(from, ...to);
    // A cycle of three files, and one between a test and its helper.
    add('agent/journal/a.ts', 'agent/journal/b');
    add('agent/journal/b.ts', 'agent/journal/c');
    add('agent/journal/c.ts', 'agent/journal/a');
    add('test/helpers/loop.ts', 'test/unit/loop.test');
    add('test/unit/loop.test.ts', 'test/helpers/loop');
    for (const [file, targets] of files) {
      mkdirSync(join(root, dirname(file)), { recursive: true });
      writeFileSync(join(root, file), targets.length ? importing(file, ...targets) : 'export const x = 1;\n');
    }
    writeFileSync(join(root, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'node16', moduleResolution: 'node16', strict: true } }));
    synthetic = cruise(root);
  }, 60_000);

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  test('each violation fails with the rule and both files named; allowed imports pass', () => {
    const { status, report } = synthetic;
    expect(status).not.toBe(0);
    for (const [rule, from, to] of VIOLATIONS) expect(report).toContain(`error ${rule}: ${from} → ${to}`);
    const errors = report.split('\n').filter((l) => /^\s*error /.test(l));
    const cycles = errors.filter((l) => l.includes('no-circular'));
    expect(errors.length - cycles.length).toBe(VIOLATIONS.length);
    expect(cycles.length).toBe(2);
  });

  test('a cycle is reported under no-circular with every file on it', () => {
    const { report } = synthetic;
    const cycle = /error no-circular: agent\/journal\/a\.ts → \s+agent\/journal\/b\.ts →\s+agent\/journal\/c\.ts →\s+agent\/journal\/a\.ts/;
    expect(report).toMatch(cycle);
    expect(report).toMatch(/error no-circular: test\/helpers\/loop\.ts → \s+test\/unit\/loop\.test\.ts →\s+test\/helpers\/loop\.ts/);
  });

  test('the repository itself passes', () => {
    const { status, report } = cruise(REPO);
    expect(report).toContain('no dependency violations found');
    expect(status).toBe(0);
  }, 60_000);
});
