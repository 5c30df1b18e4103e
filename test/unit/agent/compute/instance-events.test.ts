// The waiters for external events (nova's InstanceEvents): keys `<name>-<tag>`, completion,
// failure, timeout on the injected clock, cancel, and events nobody waits for.
import { eventKey, InstanceEvents } from '../../../../agent/compute/instance-events';
import { ManualClock } from '../../../helpers/manual-clock';

const I = 'inst-1';
const settled = async <T>(p: Promise<T>): Promise<{ done: boolean; value?: T }> => {
  let out: { done: boolean; value?: T } = { done: false };
  void p.then((value) => (out = { done: true, value }));
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return out;
};

test("the key is nova's `<name>-<tag>`, the name alone without a tag", () => {
  expect(eventKey('network-vif-plugged', 'p1')).toBe('network-vif-plugged-p1');
  expect(eventKey('network-changed', null)).toBe('network-changed');
});

test('completes once every key has come, not before', async () => {
  const clock = new ManualClock();
  const ev = new InstanceEvents(clock);
  const w = ev.prepare(I, ['network-vif-plugged-p1', 'network-vif-plugged-p2']);
  const waiting = w.wait(300_000);
  expect(ev.deliver(I, 'network-vif-plugged', 'p1', 'completed')).toBe(true);
  expect((await settled(waiting)).done).toBe(false);
  expect(ev.awaited(I)).toBe(1);
  expect(ev.deliver(I, 'network-vif-plugged', 'p2', 'completed')).toBe(true);
  expect(await waiting).toEqual({ kind: 'completed' });
  expect(ev.awaited(I)).toBe(0);
  // The timer was stopped: nothing is left sleeping on the clock.
  expect(clock.sleeping).toBe(0);
});

test('an event that came before the wait began still counts (registered before the action)', async () => {
  const ev = new InstanceEvents(new ManualClock());
  const w = ev.prepare(I, ['network-vif-plugged-p1']);
  expect(ev.deliver(I, 'network-vif-plugged', 'p1', 'completed')).toBe(true);
  expect(await w.wait(1000)).toEqual({ kind: 'completed' });
});

test('a failed event ends the wait at once as failed, naming its key', async () => {
  const ev = new InstanceEvents(new ManualClock());
  const w = ev.prepare(I, ['network-vif-plugged-p1', 'network-vif-plugged-p2']);
  const waiting = w.wait(300_000);
  ev.deliver(I, 'network-vif-plugged', 'p2', 'failed');
  expect(await waiting).toEqual({ kind: 'failed', failed: ['network-vif-plugged-p2'] });
  expect(ev.awaited(I)).toBe(0);
});

test('times out on the clock, naming the missing keys', async () => {
  const clock = new ManualClock();
  const ev = new InstanceEvents(clock);
  const w = ev.prepare(I, ['network-vif-plugged-p1', 'network-vif-plugged-p2']);
  const waiting = w.wait(300_000);
  ev.deliver(I, 'network-vif-plugged', 'p1', 'completed');
  clock.advance(299_999);
  expect((await settled(waiting)).done).toBe(false);
  clock.advance(1);
  expect(await waiting).toEqual({ kind: 'timeout', missing: ['network-vif-plugged-p2'] });
  // The waiter is gone: a late event is nobody's.
  expect(ev.deliver(I, 'network-vif-plugged', 'p2', 'completed')).toBe(false);
});

test('an event nobody waits for (other instance, other key, no waiter) is not delivered', () => {
  const ev = new InstanceEvents(new ManualClock());
  ev.prepare(I, ['network-vif-plugged-p1']);
  expect(ev.deliver('inst-2', 'network-vif-plugged', 'p1', 'completed')).toBe(false);
  expect(ev.deliver(I, 'network-vif-plugged', 'p9', 'completed')).toBe(false);
  expect(ev.deliver(I, 'network-vif-unplugged', 'p1', 'completed')).toBe(false);
  expect(ev.awaited(I)).toBe(1);
});

test('cancel drops the keys and ends a pending wait as timed out', async () => {
  const clock = new ManualClock();
  const ev = new InstanceEvents(clock);
  const w = ev.prepare(I, ['network-vif-plugged-p1']);
  const waiting = w.wait(300_000);
  w.cancel();
  expect(await waiting).toEqual({ kind: 'timeout', missing: ['network-vif-plugged-p1'] });
  expect(ev.awaited(I)).toBe(0);
  expect(ev.deliver(I, 'network-vif-plugged', 'p1', 'completed')).toBe(false);
  expect(clock.sleeping).toBe(0);
});

test('no keys: the wait resolves at once, completed, registering nothing', async () => {
  const ev = new InstanceEvents(new ManualClock());
  const w = ev.prepare(I, []);
  expect(ev.awaited(I)).toBe(0);
  expect(await w.wait(300_000)).toEqual({ kind: 'completed' });
});

test('two waiters of one instance each get their own keys', async () => {
  const ev = new InstanceEvents(new ManualClock());
  const a = ev.prepare(I, ['network-vif-plugged-p1']);
  const b = ev.prepare(I, ['network-vif-plugged-p2']);
  const wa = a.wait(1000);
  const wb = b.wait(1000);
  ev.deliver(I, 'network-vif-plugged', 'p2', 'completed');
  expect((await settled(wa)).done).toBe(false);
  expect(await wb).toEqual({ kind: 'completed' });
  ev.deliver(I, 'network-vif-plugged', 'p1', 'completed');
  expect(await wa).toEqual({ kind: 'completed' });
});
