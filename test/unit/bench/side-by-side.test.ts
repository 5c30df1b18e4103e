/** The rows that put the tracker and nova's report client side by side, and their ratios. */
import type { NovaPass } from '../../../bench/nova-report-client';
import { ratio, sideBySideRows, summarizeNova, type NovaSummary } from '../../../bench/side-by-side';

const novaPass = (get: number, put: number, post: number, wallMs: number, over: Partial<NovaPass> = {}): NovaPass => ({
  requests: { GET: get, PUT: put, POST: post, DELETE: 0 },
  conflicts: 0,
  attempts: 1,
  wallMs,
  cpuMs: wallMs / 10,
  routes: {},
  rcOnly: { requests: { GET: get - 1, PUT: put, POST: post, DELETE: 0 }, wallMs: wallMs - 5 },
  ...over,
});

describe('ratio', () => {
  test.each([
    [148, 276, '0.54x'],
    [1, 69, '0.014x'],
    [300, 150, '2x'],
    [0, 0, '1x (both 0)'],
    [1, 0, 'n/a (nova 0)'],
    [NaN, 3, 'n/a'],
  ])('%d / %d is %s', (ours, theirs, text) => {
    expect(ratio(ours, theirs)).toBe(text);
  });
});

describe('summarizeNova', () => {
  test('medians of each figure over the runs; writes are PUT + POST + DELETE', () => {
    const s = summarizeNova([novaPass(75, 132, 69, 2600), novaPass(75, 132, 69, 2400), novaPass(77, 132, 69, 2500, { conflicts: 1, attempts: 2 })]);
    expect(s).toEqual({ runs: 3, reads: 75, writes: 201, conflicts: 0, attempts: 1, wallMs: 2500, cpuMs: 250, rcOnlyRequests: 275, rcOnlyWallMs: 2495 });
  });

  test('no runs, no summary', () => {
    expect(summarizeNova([])).toBeUndefined();
  });
});

describe('sideBySideRows', () => {
  const tracker = { reads: 75, writes: 73, conflicts: 0, wallMs: 1630.04, cpuMs: 310 };
  const nova: NovaSummary = { runs: 1, reads: 75, writes: 201, conflicts: 0, attempts: 1, wallMs: 2511, cpuMs: 288, rcOnlyRequests: 275, rcOnlyWallMs: 2490 };

  test('both sides of each figure and the tracker / nova ratio of requests and wall', () => {
    const rows = sideBySideRows('69 providers, first sync', tracker, nova, { ratio: 'wall <= 0.6x nova' });
    expect(rows).toEqual([
      { scenario: '69 providers, first sync', metric: 'requests (reads/writes/409)', value: '75/73/0', baseline: 'nova RT 75/201/0 = 276 (1 attempt); RC only 275' },
      { scenario: '69 providers, first sync', metric: 'wall', value: 1630, unit: 'ms', baseline: 'nova RT 2511 ms; RC only 2490 ms' },
      { scenario: '69 providers, first sync', metric: 'agent CPU', value: 310, unit: 'ms', baseline: 'nova client 288 ms' },
      { scenario: '69 providers, first sync', metric: 'tracker / nova RT: requests, wall', value: '0.54x, 0.65x', goal: 'wall <= 0.6x nova' },
    ]);
  });

  test('a redriven pass says how many attempts it took; a requests goal goes on the requests row', () => {
    const rows = sideBySideRows('s', { ...tracker, reads: 2, writes: 1 }, { ...nova, reads: 348, writes: 2, conflicts: 1, attempts: 2 }, { requests: '0 writes' });
    expect(rows[0]).toMatchObject({ goal: '0 writes', baseline: 'nova RT 348/2/1 = 350 (2 attempts); RC only 275' });
    expect(rows[3]?.goal).toBeUndefined();
  });

  test('a skipped nova side gives the reason and no ratio', () => {
    const rows = sideBySideRows('s', tracker, 'python3-nova is not installed and this is not root to install it');
    expect(rows[0]?.baseline).toBe('skipped: python3-nova is not installed and this is not root to install it');
    expect(rows[1]?.baseline).toBeUndefined();
    expect(rows[3]?.value).toBe('n/a (nova skipped)');
  });
});
