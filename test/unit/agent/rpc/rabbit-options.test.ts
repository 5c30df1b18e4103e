// oslo.messaging 16's [oslo_messaging_rabbit] options beyond the declarations (topology-16.test.ts):
// the config file's refusals, the queue manager's names and counter file, stream offsets,
// heartbeat_rate, kombu_reconnect_splay's bounds, the RabbitMQ 4 check and the ping endpoint.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../../../config/loader';
import { parseTransportUrl } from '../../../../config/transport-url';
import { StreamOffsets } from '../../../../agent/rpc/amqp/amqp-stream';
import { brokerRefusal, connectParams } from '../../../../agent/rpc/amqp/connection';
import { cancelledConsumerDelayMs } from '../../../../agent/rpc/amqp/amqp-failover';
import { Dispatcher } from '../../../../agent/rpc/endpoint/dispatcher';
import { PING_METHOD, registerPing } from '../../../../agent/rpc/endpoint/ping';
import { currentProcessGroup, QueueManager, randomIds, transientIds } from '../../../../agent/rpc/oslo/queue-manager';
import { replyQueue, serverTopology } from '../../../../agent/rpc/oslo/topology';
import { UnsupportedVersionError } from '../../../../agent/rpc/oslo/errors';
import type { RpcRequest } from '../../../../agent/rpc/oslo/messages';
import { RABBIT } from './harness';

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'ca-rabbit-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function load(rabbit: string): ReturnType<typeof loadConfig>['config'] {
  const f = join(dir, 'agent.conf');
  writeFileSync(f, `[oslo_messaging_rabbit]\n${rabbit}\n`);
  return loadConfig({ files: [f], env: {} }).config;
}

function problems(rabbit: string): string[] {
  try {
    load(rabbit);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems.map((p) => p.message);
    throw e;
  }
  return [];
}

describe('the config file', () => {
  test("kolla 2025.1's messaging settings load", () => {
    const r = load('rabbit_quorum_queue = true\nrabbit_transient_quorum_queue = true\nrabbit_stream_fanout = true\nuse_queue_manager = true\nrabbit_qos_prefetch_count = 10\nhostname = node1\nprocessname = nova-compute').oslo_messaging_rabbit;
    expect([r.rabbit_stream_fanout, r.use_queue_manager, r.hostname, r.processname, r.heartbeat_rate, r.kombu_reconnect_splay]).toEqual([true, true, 'node1', 'nova-compute', 3, 0]);
  });

  test('rabbit_transient_queues_ttl = 0 is accepted and declares no x-expires', () => {
    const r = load('rabbit_transient_queues_ttl = 0').oslo_messaging_rabbit;
    expect(r.rabbit_transient_queues_ttl).toBe(0);
    expect(replyQueue(r).arguments).toEqual({});
    expect(problems('rabbit_transient_queues_ttl = -1')[0]).toContain('oslo_messaging_rabbit.rabbit_transient_queues_ttl = "-1": must be >= 0');
  });

  test.each([
    ['rabbit_stream_fanout = true\nrabbit_qos_prefetch_count = 5', 'oslo_messaging_rabbit.rabbit_stream_fanout needs oslo_messaging_rabbit.rabbit_transient_quorum_queue = true'],
    ['rabbit_stream_fanout = true\nrabbit_transient_quorum_queue = true', 'oslo_messaging_rabbit.rabbit_stream_fanout needs oslo_messaging_rabbit.rabbit_qos_prefetch_count > 0'],
    ['rabbit_quorum_queue = true\nrabbit_ha_queues = true', 'oslo_messaging_rabbit.rabbit_quorum_queue and oslo_messaging_rabbit.rabbit_ha_queues cannot both be true'],
    ['rabbit_transient_quorum_queue = true\nrabbit_ha_queues = true', 'oslo_messaging_rabbit.rabbit_transient_quorum_queue and oslo_messaging_rabbit.rabbit_ha_queues cannot both be true'],
    ['heartbeat_rate = 0', 'oslo_messaging_rabbit.heartbeat_rate = "0": must be >= 1'],
    ['kombu_reconnect_splay = -1', 'oslo_messaging_rabbit.kombu_reconnect_splay = "-1"'],
    ['hostname = a/b', 'oslo_messaging_rabbit.hostname = "a/b": not usable in a queue or file name'],
  ])('%j is refused naming the options', (text, message) => {
    const lines = problems(text);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(message);
  });

  test('rpc_ping_enabled lives in [DEFAULT], off by default', () => {
    expect(load('').DEFAULT.rpc_ping_enabled).toBe(false);
  });
});

