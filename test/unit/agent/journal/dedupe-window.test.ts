// The persisted de-duplication window and the checkpoint file under it.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DedupeWindow } from '../../../../agent/journal/dedupe-window';
import { CheckpointCorruptError, JsonCheckpoint } from '../../../../lib/checkpoint';
import type { Clock } from '../../../../lib/clock';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ca-dedupe-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const manualClock = (): Clock & { t: number } => {
  const c = { t: 1_000_000, now: () => c.t, sleep: async () => undefined };
  return c;
};

test('checkpoint: atomic write leaves only the file; read verifies kind, version and checksum', async () => {
  const path = join(dir, 'state', 'x.json');
  const cp = new JsonCheckpoint<{ n: number }>(path, 'test/x', 1, (d) => (typeof (d as { n?: unknown }).n === 'number' ? (d as { n: number }) : undefined));
  expect(await cp.read()).toBeUndefined();
  await cp.write({ n: 7 });
  expect(readdirSync(join(dir, 'state'))).toEqual(['x.json']);
  expect(await cp.read()).toEqual({ n: 7 });
  const doc = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  expect(doc).toMatchObject({ kind: 'test/x', version: 1, data: { n: 7 } });
  expect(doc.checksum).toMatch(/^sha256:[0-9a-f]{64}$/);

  writeFileSync(path, JSON.stringify({ ...doc, data: { n: 8 } }));
  await expect(cp.read()).rejects.toThrow(new CheckpointCorruptError(path, 'checksum mismatch'));
  writeFileSync(path, JSON.stringify({ ...doc, version: 2 }));
  await expect(cp.read()).rejects.toThrow('version 2 is not 1');
  await expect(new JsonCheckpoint(path, 'other', 1, () => ({})).read()).rejects.toThrow('not a other file');
  writeFileSync(path, '{"kind": "test/x", "vers');
  await expect(cp.read()).rejects.toThrow('not JSON');
});

test('window: bounded by size and by age', async () => {
  const clock = manualClock();
  const w = new DedupeWindow({ maxEntries: 3, maxAgeMs: 1000, clock });
  for (const id of ['a', 'b', 'c', 'd']) w.add(id);
  expect(['a', 'b', 'c', 'd'].map((id) => w.has(id))).toEqual([false, true, true, true]);
  clock.t += 1001;
  expect(w.has('d')).toBe(false);
  w.add('e');
  expect(w.size).toBe(1);
});

test('window: survives a restart through its file; a corrupt file is reported and the window starts empty', async () => {
  const path = join(dir, 'w.json');
  const w = new DedupeWindow({ path });
  w.add('x1');
  w.add('x2');
  await w.flush();
  const again = new DedupeWindow({ path });
  await again.load();
  expect([again.has('x1'), again.has('x2'), again.has('x3')]).toEqual([true, true, false]);
  writeFileSync(path, 'garbage');
  const broken = new DedupeWindow({ path });
  await expect(broken.load()).rejects.toBeInstanceOf(CheckpointCorruptError);
  expect(broken.size).toBe(0);
  broken.add('y');
  await broken.flush();
  const fixed = new DedupeWindow({ path });
  await fixed.load();
  expect(fixed.has('y')).toBe(true);
});

test('window: concurrent flushes share writes (group commit) and all become durable', async () => {
  const path = join(dir, 'w.json');
  const w = new DedupeWindow({ path });
  const flushes: Array<Promise<void>> = [];
  for (let i = 0; i < 50; i++) {
    w.add(`id${i}`);
    flushes.push(w.flush());
  }
  await Promise.all(flushes);
  const reread = new DedupeWindow({ path });
  await reread.load();
  expect(reread.size).toBe(50);
});

test('window: a write failure rejects flush', async () => {
  const w = new DedupeWindow({ path: join(dir, 'missing-parent-is-a-file', 'w.json') });
  writeFileSync(join(dir, 'missing-parent-is-a-file'), 'x');
  w.add('a');
  await expect(w.flush()).rejects.toThrow('cannot write');
});
