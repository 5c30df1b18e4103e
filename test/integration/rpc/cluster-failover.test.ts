// A three-node RabbitMQ 4 cluster (2025.1's RabbitMQ 4.0.5, private nodes on this machine) with
// quorum topic queues, as kolla 2025.1 deploys it. The agent's RPC server starts on the first
// host of a transport_url naming all three nodes; a publisher (the agent's own RPC client, which
// waits for publisher confirms) casts a numbered stream to its topic. Mid-stream, the node the
// agent consumes from (asked of the broker) is stopped, or crashed with SIGKILL: the agent must
// consume again on another node within 10 s, and every cast the publisher got a confirm for must
// reach the agent. At-least-once on the wire: the copies the agent drops as duplicates are
// counted and reported; none may be missing, none may run twice. The node is then started again
// while the stream goes on: it rejoins and the topic queue's quorum is whole again.
// Skipped, saying why, only where the 2025.1 root cannot be built or run.
import { silentLogger } from '../../../lib/logging/logger';
import { parseTransportUrl } from '../../../config/transport-url';
import { AmqpBroker } from '../../../agent/rpc/amqp/amqp-broker';
import type { BrokerStatus } from '../../../agent/rpc/amqp/broker';
import { arg } from '../../../agent/rpc/endpoint/args';
import { RpcClient } from '../../../agent/rpc/endpoint/client';
import { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import { agentStack, RABBIT, unique, type AgentStack } from './helpers';
import { clusterUrl, releaseUnavailableReason, startPrivateCluster, type PrivateCluster, type PrivateRabbit } from './private-rabbit';

jest.setTimeout(180_000);

const unavailable = releaseUnavailableReason('2025.1');
if (unavailable) console.log(`cluster failover test skipped: ${unavailable}`);
const clusterTest = unavailable ? test.skip : test;

const rabbit = { ...RABBIT, rabbit_quorum_queue: true };
const exchange = unique('cluster-x');
const FAILOVER_BOUND_MS = 10_000;
/** The agent's RPC slots, and the deliveries the broker may push unacknowledged. */
const PREFETCH = 16;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const log = (line: string): boolean => process.stdout.write(`cluster-failover: ${line}\n`);

let cluster: PrivateCluster | undefined;
let agent: AgentStack | undefined;
let publisherBroker: AmqpBroker | undefined;
/** The running scenario's cast stream; afterAll ends it should the scenario fail half-way. */
let publishing = false;

beforeAll(async () => {
  if (unavailable) return;
  const t0 = Date.now();
  cluster = await startPrivateCluster({ release: '2025.1', size: 3 });
  log(`three-node cluster up in ${Date.now() - t0} ms: ${cluster.nodes.map((n) => `${n.node} :${n.port}`).join(', ')}`);
});
afterAll(async () => {
  publishing = false;
  await agent?.stop().catch(() => undefined);
  await publisherBroker?.close().catch(() => undefined);
  await cluster?.stop();
});

/**
 * The consumers of `queue` (list_consumers, asked of `via`): the node whose channel carries each,
 * and its activity status. A quorum queue keeps a crashed node's consumer as `suspected_down`
 * (it may be a partition) until that node is back; no messages go to it meanwhile.
 */
async function consumers(via: PrivateRabbit, queue: string): Promise<Array<{ node: string; status: string }>> {
  const out = await via.ctl('list_consumers', '-q', '--no-table-headers', 'queue_name', 'channel_pid', 'activity_status');
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter(([q]) => q === queue)
    .map(([, pid, status]) => ({ node: /^<(.+@[^.]+)\./.exec(pid ?? '')?.[1] ?? `unparsed pid ${pid ?? ''}`, status: status ?? '' }));
}

const live = (cs: ReadonlyArray<{ node: string; status: string }>): string[] => cs.filter((c) => c.status === 'up').map((c) => c.node);

/** The topic queue's members and those of them online (list_queues, asked of `via`). */
async function quorumMembers(via: PrivateRabbit, queue: string): Promise<{ members: number; online: number; type: string; leader: string }> {
  const out = await via.ctl('list_queues', '-q', '--no-table-headers', 'name', 'type', 'members', 'online', 'leader');
  const line = out.split('\n').find((l) => l.trim().startsWith(`${queue}\t`) || l.trim().startsWith(`${queue} `));
  if (!line) return { members: 0, online: 0, type: 'missing', leader: '' };
  const [, type = '', members = '', online = '', leader = ''] = line.trim().split('\t');
  const count = (s: string): number => (s.match(/@localhost/g) ?? []).length;
  return { type, members: count(members), online: count(online), leader };
}

/**
 * Stops (`stop`: rabbitmqctl stop) or crashes (`kill`: SIGKILL) the node the agent consumes from,
 * mid-stream. The publisher starts on the same node (`publisherOn` 'same': both fail over) or on the
 * next one ('other': the stream goes on while the agent is away). A handler taking `handlerMs`
 * longer than the cast interval allows keeps every slot busy, so deliveries wait, unacknowledged,
 * when the node goes: the broker delivers them again, and each must still run exactly once.
 */
async function failover(how: 'stop' | 'kill', publisherOn: 'same' | 'other', handlerMs: number): Promise<void> {
  const c = cluster as PrivateCluster;
  const started = Date.now();
  const topic = unique(`cluster-${how}`);
  const target = { exchange, topic, version: '6.0' };
  const seen = new Map<number, number>();
  const dispatcher = new Dispatcher().register({
    name: 'record',
    versions: { min: '6.0' },
    args: { seq: arg.int() },
    handler: async (a) => {
      seen.set(a.seq, (seen.get(a.seq) ?? 0) + 1);
      if (handlerMs > 0) await sleep(handlerMs);
    },
  });
  agent = await agentStack({ url: c.url, exchange, topic, server: `cluster-host-${how}`, dispatcher, rabbit, prefetch: PREFETCH });
  const events: Array<{ at: number; s: BrokerStatus; received: number }> = [];
  const server = agent.server;
  agent.broker.onStatus((s) => events.push({ at: Date.now(), s, received: server.stats.received }));

  const publisherUrl = publisherOn === 'same' ? c.url : clusterUrl([...c.nodes.slice(1), ...c.nodes.slice(0, 1)]);
  publisherBroker = new AmqpBroker({ transport: parseTransportUrl(publisherUrl), rabbit, logger: silentLogger(), initialAttempts: 3, connectionName: `cluster-publisher-${how}` });
  await publisherBroker.start();
  const publisherEvents: BrokerStatus[] = [];
  publisherBroker.onStatus((s) => publisherEvents.push(s));
  const publisher = new RpcClient({ broker: publisherBroker, logger: silentLogger(), rabbit, controlExchange: exchange, defaultTimeoutMs: 60_000 });

  // Where everything is before the stop: the broker's own view of the agent's consumer.
  const [first] = c.nodes;
  const onNodes = live(await consumers(first as PrivateRabbit, topic));
  expect(onNodes).toHaveLength(1);
  const victim = c.nodes.find((n) => n.node === onNodes[0]);
  if (!victim) throw new Error(`the consumer is on ${String(onNodes[0])}, not a cluster node`);
  const survivor = c.nodes.find((n) => n !== victim) as PrivateRabbit;
  const before = await quorumMembers(survivor, topic);
  expect(before).toMatchObject({ type: 'quorum', members: 3, online: 3 });

  // One cast every 10 ms, each waiting for its own confirm, for the whole scenario.
  const confirmed = new Set<number>();
  const confirmedAt: number[] = [];
  const failed = new Map<number, string>();
  const casts: Array<Promise<void>> = [];
  publishing = true;
  const pacer = (async () => {
    for (let seq = 0; publishing; seq++) {
      casts.push(
        publisher.cast(target, 'record', { seq }).then(
          () => {
            confirmed.add(seq);
            confirmedAt.push(Date.now());
          },
          (e: unknown) => void failed.set(seq, e instanceof Error ? e.message : String(e)),
        ),
      );
      await sleep(10);
    }
  })();
  while (confirmed.size < 200) await sleep(10);

  // The agent's node goes away mid-stream; the clock runs from the moment it is told to.
  const stopAt = Date.now();
  const issuedAtStop = casts.length;
  const confirmedAtStop = confirmed.size;
  const waitingAtStop = Math.max(0, server.stats.inProgress - PREFETCH); // beyond the slots: delivered, not yet acknowledged
  let goneAt = Infinity;
  const stopping = (how === 'stop' ? victim.stopNode() : victim.killNode()).then(() => void (goneAt = Date.now()));
  const deadline = stopAt + 30_000;
  const connectedAfter = (): { at: number; s: BrokerStatus; received: number } | undefined => events.find((e) => e.at >= stopAt && e.s.type === 'connected');
  while (!connectedAfter() && Date.now() < deadline) await sleep(20);
  const reconnected = connectedAfter();
  const reconnectedAt = reconnected?.at ?? Infinity;
  // The first delivery on the new connection (nothing arrives on the dead one).
  while (reconnected && server.stats.received === reconnected.received && Date.now() < deadline) await sleep(5);
  const firstDeliveryAt = reconnected && server.stats.received > reconnected.received ? Date.now() : Infinity;
  await stopping;
  const stoppedMs = goneAt - stopAt;
  const lost = events.find((e) => e.at >= stopAt && e.s.type === 'disconnected');
  const consumersAfter = await consumers(survivor, topic);
  const onNodesAfter = live(consumersAfter);
  const during = await quorumMembers(survivor, topic);
  const confirmedWhileAway = confirmedAt.filter((t) => t > stopAt && t < reconnectedAt).length;
  log(
    `[${how}] node ${victim.node} (consumer; queue leader ${before.leader}) told to go at +${stopAt - started} ms, its VM gone after ${stoppedMs} ms; ` +
      `agent lost its connection after ${lost ? lost.at - stopAt : NaN} ms, consuming again (connected, consumers restored) after ` +
      `${reconnectedAt - stopAt} ms on ${reconnected?.s.type === 'connected' ? reconnected.s.broker : '?'} ` +
      `(consumers: ${consumersAfter.map((x) => `${x.node} ${x.status}`).join(', ')}), ` +
      `first delivery there after ${firstDeliveryAt - stopAt} ms (agent's broker events: ${events.filter((e) => e.at >= stopAt).map((e) => e.s.type).join(', ')}); publisher (${publisherOn} node) had ${confirmedWhileAway} casts confirmed meanwhile; queue leader now ${during.leader}, ${during.online}/${during.members} members online`,
  );
  expect(reconnectedAt - stopAt).toBeLessThan(FAILOVER_BOUND_MS);
  expect(firstDeliveryAt - stopAt).toBeLessThan(FAILOVER_BOUND_MS);
  expect(onNodesAfter).toHaveLength(1);
  expect(onNodesAfter[0]).not.toBe(victim.node);
  expect(c.nodes.map((n) => n.node)).toContain(onNodesAfter[0]);
  // The publisher on the same node failed over too; one on another node went on publishing.
  if (publisherOn === 'same') expect(publisherEvents.some((s) => s.type === 'disconnected')).toBe(true);
  else {
    expect(publisherEvents).toEqual([]);
    expect(confirmedWhileAway).toBeGreaterThan(0);
  }
  const confirmedAfterFailover = confirmed.size;
  await sleep(2000);
  expect(confirmed.size).toBeGreaterThan(confirmedAfterFailover + 50);

  // The node comes back while the stream goes on; the queue's quorum is whole again.
  const restartAt = Date.now();
  await victim.startNode();
  const upAgainMs = Date.now() - restartAt;
  let q = await quorumMembers(survivor, topic);
  const quorumDeadline = Date.now() + 30_000;
  while (q.online < 3 && Date.now() < quorumDeadline) {
    await sleep(200);
    q = await quorumMembers(survivor, topic);
  }
  const wholeMs = Date.now() - restartAt;
  await sleep(1000);
  publishing = false;
  await pacer;
  await Promise.all(casts);
  expect(q).toMatchObject({ type: 'quorum', members: 3, online: 3 });
  // The returned node forgot the crashed channel's consumer: only the agent's is left.
  expect(await consumers(victim, topic)).toEqual([{ node: onNodesAfter[0], status: 'up' }]);

  const drainDeadline = Date.now() + 30_000;
  while ([...confirmed].some((s) => !seen.has(s)) && Date.now() < drainDeadline) await sleep(50);
  const missing = [...confirmed].filter((s) => !seen.has(s));
  const twice = [...seen.entries()].filter(([, n]) => n > 1).map(([s]) => s);
  const stats = server.stats;
  log(
    `[${how}] casts issued ${casts.length} (${issuedAtStop} before the stop), confirmed ${confirmed.size} (${confirmedAtStop} before the stop), ` +
      `failed ${failed.size}${failed.size ? ` (${[...new Set(failed.values())].join('; ')})` : ''}; received ${seen.size}, ` +
      `confirmed but missing ${missing.length}, run twice ${twice.length}, redelivered or re-published copies the agent dropped ${stats.duplicates} ` +
      `(${waitingAtStop} deliveries were waiting unacknowledged for a slot at the stop); ` +
      `node back in ${upAgainMs} ms, quorum whole ${wholeMs} ms after its restart; scenario ${Date.now() - started} ms`,
  );
  expect(failed.size).toBe(0);
  expect(casts.length).toBeGreaterThan(issuedAtStop + 200);
  expect(missing).toEqual([]);
  // At-least-once may deliver twice; the agent de-duplicates by _unique_id, so nothing runs twice.
  expect(twice).toEqual([]);
  if (handlerMs > 0) {
    // The scenario did what it is for: deliveries in flight at the stop came again and were dropped.
    expect(waitingAtStop).toBeGreaterThan(0);
    expect(stats.duplicates).toBeGreaterThan(0);
  }

  await agent.stop();
  agent = undefined;
  await publisherBroker.close();
  publisherBroker = undefined;
}

clusterTest('the agent’s and the publisher’s node stopped mid-stream: consuming again on another node within 10 s, no confirmed cast lost', () =>
  failover('stop', 'same', 0));

clusterTest('the agent’s node crashed (SIGKILL) with deliveries unacknowledged, casts going on through another: consuming again within 10 s, none lost or run twice', () =>
  failover('kill', 'other', 200));
