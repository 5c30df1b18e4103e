/** The package version, found from wherever this file runs (source under ts-jest or `dist/`). */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export function packageVersion(): string {
  let dir = __dirname;
  for (let i = 0; i < 6; i++) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'compute-agent' && pkg.version) return pkg.version;
    }
    dir = dirname(dir);
  }
  return 'unknown';
}
