/**
 * ESLint with the repository's config (eslint.config.mjs) reports what the lint step is for: in
 * product code a promise nobody handles, a promise where a callback's result is ignored, an
 * explicit `any` and `any` flowing into typed code; in tests the same except the no-unsafe-*
 * family. The sources are written to a temporary directory with a small tsconfig of its own, so
 * the type-aware rules run without loading the whole repository.
 *
 * The CLI runs in a child process: the config is an ES module, which jest's CommonJS runtime
 * cannot load.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const REPO = join(__dirname, '..', '..', '..');
const CLI = join(REPO, 'node_modules', 'eslint', 'bin', 'eslint.js');
const CONFIG = join(REPO, 'eslint.config.mjs');

/** Each line breaks one rule; the same source is linted as product code and as a test. */
const SOURCE = `
export async function save(): Promise<void> {}
export function onTick(run: () => void): void { run(); }
export function careless(input: any): void {
  save();
  onTick(async () => { await save(); });
  const parsed = JSON.parse('{}');
  parsed.field.call();
  onTick(input);
  onTick(() => input);
}
`;

const UNSAFE = [
  '@typescript-eslint/no-unsafe-argument',
  '@typescript-eslint/no-unsafe-assignment',
  '@typescript-eslint/no-unsafe-call',
  '@typescript-eslint/no-unsafe-member-access',
  '@typescript-eslint/no-unsafe-return',
];

interface LintResult {
  readonly filePath: string;
  readonly messages: ReadonlyArray<{ readonly ruleId: string | null; readonly message: string }>;
}

describe('ESLint rules', () => {
  let root: string;
  /** The rules each file breaks, sorted, once each. */
  let rulesBroken: Map<string, string[]>;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'eslint-rules-'));
    for (const file of ['agent/careless.ts', 'test/unit/careless.test.ts']) {
      mkdirSync(join(root, dirname(file)), { recursive: true });
      writeFileSync(join(root, file), SOURCE);
    }
    writeFileSync(join(root, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'node16', moduleResolution: 'node16', strict: true, types: [] }, include: ['agent', 'test'] }));
    const r = spawnSync(process.execPath, [CLI, '--config', CONFIG, '--format', 'json', '.'], { cwd: root, encoding: 'utf8' });
    if (!r.stdout) throw new Error(`eslint printed nothing: ${r.stderr}`);
    const results = JSON.parse(r.stdout) as LintResult[];
    rulesBroken = new Map(results.map((f) => [f.filePath.slice(root.length + 1), [...new Set(f.messages.map((m) => m.ruleId ?? m.message))].sort()]));
  }, 60_000);

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  test('product code: promises, explicit any and the no-unsafe-* family', () => {
    expect(rulesBroken.get('agent/careless.ts')).toEqual(
      ['@typescript-eslint/no-explicit-any', '@typescript-eslint/no-floating-promises', '@typescript-eslint/no-misused-promises', ...UNSAFE].sort(),
    );
  });

  test('tests: promises and explicit any, but not the no-unsafe-* family', () => {
    expect(rulesBroken.get('test/unit/careless.test.ts')).toEqual(
      ['@typescript-eslint/no-explicit-any', '@typescript-eslint/no-floating-promises', '@typescript-eslint/no-misused-promises'].sort(),
    );
  });
});
