/**
 * Runs a TypeScript file of this repository in a child Node process through `scripts/ts-run.js`,
 * which transpiles each module as it is required (the per-file transform ts-jest applies), so
 * tests that need a separate process (one to SIGKILL) run the current source, not `dist/`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

const RUNNER = join(ROOT, 'scripts', 'ts-run.js');

export interface TsChild {
  readonly child: ChildProcess;
  readonly output: () => string;
  /** Resolves with the first stdout line starting with `prefix`; rejects if the child exits first. */
  readonly line: (prefix: string, timeoutMs?: number) => Promise<string>;
}

export function runTsChild(script: string, args: readonly string[], env: Readonly<Record<string, string>>): TsChild {
  const child = spawn(process.execPath, [RUNNER, script, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const line = (prefix: string, timeoutMs = 60_000): Promise<string> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => finish(new Error(`no "${prefix}" line within ${timeoutMs} ms; output:\n${out}`)), timeoutMs);
      const check = (): void => {
        const found = out.split('\n').find((l) => l.startsWith(prefix));
        if (found !== undefined) finish(undefined, found);
      };
      const onExit = (code: number | null): void => finish(new Error(`child exited (${String(code)}) before "${prefix}"; output:\n${out}`));
      function finish(err?: Error, value?: string): void {
        clearTimeout(timer);
        child.stdout?.off('data', check);
        child.off('exit', onExit);
        if (err) reject(err);
        else resolve(value as string);
      }
      child.stdout?.on('data', check);
      child.once('exit', onExit);
      check();
    });
  return { child, output: () => out, line };
}
