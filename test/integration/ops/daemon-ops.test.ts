// The daemon as systemd and an operator see it: READY=1 only once it is really ready, watchdog
// keep-alives, STOPPING=1 and a clean exit on SIGTERM; /metrics with the agent's series and
// /healthz; SIGHUP picking up a changed allocation ratio on the next sync.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import axios from 'axios';
import { agentSpec, rootOf } from '../../helpers/agents';
import { fakeNotifySocket } from '../../helpers/notify-socket';
import { deleteTree, placementClient } from '../../helpers/placement';
import { ControlPlane } from '../../helpers/control-plane';

jest.setTimeout(180000);
const BIN = join(__dirname, '..', '..', '..', 'dist', 'agent', 'cli', 'main.js');

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 60000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await Promise.resolve(ok()).catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('notify, watchdog, metrics, healthz, SIGHUP reload, SIGTERM', async () => {
  const exchange = `test-ops-${randomUUID().slice(0, 8)}`;
  const port = await freePort();
  const spec = agentSpec(`ops-${exchange.slice(-8)}`, exchange, 'debug = false\n');
  const conf = readFileSync(spec.file, 'utf8')
    .replace('update_resources_interval = -1', 'update_resources_interval = 1')
    .replace('[metrics]\nlisten =', `[metrics]\nlisten = 127.0.0.1:${port}`)
    .replace('[DEFAULT]\n', '[DEFAULT]\ncpu_allocation_ratio = 2.0\n');
  writeFileSync(spec.file, conf, { mode: 0o600 });
  const sock = await fakeNotifySocket();
  const out: string[] = [];
  const child = spawn(process.execPath, [BIN, 'run', '--config-file', spec.file], {
    env: { ...process.env, NOTIFY_SOCKET: sock.path, WATCHDOG_USEC: '1000000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => out.push(d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', r));
  const cp = new ControlPlane(exchange);
  const api = placementClient();
  try {
    const ready = await sock.waitFor((m) => m.includes('READY=1'), 60000);
    // Ready means consuming: the RPC server had started before READY was sent.
    expect(out.join('')).toContain('"msg":"RPC server consuming"');
    expect(ready).toEqual(expect.arrayContaining([`STATUS=${spec.host}: 1 providers in Placement, consuming compute.${spec.host}`]));
    await until('two watchdog keep-alives', () => sock.messages().filter((m) => m.includes('WATCHDOG=1')).length >= 2, 10000);

    await cp.start();
    await cp.call(spec.host, 'list_instances', {}, 'compute_agent');
    const metrics = (await axios.get<string>(`http://127.0.0.1:${port}/metrics`)).data;
    for (const series of [
      'compute_agent_placement_requests_total{method="GET",route="/resource_providers",status="200"}',
      'compute_agent_placement_conflicts_total',
      'compute_agent_sync_duration_seconds_count',
      'compute_agent_audit_duration_seconds_count{outcome="ok"}',
      'compute_agent_audit_last_success_age_seconds',
      'compute_agent_rpc_messages_total{method="list_instances",outcome="succeeded"} 1',
      'compute_agent_operations_in_flight',
      'compute_agent_owed_work{kind="allocation_removal"} 0',
      'compute_agent_owed_work{kind="attachment_delete"} 0',
      'compute_agent_reshapes_total',
      'compute_agent_nodejs_eventloop_lag_seconds',
    ]) {
      expect(metrics).toContain(series);
    }
    const health = await axios.get<{ status: string; checks: Record<string, { ok: boolean }> }>(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    expect(health.data.status).toBe('ok');
    expect(Object.keys(health.data.checks).sort()).toEqual(['audit', 'broker', 'placement']);

    const root = rootOf(spec);
    expect((await api.getInventories(root)).inventories.VCPU?.allocation_ratio).toBe(2);
    writeFileSync(spec.file, conf.replace('cpu_allocation_ratio = 2.0', 'cpu_allocation_ratio = 3.0'), { mode: 0o600 });
    child.kill('SIGHUP');
    await until('the new ratio is in Placement', async () => (await api.getInventories(root)).inventories.VCPU?.allocation_ratio === 3, 30000);
    expect(out.join('')).toContain('"msg":"configuration reloaded; Placement cache cleared"');

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    await sock.waitFor((m) => m.includes('STOPPING=1'));
    expect(out.join('')).toContain('"msg":"compute-agent stopped"');
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    sock.close();
    await cp.close();
    await deleteTree(api, rootOf(spec)).catch(() => undefined);
  }
});
