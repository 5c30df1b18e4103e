// Runs a TypeScript file of this repository with Node, transpiling each module as it is required
// (TypeScript's transpileModule: the per-file transform ts-jest applies; no type check, no dist/).
// Usage: node scripts/ts-run.js path/to/file.ts [args...]
'use strict';
const fs = require('fs');
const path = require('path');
const ts = require('typescript');

require.extensions['.ts'] = function compile(module, filename) {
  const out = ts.transpileModule(fs.readFileSync(filename, 'utf8'), {
    fileName: filename,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
  });
  module._compile(out.outputText, filename);
};

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node scripts/ts-run.js FILE.ts [args...]\n');
  process.exit(2);
}
process.argv.splice(1, 1); // the script sees argv[1] = its own path, as under plain node
require(path.resolve(file));
