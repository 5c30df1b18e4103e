/**
 * Small helpers for benchmark scenarios: medians, percentiles, a result record, and writing results
 * to `bench/results/<name>.json`. Benchmarks measure; they never assert timings (tests do not
 * either; goals are reported next to the numbers).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, totalmem } from 'node:os';

export interface BenchRow {
  readonly scenario: string;
  readonly metric: string;
  readonly value: number | string;
  readonly unit?: string;
  readonly goal?: string;
  readonly baseline?: number | string;
}

export interface BenchResult {
  readonly name: string;
  readonly rows: readonly BenchRow[];
  readonly details?: unknown;
}

export interface BenchOptions {
  /** Small sizes and one repetition: proves the scenario runs (CI smoke), says nothing about speed. */
  readonly quick: boolean;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? NaN;
}

/** Runs `job` on every item with at most `concurrency` running at once (at least one). */
export async function pool<T>(items: readonly T[], concurrency: number, job: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < items.length; i = next++) {
      const item = items[i];
      if (item !== undefined) await job(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
}

export function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function machine(): { cpus: number; model: string; memory_gb: number; node: string } {
  return { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown', memory_gb: round(totalmem() / 2 ** 30, 0), node: process.version };
}

export const RESULTS_DIR = join(__dirname, '..', '..', 'bench', 'results');

/** Writes `<name>.json`, or `<name>-quick.json` for a smoke run, which must not replace a full run's numbers. */
export function writeResult(result: BenchResult, quick = false): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `${result.name}${quick ? '-quick' : ''}.json`);
  writeFileSync(file, `${JSON.stringify({ ...result, machine: machine(), date: new Date().toISOString() }, null, 2)}\n`);
  return file;
}

export function markdownTable(rows: readonly BenchRow[]): string {
  const lines = ['| scenario | metric | value | goal / baseline |', '|---|---|---|---|'];
  for (const r of rows) {
    const v = typeof r.value === 'number' ? `${r.value}${r.unit ? ` ${r.unit}` : ''}` : r.value;
    const extra = [r.goal ? `goal ${r.goal}` : '', r.baseline !== undefined ? `nova/oslo: ${r.baseline}` : ''].filter(Boolean).join('; ');
    lines.push(`| ${r.scenario} | ${r.metric} | ${v} | ${extra} |`);
  }
  return lines.join('\n');
}
