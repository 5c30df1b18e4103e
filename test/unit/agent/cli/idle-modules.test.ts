import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..', '..', '..');

/** What requiring `module` loads, as repository-relative paths (through a child process with an empty cache). */
function loadedBy(module: string): string[] {
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'ts-run.js'), join(ROOT, 'test', 'helpers', 'loaded-modules.ts'), module], { cwd: ROOT, encoding: 'utf8' });
  const line = r.stdout.split('\n').find((l) => l.startsWith('modules '));
  if (!line) throw new Error(`no module list; stderr:\n${r.stderr}`);
  return JSON.parse(line.slice('modules '.length)) as string[];
}

// Resident memory is paid per loaded module for the daemon's whole life: what only some
// configurations use must load when they use it.
describe('the command line, as `run` loads it before starting the daemon', () => {
  const loaded = loadedBy('agent/cli/program.ts');

  it('loads the daemon', () => {
    expect(loaded).toContain('agent/daemon.ts');
  });

  it('does not load nova mode, the qemu driver or the yaml parser', () => {
    expect(loaded.filter((f) => f.startsWith('agent/nova/'))).toEqual([]);
    expect(loaded.filter((f) => f.startsWith('virt-drivers/qemu/'))).toEqual([]);
    expect(loaded.filter((f) => f.includes('node_modules/yaml/'))).toEqual([]);
  });
});
