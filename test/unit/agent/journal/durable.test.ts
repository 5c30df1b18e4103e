import { appendFileSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DurableJournal } from '../../../../agent/journal/durable';
import { RecordLog } from '../../../../agent/journal/log';
import type { JournalRequest } from '../../../../agent/journal/types';
import { captureLog } from '../../../helpers/placement';

const req = (id: string, method = 'build_and_run_instance'): JournalRequest => ({
  uniqueId: id,
  method,
  version: '6.0',
  namespace: null,
  args: { instance: { uuid: `i-${id}` } },
  context: { request_id: `req-${id}` },
  orderingKey: `i-${id}`,
  reply: undefined,
  receivedAt: 1,
});

const open = (dir: string, extra = {}) => DurableJournal.open(dir, { logger: captureLog().logger, ...extra });

describe('DurableJournal', () => {
  test('accepted requests survive a restart until completed; duplicates stay duplicates after completion', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ca-journal-'));
    const a = await open(dir);
    expect(await a.accept(req('m1'))).toBe('new');
    expect(await a.accept(req('m2'))).toBe('new');
    expect(await a.accept(req('m1'))).toBe('duplicate');
    await a.complete('m1', { status: 'succeeded' });
    await a.put('instance', 'i-m2', { vm_state: 'building' });
    await a.close();

    const b = await open(dir);
    expect(b.pending().map((r) => r.uniqueId)).toEqual(['m2']);
    expect(await b.accept(req('m1'))).toBe('duplicate');
    expect(await b.accept(req('m2'))).toBe('duplicate');
    expect(b.get('instance', 'i-m2')).toEqual({ vm_state: 'building' });
    await b.del('instance', 'i-m2');
    await b.close();
    const c = await open(dir);
    expect(c.list('instance')).toEqual([]);
    await c.close();
  });

  test('concurrent writes share fsyncs (group commit)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ca-journal-'));
    const log = new RecordLog<object>(join(dir, 'j'), (s): s is object => typeof s === 'object');
    await log.open();
    await Promise.all(Array.from({ length: 200 }, (_, i) => log.append('put', { i })));
    expect(log.flushes).toBeGreaterThan(0);
    expect(log.flushes).toBeLessThan(20);
    await log.close();
  });

  test('a torn last record (crash mid-write) is dropped and reported; later appends are intact', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ca-journal-'));
    const a = await open(dir);
    await a.accept(req('m1'));
    await a.close();
    appendFileSync(join(dir, 'journal', 'journal.log'), '{"s":2,"k":"accept","d":{"requ');
    const log = captureLog();
    const b = await DurableJournal.open(dir, { logger: log.logger });
    expect(b.pending().map((r) => r.uniqueId)).toEqual(['m1']);
    expect(log.lines().some((l) => String(l.problem).includes('torn last record'))).toBe(true);
    await b.accept(req('m3'));
    await b.close();
    const c = await open(dir);
    expect(c.pending().map((r) => r.uniqueId)).toEqual(['m1', 'm3']);
    await c.close();
  });

  test('a record whose checksum does not match is skipped, not believed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ca-journal-'));
    const a = await open(dir);
    await a.accept(req('m1'));
    await a.accept(req('m2'));
    await a.close();
    const file = join(dir, 'journal', 'journal.log');
    const lines = readFileSync(file, 'utf8').split('\n');
    lines[0] = (lines[0] ?? '').replace('m1', 'mX');
    writeFileSync(file, lines.join('\n'));
    const b = await open(dir);
    expect(b.pending().map((r) => r.uniqueId)).toEqual(['m2']);
    await b.close();
  });

  test('compaction writes a snapshot, empties the log, and loses nothing appended meanwhile', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ca-journal-'));
    const a = await open(dir, { compactEvery: 50 });
    // Accepts first (the contract: complete follows an accept that returned 'new'), then puts and
    // completes interleaved and concurrent, crossing several compactions.
    await Promise.all(Array.from({ length: 300 }, (_, i) => i).filter((i) => i % 7 === 0).map((i) => a.accept(req(`m${i}`))));
    const writes: Array<Promise<unknown>> = [];
    for (let i = 0; i < 300; i++) {
      writes.push(a.put('instance', `u${i % 40}`, { n: i }));
      if (i % 14 === 0 && i > 0) writes.push(a.complete(`m${i - 7}`, { status: 'succeeded' }));
    }
    await Promise.all(writes);
    await a.close();
    expect(existsSync(join(dir, 'journal', 'snapshot.json'))).toBe(true);
    expect(readFileSync(join(dir, 'journal', 'journal.log'), 'utf8').split('\n').length).toBeLessThan(300);
    const b = await open(dir);
    for (let u = 0; u < 40; u++) {
      const last = Math.max(...Array.from({ length: 300 }, (_, i) => i).filter((i) => i % 40 === u));
      expect(b.get('instance', `u${u}`)).toEqual({ n: last });
    }
    const expectedOpen = Array.from({ length: 300 }, (_, i) => i)
      .filter((i) => i % 7 === 0)
      .filter((i) => !(i + 7 < 300 && (i + 7) % 14 === 0))
      .map((i) => `m${i}`);
    expect(b.pending().map((r) => r.uniqueId).sort()).toEqual(expectedOpen.sort());
    await b.close();
  });

  test('the de-duplication window is bounded by age', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ca-journal-'));
    let now = 1000;
    const a = await open(dir, { now: () => now, windowMaxAgeMs: 60000 });
    await a.accept(req('old'));
    await a.complete('old', { status: 'succeeded' });
    now += 120000;
    await a.compactNow();
    expect(await a.accept(req('old'))).toBe('new');
    await a.close();
  });
});
