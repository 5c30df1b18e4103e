// The daemon with its RPC service on the real stack: up, answers get_host_uptime on
// compute.<host>, stops cleanly (fanout queue deleted, requests in progress finished).
import { PLACEMENT_URL } from '../../helpers/stack';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../../config/loader';
import { Daemon } from '../../../agent/daemon';
import { parseTransportUrl } from '../../../config/transport-url';
import { createLogger, silentLogger } from '../../../lib/logging/logger';
import { AmqpBroker } from '../../../agent/rpc/amqp/amqp-broker';
import { RpcClient } from '../../../agent/rpc/endpoint/client';
import { placementFromConfig } from '../../../tracker/placement/factory';
import { cleanupBroker, RABBIT, TRANSPORT_URL, unique } from './helpers';

jest.setTimeout(120_000);

test('the daemon serves get_host_uptime on compute.<host> and stops cleanly', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ca-daemon-rpc-'));
  const host = unique('daemon');
  const exchange = unique('test-daemon');
  const file = join(dir, 'agent.conf');
  writeFileSync(file, `[DEFAULT]\nhost = ${host}\ncompute_driver = fake\nstate_path = ${dir}\ntransport_url = ${TRANSPORT_URL}\ncontrol_exchange = ${exchange}\n[placement]\nendpoint_override = ${PLACEMENT_URL}\n[metrics]\nlisten =\n`);
  const { config } = loadConfig({ files: [file], env: {} });
  const lines: string[] = [];
  const { logger } = createLogger({ sink: { write: (l) => void lines.push(l) } });
  const daemon = new Daemon({ config, logger, placement: placementFromConfig(config), startupAttempts: 2 });
  const broker = new AmqpBroker({ transport: parseTransportUrl(TRANSPORT_URL), rabbit: RABBIT, logger: silentLogger(), initialAttempts: 2 });
  const client = new RpcClient({ broker, logger: silentLogger(), rabbit: RABBIT, controlExchange: exchange, defaultTimeoutMs: 10_000 });
  try {
    await daemon.start();
    await broker.start();
    await expect(client.call({ topic: 'compute', server: host, version: '6.0' }, 'get_host_uptime', {})).resolves.toMatch(/ up .*load average/);
    await daemon.stop('test');
    const msgs = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs).toEqual(expect.arrayContaining(['broker connected', 'RPC server consuming', 'compute-agent up', 'compute-agent stopped']));
  } finally {
    await daemon.stop('cleanup');
    await client.close();
    await broker.close();
    await cleanupBroker(TRANSPORT_URL, { queues: [`compute.${host}`], exchanges: [exchange] });
    rmSync(dir, { recursive: true, force: true });
  }
});
