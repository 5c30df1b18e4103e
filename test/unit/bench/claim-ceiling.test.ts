/**
 * Placement's claim-write ceiling, against a local HTTP server standing in for Placement: the
 * scheduler's body, the concurrency asked for and never more, failures counted, and every consumer
 * it wrote deleted afterwards.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { measureClaimCeiling } from '../../../bench/claim-ceiling';

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

let server: Server;
let url: string;
let seen: Seen[];
let inFlight = 0;
let maxInFlight = 0;
let refuseEvery = 0;

beforeEach(async () => {
  seen = [];
  inFlight = maxInFlight = 0;
  refuseEvery = 0;
  server = createServer((req, res) => {
    // Claim writes in flight (the clean-up's deletes run at a concurrency of their own).
    const put = req.method === 'PUT';
    if (put) inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
      const puts = seen.filter((s) => s.method === 'PUT').length;
      // A little latency, so concurrent requests overlap.
      setTimeout(() => {
        if (put) inFlight--;
        res.statusCode = req.method === 'PUT' && refuseEvery > 0 && puts % refuseEvery === 0 ? 409 : 204;
        res.end();
      }, 5);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

test('writes the scheduler body with at most the concurrency asked for, then deletes every consumer', async () => {
  const r = await measureClaimCeiling({ placementUrl: url, provider: 'rp-1', resources: { VCPU: 2, MEMORY_MB: 2048 }, writes: 30, concurrency: 4 });
  const puts = seen.filter((s) => s.method === 'PUT');
  const deletes = seen.filter((s) => s.method === 'DELETE');
  expect(puts).toHaveLength(30);
  expect(r.claimed).toBe(30);
  expect(r.failed).toBe(0);
  expect(r.perSecond).toBeGreaterThan(0);
  expect(maxInFlight).toBeLessThanOrEqual(4);
  expect(maxInFlight).toBeGreaterThan(1);
  const body = JSON.parse(puts[0]?.body ?? '{}') as Record<string, unknown>;
  expect(body).toMatchObject({ allocations: { 'rp-1': { resources: { VCPU: 2, MEMORY_MB: 2048 } } }, consumer_generation: null });
  expect(puts[0]?.headers['openstack-api-version']).toBe('placement 1.28');
  const consumers = new Set(puts.map((p) => p.path));
  expect(consumers.size).toBe(30);
  expect(new Set(deletes.map((d) => d.path))).toEqual(consumers);
});

test('answers other than 204 are counted as failed, not as claims', async () => {
  refuseEvery = 5;
  const r = await measureClaimCeiling({ placementUrl: url, provider: 'rp-1', resources: { VCPU: 1 }, writes: 20, concurrency: 2 });
  expect(r.claimed).toBe(16);
  expect(r.failed).toBe(4);
});

test('a Placement that does not answer fails every write, and the measurement still returns', async () => {
  await new Promise<void>((r) => server.close(() => r()));
  const r = await measureClaimCeiling({ placementUrl: url, provider: 'rp-1', resources: { VCPU: 1 }, writes: 3, concurrency: 2 });
  expect(r).toMatchObject({ claimed: 0, failed: 3, perSecond: 0 });
  server = createServer();
  await new Promise<void>((r2) => server.listen(0, '127.0.0.1', r2));
});