describe('the queue manager', () => {
  const group = { pgid: 4242, startTime: 777 };

  test('names hostname:processname:N from a counter file in the format oslo writes', () => {
    const qm = new QueueManager({ hostname: 'node1', processname: 'nova-compute', dir, group });
    expect([qm.next(), qm.next()]).toEqual(['node1:nova-compute:1', 'node1:nova-compute:2']);
    expect(readFileSync(join(dir, 'node1_nova-compute_qmanager'), 'utf8')).toBe('4242:2:777');
    // a second instance in the same run (the client beside the server) continues the count
    expect(new QueueManager({ hostname: 'node1', processname: 'nova-compute', dir, group }).next()).toBe('node1:nova-compute:3');
  });

  test('starts again at 1 when the service restarts: another process group, or the same id started at another time', () => {
    writeFileSync(join(dir, 'node1_p_qmanager'), '4242:9:777');
    expect(new QueueManager({ hostname: 'node1', processname: 'p', dir, group: { pgid: 5000, startTime: 777 } }).next()).toBe('node1:p:1');
    writeFileSync(join(dir, 'node1_p_qmanager'), '4242:9:777');
    expect(new QueueManager({ hostname: 'node1', processname: 'p', dir, group: { pgid: 4242, startTime: 800 } }).next()).toBe('node1:p:1');
    writeFileSync(join(dir, 'node1_p_qmanager'), 'garbage');
    expect(new QueueManager({ hostname: 'node1', processname: 'p', dir, group }).next()).toBe('node1:p:1');
  });

  test("reads this process's group from /proc", () => {
    const g = currentProcessGroup();
    expect(Number.isInteger(g.pgid) && g.pgid > 0).toBe(true);
    expect(Number.isInteger(g.startTime) && g.startTime >= 0).toBe(true);
  });

  test('names the server fanout queue and the reply queue; random uuid4 hex without it', () => {
    const qm = new QueueManager({ hostname: 'node1', processname: 'agent', dir, group });
    const r = { ...RABBIT, use_queue_manager: true, rabbit_transient_quorum_queue: true };
    const t = serverTopology({ exchange: 'nova', topic: 'compute', server: 'h' }, r, qm);
    expect(t.consumeQueues[2]).toBe('compute_fanout_node1:agent:1');
    expect(t.deleteOnStop).toEqual([]);
    expect(replyQueue(r, qm).name).toBe('reply_node1:agent:2');
    expect(transientIds(RABBIT)).toBe(randomIds);
    expect(randomIds.next()).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe('stream offsets', () => {
  test('"last" first, then one past the last delivery, "last" again after a cancel; other queues get none', () => {
    const o = new StreamOffsets(['compute_fanout']);
    expect(o.consumeArguments('compute')).toBeUndefined();
    expect(o.consumeArguments('compute_fanout')).toEqual({ 'x-stream-offset': 'last' });
    o.delivered('compute_fanout', { headers: { 'x-stream-offset': 41 } });
    o.delivered('compute', { headers: { 'x-stream-offset': 99 } });
    expect(o.consumeArguments('compute_fanout')).toEqual({ 'x-stream-offset': { '!': 'long', value: 42 } });
    o.delivered('compute_fanout', {});
    expect(o.offsetOf('compute_fanout')).toBe(42);
    o.reset();
    expect(o.offsetOf('compute_fanout')).toBe('last');
  });
});

describe('the connection', () => {
  const transport = parseTransportUrl('rabbit://guest:guest@127.0.0.1:5672/');
  const host = transport.hosts[0];
  if (!host) throw new Error('no host');

  test.each([
    [60, 3, 20],
    [60, 2, 30],
    [0, 3, 0],
    [2, 3, 1],
  ])('threshold %d s with heartbeat_rate %d negotiates a %d s heartbeat', (threshold, rate, expected) => {
    expect(connectParams(transport, host, { ...RABBIT, heartbeat_timeout_threshold: threshold, heartbeat_rate: rate }).url.heartbeat).toBe(expected);
  });

  test('after a consumer cancel: kombu_reconnect_delay plus up to kombu_reconnect_splay', () => {
    const r = { ...RABBIT, kombu_reconnect_delay: 1, kombu_reconnect_splay: 2.5 };
    expect([0, 0.5, 0.999999].map((x) => cancelledConsumerDelayMs(r, () => x))).toEqual([1000, 2250, 3500]);
    expect(cancelledConsumerDelayMs({ ...r, kombu_reconnect_splay: 0 }, () => 0.9)).toBe(1000);
  });

  test('rabbit_ha_queues is refused by a RabbitMQ 4 broker, read from its server properties', () => {
    const ha = { ...RABBIT, rabbit_ha_queues: true };
    expect(brokerRefusal({ product: 'RabbitMQ', version: '4.0.5' }, ha)).toMatch(
      /^oslo_messaging_rabbit\.rabbit_ha_queues = true, but RabbitMQ 4\.0\.5 has no classic mirrored queues .*set rabbit_ha_queues = false/,
    );
    expect(brokerRefusal({ version: Buffer.from('4.1.0') }, ha)).toContain('RabbitMQ 4.1.0');
    expect(brokerRefusal({ version: '3.10.8' }, ha)).toBeUndefined();
    expect(brokerRefusal({ version: '4.0.5' }, RABBIT)).toBeUndefined();
    expect(brokerRefusal({}, ha)).toBeUndefined();
  });
});

describe('rpc_ping_enabled', () => {
  const req = (version: string): RpcRequest => ({ method: PING_METHOD, version, namespace: null, args: {}, context: {}, uniqueId: 'u', reply: undefined, callMonitorTimeout: null });

  test('oslo_rpc_server_ping at version 1.0 answers "pong", beside the compute API at 6.x', async () => {
    const d = registerPing(new Dispatcher());
    const r = d.resolve(req('1.0'));
    expect(r.journaled).toBe(false);
    await expect(r.invoke({} as never)).resolves.toBe('pong');
    expect(() => d.resolve(req('1.1'))).toThrow(UnsupportedVersionError);
  });
});
