// AmqpBroker's parts that need no broker: failover rotation and delays, confirm bookkeeping,
// argument encoding.
import { EventEmitter } from 'node:events';
import type { ConfirmChannel } from 'amqplib';
import { parseTransportUrl } from '../../../../config/transport-url';
import { amqpArguments, isBrokerRefusal } from '../../../../agent/rpc/amqp/amqp-channel';
import { describeAmqpError } from '../../../../agent/rpc/amqp/connection';
import { HostRotation, ReconnectSchedule, reconnectDelayMs } from '../../../../agent/rpc/amqp/amqp-failover';
import { ConfirmPublisher } from '../../../../agent/rpc/amqp/amqp-publisher';
import { BrokerClosedError, PublishAbortedError, PublishNackedError, type OutgoingMessage } from '../../../../agent/rpc/amqp/broker';
import { RABBIT } from './harness';

test("reconnect delay: oslo's 1 s + 2 s per attempt, capped at 30 s, ±20 % jitter", () => {
  const mid = (): number => 0.5;
  expect([1, 2, 3, 10, 16, 50].map((a) => reconnectDelayMs(a, RABBIT, mid))).toEqual([1000, 3000, 5000, 19000, 30000, 30000]);
  expect(reconnectDelayMs(2, RABBIT, () => 0)).toBe(2400);
  expect(reconnectDelayMs(2, RABBIT, () => 0.999999)).toBeLessThanOrEqual(3600);
  expect(reconnectDelayMs(40, RABBIT, () => 0.999999)).toBe(30000);
});

test("reconnect schedule: a refused port is retried every rabbit_retry_interval; anything that answered backs off as oslo's", () => {
  const s = new ReconnectSchedule(RABBIT, () => 0.5, () => 0);
  s.connected();
  s.failed('disconnected', 'CONNECTION_FORCED - broker forced connection closure with reason \'shutdown\'');
  expect(s.delayMs()).toBe(1000);
  for (let i = 0; i < 20; i++) {
    s.failed('connect-failed', 'ECONNREFUSED');
    expect(s.delayMs()).toBe(1000); // oslo alone would be at 30 s by now
  }
  // The port answers but the connection fails: oslo's growth resumes from the failures that reached something.
  s.failed('connect-failed', 'ECONNRESET');
  expect(s.delayMs()).toBe(3000);
  s.failed('connect-failed', 'ETIMEDOUT');
  expect(s.delayMs()).toBe(5000);
  s.failed('connect-failed', 'ECONNREFUSED');
  expect(s.delayMs()).toBe(1000);
  s.failed('connect-failed', 'access refused (check the user and password in transport_url)');
  expect(s.delayMs()).toBe(7000);
  // A new connection starts the count again.
  s.connected();
  s.failed('disconnected', 'ECONNRESET');
  expect(s.delayMs()).toBe(1000);
  // The operator's interval is the cadence of refused retries (with the same jitter).
  const slow = new ReconnectSchedule({ ...RABBIT, rabbit_retry_interval: 4 }, () => 0, () => 0);
  slow.failed('connect-failed', 'ECONNREFUSED');
  expect(slow.delayMs()).toBe(3200);
});

test('reconnect schedule: the account of an outage, none for the first connection', () => {
  let now = 1000;
  const s = new ReconnectSchedule(RABBIT, () => 0.5, () => now);
  s.failed('connect-failed', 'ECONNREFUSED'); // at start-up: not an outage
  now = 2000;
  expect(s.connected()).toBeUndefined();
  now = 10_000;
  s.failed('disconnected', 'ECONNRESET');
  for (const t of [11_000, 12_000, 13_000]) {
    now = t;
    s.failed('connect-failed', 'ECONNREFUSED');
  }
  now = 13_400;
  expect(s.connected()).toEqual({ outageMs: 3400, sinceLastFailureMs: 400, failedAttempts: 3 });
  now = 20_000;
  s.failed('disconnected', 'ECONNRESET');
  now = 21_500; // reconnected at the first attempt
  expect(s.connected()).toEqual({ outageMs: 1500, sinceLastFailureMs: 1500, failedAttempts: 0 });
  now = 30_000;
  expect(s.connected()).toBeUndefined(); // no loss since
});

test('rotation: round-robin over the transport_url hosts; the URL object follows it', () => {
  const t = parseTransportUrl('rabbit://u1:p1@h1:5672,u2:p2@h2:5673/vh');
  const r = new HostRotation(t, RABBIT, 'name');
  const url = r.url();
  expect([url.hostname, url.port, url.username, url.password, url.vhost]).toEqual(['h1', 5672, 'u1', 'p1', 'vh']);
  r.advance();
  expect([url.hostname, url.port, url.username]).toEqual(['h2', 5673, 'u2']);
  r.advance();
  expect(url.hostname).toBe('h1');
  expect(r.socket.servername).toBeUndefined();
  expect(r.socket.noDelay).toBe(true);
  expect(r.socket.clientProperties).toMatchObject({ connection_name: 'name' });
});

