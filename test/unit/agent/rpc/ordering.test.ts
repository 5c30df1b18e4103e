// FIFO semaphore, keyed serializer, recent-id set.
import { FifoSemaphore, KeyedSerializer, RecentIds, SemaphoreClosedError } from '../../../../agent/rpc/endpoint/ordering';
import { sleep } from './harness';

test('permits are granted in request order and handed back', async () => {
  const s = new FifoSemaphore(2);
  const order: number[] = [];
  const permits = [0, 1, 2, 3, 4].map((i) => {
    const p = s.acquire();
    void p.granted.then(
      () => order.push(i),
      () => undefined,
    );
    return p;
  });
  await sleep(0);
  expect(order).toEqual([0, 1]);
  expect([s.inUse, s.queued]).toEqual([2, 3]);
  permits[1]?.release();
  permits[1]?.release(); // idempotent
  await sleep(0);
  expect(order).toEqual([0, 1, 2]);
  permits[3]?.release(); // leaves the queue without ever holding
  permits[0]?.release();
  await sleep(0);
  expect(order).toEqual([0, 1, 2, 4]);
  expect(s.inUse).toBe(2);
});

test('close fails the waiters, keeps the holders', async () => {
  const s = new FifoSemaphore(1);
  const held = s.acquire();
  const waiting = s.acquire();
  s.close('stopping');
  await expect(held.granted).resolves.toBeUndefined();
  await expect(waiting.granted).rejects.toBeInstanceOf(SemaphoreClosedError);
  await expect(s.acquire().granted).rejects.toThrow('no longer accepting work: stopping');
  expect(() => new FifoSemaphore(0)).toThrow(RangeError);
});

test('one key runs in call order even when tasks fail; keys run in parallel', async () => {
  const k = new KeyedSerializer();
  const log: string[] = [];
  const task = (name: string, ms: number, fail = false) => async (): Promise<string> => {
    log.push(`${name}+`);
    await sleep(ms);
    log.push(`${name}-`);
    if (fail) throw new Error(name);
    return name;
  };
  const a1 = k.run('a', task('a1', 20, true));
  const a2 = k.run('a', task('a2', 1));
  const b1 = k.run('b', task('b1', 5));
  await expect(a1).rejects.toThrow('a1');
  await expect(a2).resolves.toBe('a2');
  await expect(b1).resolves.toBe('b1');
  expect(log.indexOf('a1-')).toBeLessThan(log.indexOf('a2+'));
  expect(log.indexOf('b1+')).toBeLessThan(log.indexOf('a1-'));
  await sleep(0);
  expect(k.activeKeys).toBe(0);
});

test('RecentIds forgets the oldest first', () => {
  const r = new RecentIds(2);
  r.add('a');
  r.add('b');
  r.add('a');
  r.add('c');
  expect([r.has('a'), r.has('b'), r.has('c')]).toEqual([true, false, true]);
  r.delete('a');
  expect(r.has('a')).toBe(false);
});
