#!/usr/bin/env node
// The closing report of scripts/test: where the run's time went, then the one line
// "tests: N passed, N failed[, N skipped]" (the lint step counts as one test). Exits non-zero
// when a pass's results are missing or when anything failed.
//
// Time: each step's wall time (the "seconds name" lines scripts/test leaves in <results>/phases),
// and per jest pass its slowest files, the sum of all its files, and the time outside them
// (global setup and teardown, the gaps between files) with its largest gaps named, so that a run
// over budget says from its own output where the minutes went.
//
// Usage: node scripts/test-report.js <results-dir> <native-release>
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const [results, native] = process.argv.slice(2);
if (!results || !native) {
  console.error('usage: node scripts/test-report.js <results-dir> <native-release>');
  process.exit(2);
}

const secs = (ms) => `${Math.round(ms / 1000)} s`;
const repoRelative = (file) => path.relative(process.cwd(), file);

/** One jest pass's timing lines: its slowest files, what its files add up to, the gaps, the tail. */
function passTiming(name, run, stepSeconds) {
  const files = run.testResults
    .map((r) => ({ file: repoRelative(r.name), start: r.startTime, end: r.endTime }))
    .filter((f) => typeof f.start === "number" && typeof f.end === "number" && f.start > 0 && f.end >= f.start)
    .sort((a, b) => a.start - b.start);
  if (files.length === 0) return [];
  const inFiles = files.reduce((sum, f) => sum + (f.end - f.start), 0);
  const gaps = files.map((f, i) => ({ before: f.file, ms: f.start - (i === 0 ? run.startTime : files[i - 1].end) }));
  const between = Math.max(0, gaps.reduce((sum, g) => sum + g.ms, 0));
  // After the last file: the global teardown (the shared cloud's `down`) and jest's exit.
  const tail = stepSeconds === undefined ? '' : `, ${secs(Math.max(0, stepSeconds * 1000 - (files[files.length - 1].end - run.startTime)))} after the last`;
  const lines = [`${name}: ${files.length} files, ${secs(inFiles)} in them, ${secs(between)} before and between them${tail}`];
  const slowest = [...files].sort((a, b) => b.end - b.start - (a.end - a.start)).slice(0, 8);
  for (const f of slowest) lines.push(`  ${secs(f.end - f.start).padStart(7)}  ${f.file}`);
  const longGaps = gaps.filter((g) => g.ms >= 20_000).sort((a, b) => b.ms - a.ms).slice(0, 4);
  for (const g of longGaps) lines.push(`  ${secs(g.ms).padStart(7)}  outside any file, before ${g.before}`);
  return lines;
}

// [name, results file, the scripts/test step that ran it]
const passes = [
  ['unit', 'unit.json', 'unit tests'],
  [`integration (${native})`, 'integration.json', `integration tests (${native})`],
  ...(native === 'zed' ? [['integration (2025.1)', 'integration-2025.1.json', 'integration tests (2025.1, from its root)']] : []),
];
let passed = 0;
let failed = 0;
let skipped = 0;
let missingOrBroken = 0;
const timing = [];

const stepSeconds = new Map();
const phasesFile = path.join(results, 'phases');
if (fs.existsSync(phasesFile)) {
  timing.push('steps:');
  for (const line of fs.readFileSync(phasesFile, 'utf8').split('\n').filter(Boolean)) {
    const [s, ...words] = line.split(' ');
    stepSeconds.set(words.join(' '), Number(s));
    timing.push(`  ${`${s} s`.padStart(7)}  ${words.join(' ')}`);
  }
}
const expected = new Set(passes.map(([, file]) => file));
const found = fs.readdirSync(results).filter((f) => f.endsWith('.json') && !expected.has(f));
for (const [name, file, step] of [...passes, ...found.map((f) => [f, f, undefined])]) {
  const full = path.join(results, file);
  if (!fs.existsSync(full)) {
    missingOrBroken++;
    timing.push(`${name}: no results (${file} missing)`);
    continue;
  }
  const run = JSON.parse(fs.readFileSync(full, 'utf8'));
  passed += run.numPassedTests;
  failed += run.numFailedTests;
  skipped += run.numPendingTests + (run.numTodoTests || 0);
  missingOrBroken += run.numFailedTestSuites;
  if (name !== 'unit') timing.push(...passTiming(name, run, step === undefined ? undefined : stepSeconds.get(step)));
}
if (missingOrBroken && !failed) failed = missingOrBroken;
const lintFile = path.join(results, 'lint');
if (fs.existsSync(lintFile) && fs.readFileSync(lintFile, 'utf8').trim() === 'passed') passed++;
else {
  failed++;
  console.log('\nlint: failed (see the lint step above)');
}
console.log(`\n== where the time went\n${timing.join('\n')}`);
console.log(`\ntests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed ? 1 : 0);
