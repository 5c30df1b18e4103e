// The delivery contract: journal before ack, duplicates dropped, redeliveries run once.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DedupeWindow } from '../../../../agent/journal/dedupe-window';
import { InMemoryRequestJournal } from '../../../../agent/journal/memory';
import { JournalError, type AcceptResult, type JournalRequest, type RequestJournal, type RequestOutcome } from '../../../../agent/journal/types';
import { arg } from '../../../../agent/rpc/endpoint/args';
import { Dispatcher } from '../../../../agent/rpc/endpoint/dispatcher';
import { encodeRequest, newId } from '../../../../agent/rpc/oslo/messages';
import { HOST_QUEUE, sleep, startHarness, until, type Harness } from './harness';

/** A journal whose `accept` the test releases by hand. */
class GatedJournal implements RequestJournal {
  readonly accepted: string[] = [];
  readonly completed: Array<[string, RequestOutcome]> = [];
  readonly gates: Array<(r: AcceptResult | Error) => void> = [];
  private readonly inner = new InMemoryRequestJournal(new DedupeWindow());

  accept(r: JournalRequest): Promise<AcceptResult> {
    return new Promise<AcceptResult>((resolve, reject) => {
      this.gates.push((res) => {
        if (res instanceof Error) return reject(res);
        if (res === 'duplicate') return resolve('duplicate');
        this.accepted.push(r.uniqueId);
        resolve(this.inner.accept(r));
      });
    });
  }

  async complete(id: string, outcome: RequestOutcome): Promise<void> {
    this.completed.push([id, outcome]);
    await this.inner.complete(id, outcome);
  }
}

function counting(): { dispatcher: Dispatcher; runs: string[] } {
  const runs: string[] = [];
  const dispatcher = new Dispatcher().register({
    name: 'work',
    versions: { min: '6.0' },
    args: { tag: arg.string() },
    handler: async (a) => {
      runs.push(a.tag);
      return a.tag;
    },
  });
  return { dispatcher, runs };
}

const cast = (tag: string, uniqueId = newId()): Buffer => encodeRequest({ method: 'work', args: { tag }, version: '6.0', uniqueId, context: {} });

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

test('the message stays unacknowledged until the journal accepted it', async () => {
  const journal = new GatedJournal();
  const { dispatcher, runs } = counting();
  h = await startHarness({ dispatcher, journal });
  h.broker.inject(HOST_QUEUE, cast('a'));
  await until(() => journal.gates.length === 1);
  // The agent "crashes" its connection before the journal answered: the broker still has it.
  h.broker.dropConnection();
  expect(h.broker.queueDepth(HOST_QUEUE)).toBe(1);
  expect(runs).toEqual([]);
  journal.gates[0]?.('new');
  await until(() => runs.length === 1);
  h.broker.reconnect();
  await sleep(50);
  // The redelivery is recognised (in flight / recently seen) and acked without running again.
  expect(runs).toEqual(['a']);
  expect(h.broker.queueDepth(HOST_QUEUE)).toBe(0);
  expect(h.server.stats.duplicates).toBe(1);
});

test('a journal failure leaves the message to the broker, which redelivers it', async () => {
  const journal = new GatedJournal();
  const { dispatcher, runs } = counting();
  h = await startHarness({ dispatcher, journal });
  h.broker.inject(HOST_QUEUE, cast('b'));
  await until(() => journal.gates.length === 1);
  journal.gates[0]?.(new JournalError('disk full'));
  await until(() => journal.gates.length === 2);
  journal.gates[1]?.('new');
  await until(() => runs.length === 1);
  expect(journal.completed).toEqual([[journal.accepted[0], { status: 'succeeded' }]]);
});

test('a request the journal already holds is acked and not run again', async () => {
  const journal = new GatedJournal();
  const { dispatcher, runs } = counting();
  h = await startHarness({ dispatcher, journal });
  h.broker.inject(HOST_QUEUE, cast('c'));
  await until(() => journal.gates.length === 1);
  journal.gates[0]?.('duplicate');
  await until(() => h?.broker.queueDepth(HOST_QUEUE) === 0 && h.server.stats.duplicates === 1);
  expect(runs).toEqual([]);
});

test('the same _unique_id published twice runs once', async () => {
  const { dispatcher, runs } = counting();
  h = await startHarness({ dispatcher });
  const id = newId();
  h.broker.inject(HOST_QUEUE, cast('d', id));
  h.broker.inject(HOST_QUEUE, cast('d', id));
  h.broker.inject(HOST_QUEUE, cast('e'));
  await until(() => runs.length === 2);
  await sleep(20);
  expect(runs).toEqual(['d', 'e']);
});

