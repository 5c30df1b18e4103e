import axios from 'axios';
import { AgentMetrics } from '../../../../agent/ops/metrics';
import { NoopNotifier, notifierFor, SystemdNotifier, type ServiceNotifier } from '../../../../agent/ops/notify';
import { OpsServer, parseListen } from '../../../../agent/ops/server';
import { WatchdogLoop } from '../../../../agent/ops/watchdog';
import { captureLog } from '../../../helpers/placement';
import { fakeNotifySocket } from '../../../helpers/notify-socket';

describe('metrics and health endpoint', () => {
  test('/metrics lists the agent series; /healthz is 200 or 503 with a JSON reason; other paths 404', async () => {
    const metrics = new AgentMetrics();
    metrics.placementRequest('PUT', '/resource_providers/{uuid}/inventories', 409, 0.004);
    metrics.conflict('provider');
    metrics.sync('ok', 0.05, true);
    metrics.audit('ok', 0.2, Date.now());
    metrics.rpcMessage('build_and_run_instance', 'ok', 12.5);
    metrics.neutronRequest('PUT', '/v2.0/ports/{id}', 200, 0.03);
    metrics.vifPlugWait('completed', 1.2);
    metrics.setInFlight(2);
    metrics.setInstances({ active: 3, error: 1 });
    metrics.setOwed({ allocation_removal: 0, attachment_delete: 2 });
    let brokerUp = true;
    const server = new OpsServer({
      listen: '127.0.0.1:0',
      metrics,
      logger: captureLog().logger,
      checks: {
        broker: () => (brokerUp ? { ok: true } : { ok: false, detail: 'disconnected: ECONNRESET' }),
        audit: () => ({ ok: true, age_seconds: 3 }),
      },
    });
    const { port } = await server.start();
    const base = `http://127.0.0.1:${port}`;
    try {
      const m = await axios.get<string>(`${base}/metrics`);
      expect(m.headers['content-type']).toContain('text/plain');
      for (const line of [
        'compute_agent_placement_requests_total{method="PUT",route="/resource_providers/{uuid}/inventories",status="409"} 1',
        'compute_agent_placement_conflicts_total{kind="provider"} 1',
        'compute_agent_reshapes_total 1',
        'compute_agent_rpc_messages_total{method="build_and_run_instance",outcome="ok"} 1',
        'compute_agent_rpc_method_seconds_sum{method="build_and_run_instance",outcome="ok"} 12.5',
        'compute_agent_neutron_requests_total{method="PUT",route="/v2.0/ports/{id}",status="200"} 1',
        'compute_agent_neutron_request_seconds_count{method="PUT"} 1',
        'compute_agent_vif_plug_wait_seconds_sum{outcome="completed"} 1.2',
        'compute_agent_operations_in_flight 2',
        'compute_agent_instances{state="active"} 3',
        'compute_agent_owed_work{kind="attachment_delete"} 2',
        'compute_agent_owed_work{kind="allocation_removal"} 0',
      ]) {
        expect(m.data).toContain(line);
      }
      for (const name of ['compute_agent_sync_duration_seconds_bucket', 'compute_agent_audit_duration_seconds_count', 'compute_agent_audit_last_success_age_seconds', 'compute_agent_nodejs_eventloop_lag_seconds']) {
        expect(m.data).toContain(name);
      }
      const ok = await axios.get(`${base}/healthz`);
      expect(ok.status).toBe(200);
      expect(ok.data).toEqual({ status: 'ok', checks: { broker: { ok: true }, audit: { ok: true, age_seconds: 3 } } });
      brokerUp = false;
      const bad = await axios.get(`${base}/healthz`, { validateStatus: () => true });
      expect(bad.status).toBe(503);
      expect(bad.data).toMatchObject({ status: 'unhealthy', checks: { broker: { ok: false, detail: 'disconnected: ECONNRESET' } } });
      expect((await axios.get(`${base}/nope`, { validateStatus: () => true })).status).toBe(404);
    } finally {
      await server.stop();
    }
  });

  test('listen addresses', () => {
    expect(parseListen('127.0.0.1:9180')).toEqual({ host: '127.0.0.1', port: 9180 });
    expect(parseListen('[::1]:9180')).toEqual({ host: '::1', port: 9180 });
    expect(() => parseListen('9180')).toThrow(/host:port/);
  });
});

describe('systemd notification', () => {
  test('no NOTIFY_SOCKET: a no-op notifier', () => {
    expect(notifierFor({}, captureLog().logger)).toBeInstanceOf(NoopNotifier);
  });

  test('READY, STATUS, STOPPING and WATCHDOG reach the socket with our pid', async () => {
    const sock = await fakeNotifySocket();
    try {
      const n = new SystemdNotifier({ NOTIFY_SOCKET: sock.path, WATCHDOG_USEC: '10000000' }, captureLog().logger);
      expect(n.watchdogIntervalMs).toBe(5000);
      await n.ready('up: 3 providers, consuming compute.h1');
      await n.watchdog();
      await n.stopping('stopping: SIGTERM');
      await sock.waitFor((m) => m.includes('STOPPING=1'));
      const msgs = sock.messages().filter((m) => !m.includes('BARRIER=1'));
      expect(msgs[0]).toEqual([`MAINPID=${process.pid}`, 'READY=1', 'STATUS=up: 3 providers, consuming compute.h1']);
      expect(msgs[1]).toEqual([`MAINPID=${process.pid}`, 'WATCHDOG=1']);
      expect(msgs[2]).toEqual([`MAINPID=${process.pid}`, 'STOPPING=1', 'STATUS=stopping: SIGTERM']);
    } finally {
      sock.close();
    }
  });

  test('a watchdog meant for another pid is ignored', () => {
    expect(new SystemdNotifier({ NOTIFY_SOCKET: '/x', WATCHDOG_USEC: '1000000', WATCHDOG_PID: '1' }, captureLog().logger, 4242).watchdogIntervalMs).toBeUndefined();
  });

  test('keep-alives are withheld while a condition fails, and resume after', () => {
    const pings: number[] = [];
    const notifier: ServiceNotifier = {
      enabled: true,
      watchdogIntervalMs: 1000,
      ready: () => Promise.resolve(),
      stopping: () => Promise.resolve(),
      status: () => Promise.resolve(),
      watchdog: () => Promise.resolve(void pings.push(1)),
    };
    let broker: string | undefined;
    const log = captureLog();
    const loop = new WatchdogLoop(notifier, [{ name: 'broker', failing: () => broker }], log.logger);
    loop.tick(1000);
    broker = 'disconnected';
    loop.tick(1000);
    loop.tick(1000);
    broker = undefined;
    loop.tick(1000);
    expect(pings).toHaveLength(2);
    const msgs = log.lines().map((l) => l.msg);
    expect(msgs).toEqual(['withholding watchdog keep-alive', 'watchdog keep-alives resumed']);
  });
});
