/**
 * The fleet claimer against a small in-memory Placement that answers as the real one does: candidates
 * from the room left, a claim refused with 409 when the room went meanwhile. Concurrent workers
 * that all pick the same best host must race, retry, and stop once nothing fits.
 */
import { Claimer } from '../../../bench/fleet/claimer';
import { NoAuth } from '../../../tracker/placement/auth';
import { PlacementHttp } from '../../../tracker/placement/http';
import type { HttpTransport, TransportRequest, TransportResponse } from '../../../tracker/placement/transport';

class TinyPlacement implements HttpTransport {
  /** Free MEMORY_MB slots (one per claim) by provider. */
  readonly free = new Map<string, number>();
  readonly paths: string[] = [];
  constructor(slots: Record<string, number>, private readonly capacity = 10) {
    for (const [rp, n] of Object.entries(slots)) this.free.set(rp, n);
  }

  async send(req: TransportRequest): Promise<TransportResponse> {
    // Let the other workers run between request and answer, as the network would.
    await new Promise((r) => setImmediate(r));
    const path = req.url.replace(/^https?:\/\/[^/]+/, '');
    this.paths.push(`${req.method} ${path.split('?')[0] ?? ''}`);
    if (req.method === 'GET' && path.startsWith('/allocation_candidates')) {
      const room = [...this.free].filter(([, n]) => n > 0);
      return this.answer(200, {
        allocation_requests: room.map(([rp]) => ({ allocations: { [rp]: { resources: { MEMORY_MB: 1 } } } })),
        provider_summaries: Object.fromEntries(room.map(([rp, n]) => [rp, { resources: { MEMORY_MB: { capacity: this.capacity, used: this.capacity - n } } }])),
      });
    }
    if (req.method === 'PUT' && path.startsWith('/allocations/')) {
      const body = JSON.parse(req.body ?? '{}') as { allocations: Record<string, unknown>; consumer_generation: unknown };
      expect(body.consumer_generation).toBeNull();
      const [rp = ''] = Object.keys(body.allocations);
      const n = this.free.get(rp) ?? 0;
      if (n <= 0) return this.answer(409, { errors: [{ status: 409, code: 'placement.undefined_code', detail: 'Unable to allocate inventory' }] });
      this.free.set(rp, n - 1);
      return this.answer(204, '');
    }
    return this.answer(404, { errors: [{ status: 404, detail: 'no such route' }] });
  }

  private answer(status: number, data: unknown): Promise<TransportResponse> {
    return Promise.resolve({ status, headers: {}, data });
  }
}

const httpOver = (p: TinyPlacement): PlacementHttp => new PlacementHttp({ auth: new NoAuth('http://placement.test'), transport: p, attempts: 1 });

test('workers racing for the same best host retry on 409 and fill every slot, never more', async () => {
  const placement = new TinyPlacement({ rpA: 3, rpB: 2 });
  const claimer = new Claimer({ http: httpOver(placement), workers: 3, subset: 1, flavors: [{ name: 'tiny', resources: { MEMORY_MB: 1 } }] });
  claimer.start();
  claimer.ready();
  await claimer.full;
  const stats = await claimer.stop();
  expect(stats.claimed).toBe(5);
  expect(claimer.consumers()).toHaveLength(5);
  expect([...placement.free.values()]).toEqual([0, 0]);
  // Three workers chose the same host from the same answer: some claims lost the race.
  expect(stats.conflicts).toBeGreaterThan(0);
  expect(stats.puts).toBe(stats.claimed + stats.conflicts);
  expect(stats.errors).toBe(0);
});

test('before ready(), no candidates means hosts are still coming: the claimer waits for them', async () => {
  const placement = new TinyPlacement({});
  const claimer = new Claimer({ http: httpOver(placement), workers: 1, flavors: [{ name: 'tiny', resources: { MEMORY_MB: 1 } }] });
  claimer.start();
  await new Promise((r) => setTimeout(r, 50));
  placement.free.set('rpA', 2);
  claimer.ready();
  await claimer.full;
  const stats = await claimer.stop();
  expect(stats.claimed).toBe(2);
  expect(stats.empty).toBeGreaterThanOrEqual(2);
});

test('the port group is asked for as a numbered request group', async () => {
  const placement = new TinyPlacement({ rpA: 1 });
  const claimer = new Claimer({ http: httpOver(placement), workers: 1, flavors: [{ name: 'vf', resources: { MEMORY_MB: 1 }, port: { SRIOV_NET_VF: 1 } }] });
  const seen: string[] = [];
  const send = placement.send.bind(placement);
  placement.send = (req) => {
    seen.push(req.url);
    return send(req);
  };
  claimer.start();
  claimer.ready();
  await new Promise((r) => setTimeout(r, 20));
  await claimer.stop();
  expect(seen[0]).toBe('http://placement.test/allocation_candidates?resources=MEMORY_MB:1&limit=50&resources1=SRIOV_NET_VF:1');
});
