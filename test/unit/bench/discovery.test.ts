/** Smoke test of the discovery benchmark: it runs here and reports what the lead wires into `npm run bench`. */
import { benchDiscovery } from '../../../bench/discovery';

test('benchDiscovery reports wall time, event-loop stall and per-probe times', async () => {
  const r = await benchDiscovery(2, 1);
  expect(r).toMatchObject({ benchmark: 'discovery', runs: 2, goals: { wallMs: 300, stallMs: 20 } });
  expect(r.providers).toBeGreaterThanOrEqual(1);
  expect(r.wallMs.median).toBeGreaterThan(0);
  expect(r.stallMs.max).toBeGreaterThanOrEqual(0);
  expect(Object.keys(r.probeMs)).toEqual(['cpu', 'memory', 'disk', 'gpu', 'nic']);
  expect(JSON.parse(JSON.stringify(r))).toEqual(r);
});