test('rotation: shuffle never picks the same host twice in a row', () => {
  const t = parseTransportUrl('rabbit://a:1,b:2,c:3/');
  let x = 0;
  const r = new HostRotation(t, { ...RABBIT, kombu_failover_strategy: 'shuffle' }, 'n', () => [0.1, 0.9, 0.5, 0.0][x++ % 4] ?? 0);
  const seen: string[] = [r.current.label];
  for (let i = 0; i < 8; i++) {
    r.advance();
    seen.push(r.current.label);
  }
  for (let i = 1; i < seen.length; i++) expect(seen[i]).not.toBe(seen[i - 1]);
});

test('queue arguments are signed 32-bit ints, as py-amqp writes them', () => {
  expect(amqpArguments({ 'x-expires': 1800000, 'x-queue-type': 'quorum', big: 2 ** 40 })).toEqual({
    'x-expires': { '!': 'int', value: 1800000 },
    'x-queue-type': 'quorum',
    big: 2 ** 40,
  });
  expect(isBrokerRefusal(Object.assign(new Error('x'), { code: 406 }))).toBe(true);
  expect(isBrokerRefusal(new Error('Connection closed'))).toBe(false);
});

/** Enough of a ConfirmChannel: records publishes, lets the test ack, nack, return and close. */
class FakeConfirm extends EventEmitter {
  readonly sent: Array<{ key: string; body: Buffer; cb: (err: unknown) => void }> = [];
  full = false;
  publish(_x: string, key: string, body: Buffer, _o: unknown, cb: (err: unknown) => void): boolean {
    this.sent.push({ key, body, cb });
    return !this.full;
  }
  ack(i: number): void {
    this.sent[i]?.cb(null);
  }
  close(): void {
    for (const s of this.sent) s.cb(new Error('channel closed'));
    this.emit('close');
  }
}
const asChannel = (c: FakeConfirm): ConfirmChannel => c as unknown as ConfirmChannel;
const msg = (key: string, mandatory = false): OutgoingMessage => ({ exchange: '', routingKey: key, body: Buffer.from(key), properties: {}, mandatory });

test('publisher: unconfirmed messages are sent again, in order, on the next channel', async () => {
  const p = new ConfirmPublisher();
  const a = p.publish(msg('a'));
  const first = new FakeConfirm();
  p.attach(asChannel(first));
  const b = p.publish(msg('b'));
  expect(first.sent.map((s) => s.key)).toEqual(['a', 'b']);
  first.ack(0);
  await expect(a).resolves.toBe('confirmed');
  first.close();
  p.detach();
  const c = p.publish(msg('c'));
  const second = new FakeConfirm();
  p.attach(asChannel(second));
  expect(second.sent.map((s) => s.key)).toEqual(['b', 'c']);
  second.ack(0);
  second.ack(1);
  await expect(Promise.all([b, c])).resolves.toEqual(['confirmed', 'confirmed']);
  expect(p.size).toBe(0);
});

test('publisher: returned, nacked, aborted, closed', async () => {
  const p = new ConfirmPublisher();
  const ch = new FakeConfirm();
  p.attach(asChannel(ch));
  const returned = p.publish(msg('reply_gone', true));
  ch.emit('return', { fields: { exchange: '', routingKey: 'reply_gone' }, content: Buffer.from('reply_gone') });
  ch.ack(0);
  await expect(returned).resolves.toBe('returned');
  const nacked = p.publish(msg('n'));
  ch.sent[1]?.cb(new Error('message nacked'));
  await expect(nacked).rejects.toBeInstanceOf(PublishNackedError);
  const abort = new AbortController();
  const aborted = p.publish(msg('x'), abort.signal);
  abort.abort();
  await expect(aborted).rejects.toBeInstanceOf(PublishAbortedError);
  const pending = p.publish(msg('y'));
  p.close();
  await expect(pending).rejects.toBeInstanceOf(BrokerClosedError);
  await expect(p.publish(msg('z'))).rejects.toBeInstanceOf(BrokerClosedError);
});

test('publisher: waits for drain when the socket buffer is full', () => {
  const p = new ConfirmPublisher();
  const ch = new FakeConfirm();
  ch.full = true;
  p.attach(asChannel(ch));
  void p.publish(msg('1'));
  void p.publish(msg('2'));
  expect(ch.sent.map((s) => s.key)).toEqual(['1']);
  ch.full = false;
  ch.emit('drain');
  expect(ch.sent.map((s) => s.key)).toEqual(['1', '2']);
});

test('describeAmqpError: errno codes, broker texts, no credentials', () => {
  expect(describeAmqpError(new Error('Error: connect ECONNREFUSED 127.0.0.1:1'))).toBe('ECONNREFUSED');
  expect(describeAmqpError(Object.assign(new Error('x'), { code: 'ETIMEDOUT' }))).toBe('ETIMEDOUT');
  expect(
    describeAmqpError(
      Object.assign(new Error('Channel closed by server: 406 (PRECONDITION-FAILED) with message "PRECONDITION_FAILED - inequivalent arg \'durable\' for exchange \'nova\'"'), { code: 406 }),
    ),
  ).toBe("PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'nova'");
  expect(describeAmqpError(new Error('Handshake terminated by server: 403 (ACCESS-REFUSED) with message "ACCESS_REFUSED - Login was refused"'))).toContain('access refused');
  expect(describeAmqpError('plain')).toBe('plain');
});