test('a persisted window recognises a duplicate after a restart', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ca-window-'));
  const path = join(dir, 'window.json');
  const id = newId();
  const first = new InMemoryRequestJournal(new DedupeWindow({ path }));
  const req: JournalRequest = { uniqueId: id, method: 'm', version: '6.0', namespace: null, args: {}, context: {}, orderingKey: undefined, reply: undefined, receivedAt: 0 };
  await expect(first.accept(req)).resolves.toBe('new');
  const window = new DedupeWindow({ path });
  await window.load();
  const second = new InMemoryRequestJournal(window);
  await expect(second.accept(req)).resolves.toBe('duplicate');
  await expect(second.accept({ ...req, uniqueId: newId() })).resolves.toBe('new');
  await rm(dir, { recursive: true, force: true });
});

test('messages redelivered after a connection loss run once each', async () => {
  const { dispatcher, runs } = counting();
  h = await startHarness({ dispatcher, prefetch: 4 });
  for (let i = 0; i < 50; i++) h.broker.inject(HOST_QUEUE, cast(`m${i}`));
  await until(() => runs.length >= 5);
  h.broker.dropConnection();
  h.broker.reconnect();
  await until(() => runs.length === 50 && h?.broker.queueDepth(HOST_QUEUE) === 0);
  await sleep(30);
  expect(new Set(runs).size).toBe(50);
  expect(runs).toHaveLength(50);
});

test('the journal is asked in delivery order, even when slots are scarce', async () => {
  const order: string[] = [];
  const inner = new InMemoryRequestJournal(new DedupeWindow());
  const journal: RequestJournal = {
    accept: async (r) => {
      order.push(String(r.args.tag));
      await sleep(r.args.tag === 't0' ? 30 : 1);
      return inner.accept(r);
    },
    complete: (id, o) => inner.complete(id, o),
  };
  const { dispatcher, runs } = counting();
  h = await startHarness({ dispatcher, journal, prefetch: 2 });
  const tags = [...Array(20).keys()].map((i) => `t${i}`);
  for (const t of tags) h.broker.inject(HOST_QUEUE, cast(t));
  await until(() => runs.length === 20);
  expect(order).toEqual(tags);
});

test("with kolla's prefetch of 1, a request waiting for a later one is not a deadlock: slots are executor_thread_pool_size", async () => {
  // A build waits for network-vif-plugged, which arrives as a later message on the same queue.
  let release: () => void = () => undefined;
  const released = new Promise<void>((r) => (release = r));
  const runs: string[] = [];
  const dispatcher = new Dispatcher()
    .register({ name: 'wait', versions: { min: '6.0' }, args: { tag: arg.string() }, handler: async (a) => (await released, runs.push(a.tag), a.tag) })
    .register({ name: 'wake', versions: { min: '6.0' }, args: { tag: arg.string() }, handler: async (a) => (release(), runs.push(a.tag), a.tag) });
  h = await startHarness({ dispatcher, prefetch: 1, maxInProgress: 4 });
  h.broker.inject(HOST_QUEUE, encodeRequest({ method: 'wait', args: { tag: 'build' }, version: '6.0', uniqueId: newId(), context: {} }));
  h.broker.inject(HOST_QUEUE, encodeRequest({ method: 'wake', args: { tag: 'event' }, version: '6.0', uniqueId: newId(), context: {} }));
  await until(() => runs.length === 2, 2000);
  expect(runs).toEqual(['event', 'build']);
});

test('slots bound the requests in progress: with 1 slot the second waits for the first', async () => {
  let release: () => void = () => undefined;
  const released = new Promise<void>((r) => (release = r));
  const runs: string[] = [];
  const dispatcher = new Dispatcher().register({ name: 'work', versions: { min: '6.0' }, args: { tag: arg.string() }, handler: async (a) => {
    runs.push(`start ${a.tag}`);
    if (a.tag === 'a') await released;
    return a.tag;
  } });
  h = await startHarness({ dispatcher, prefetch: 1, maxInProgress: 1 });
  h.broker.inject(HOST_QUEUE, cast('a'));
  h.broker.inject(HOST_QUEUE, cast('b'));
  await sleep(50);
  expect(runs).toEqual(['start a']);
  release();
  await until(() => runs.length === 2);
});
