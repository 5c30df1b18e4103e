/**
 * Child script: requires the repository module named by argv[2] and prints, as one JSON line
 * starting with "modules ", every module then in node's require cache, relative to the repository
 * root. Run through `scripts/ts-run.js`, so it sees the current source, not `dist/`.
 */
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const target = process.argv[2];
if (!target) throw new Error('usage: loaded-modules.ts MODULE');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the module under test, named at run time
require(join(ROOT, target));
process.stdout.write(`modules ${JSON.stringify(Object.keys(require.cache).map((f) => relative(ROOT, f)))}\n`);
