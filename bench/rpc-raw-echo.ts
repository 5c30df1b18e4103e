/**
 * The floor under every RPC number in `bench/rpc.ts`: a bare amqplib echo with no RPC layer (no
 * envelope, no dispatch, no journal), one process answering on a queue, another sending one
 * message at a time and waiting for the answer. A sequential RPC call can be no faster than
 * this round trip through the broker, whatever the server does.
 *
 *   node dist/bench/rpc-raw-echo.js <amqp_url> <queue>     (prints READY, echoes until stdin ends)
 */
import { connect, type ChannelModel } from 'amqplib';

/** Echoes every message on `queue` to its reply-to queue, with publisher confirms as our replies use. */
export async function serveRawEcho(url: string, queue: string): Promise<ChannelModel> {
  const conn = await connect(url, { noDelay: true });
  const ch = await conn.createChannel();
  await ch.assertQueue(queue, { autoDelete: true });
  const replies = await conn.createConfirmChannel();
  await ch.consume(queue, (m) => {
    if (!m) return;
    replies.publish('', String(m.properties.replyTo), m.content, { mandatory: true });
    ch.ack(m);
  });
  return conn;
}

/** Sequential round trips per second and p50 (ms) against `serveRawEcho`, `count` messages of `body`. */
export async function rawRoundTrips(url: string, queue: string, body: Buffer, count: number): Promise<{ rate: number; p50_ms: number }> {
  const conn = await connect(url, { noDelay: true });
  try {
    const ch = await conn.createChannel();
    const own = await ch.assertQueue('', { exclusive: true });
    let answered: (() => void) | undefined;
    await ch.consume(own.queue, () => answered?.(), { noAck: true });
    const once = (): Promise<void> =>
      new Promise<void>((resolve) => {
        answered = resolve;
        ch.publish('', queue, body, { replyTo: own.queue });
      });
    for (let i = 0; i < 20; i++) await once();
    const lat: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < count; i++) {
      const s = performance.now();
      await once();
      lat.push(performance.now() - s);
    }
    const seconds = (performance.now() - t0) / 1000;
    lat.sort((a, b) => a - b);
    return { rate: count / seconds, p50_ms: lat[Math.floor(lat.length / 2)] ?? NaN };
  } finally {
    await conn.close();
  }
}

if (require.main === module) {
  const [url, queue] = process.argv.slice(2);
  if (!url || !queue) {
    process.stderr.write('usage: rpc-raw-echo <amqp_url> <queue>\n');
    process.exitCode = 2;
  } else {
    serveRawEcho(url, queue).then(
      (conn) => {
        process.stdout.write('READY\n');
        process.stdin.on('end', () => void conn.close().finally(() => process.exit(0)));
        process.stdin.resume();
      },
      (e: unknown) => {
        process.stderr.write(`rpc-raw-echo: ${e instanceof Error ? e.message : String(e)}\n`);
        process.exitCode = 1;
      },
    );
  }
}
