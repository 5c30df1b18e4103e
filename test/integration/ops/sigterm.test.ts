// SIGTERM during an operation leaves nothing lost: within graceful_shutdown_timeout the operation
// completes; past it, the request stays in the journal and the restarted agent finishes it.
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import type { Daemon } from '../../../agent/daemon';
import type { FakeDriver } from '../../../virt-drivers/fake/driver';
import { agentSpec, rootOf, startDaemon, type AgentSpec } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { instanceArgs } from '../../helpers/instance-args';
import { deleteTree, placementClient } from '../../helpers/placement';

jest.setTimeout(120000);
const api = placementClient();

async function until(ok: () => boolean, ms = 30000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

function withGrace(spec: AgentSpec, seconds: number): void {
  writeFileSync(spec.file, readFileSync(spec.file, 'utf8').replace('graceful_shutdown_timeout = 10', `graceful_shutdown_timeout = ${seconds}`), { mode: 0o600 });
}

const driverOf = (d: Daemon): FakeDriver => d.compute?.deps.driver as FakeDriver;

test.each([
  ['completes within the grace period', 10, 1500],
  ['is interrupted past the grace period, then finished by the restarted agent', 1, 4000],
])('a spawn in progress at SIGTERM %s', async (_name, grace, spawnMs) => {
  const exchange = `test-term-${randomUUID().slice(0, 8)}`;
  const spec = agentSpec(`term-${exchange.slice(-8)}`, exchange);
  withGrace(spec, grace);
  const cp = new ControlPlane(exchange);
  let daemon = await startDaemon(spec);
  try {
    await cp.start();
    driverOf(daemon).faults.inject('spawn', { delayMs: spawnMs });
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await cp.cast(spec.host, 'build_and_run_instance', { instance: inst });
    await until(() => daemon.compute?.record(uuid)?.task_state === 'spawning');
    await daemon.stop('SIGTERM');
    const after = daemon.compute?.record(uuid);
    if (grace * 1000 > spawnMs) {
      expect(after).toMatchObject({ vm_state: 'active', task_state: null });
      daemon = await startDaemon(spec);
    } else {
      expect(after?.vm_state).toBe('building');
      daemon = await startDaemon(spec);
      await until(() => daemon.compute?.record(uuid)?.vm_state === 'active', 30000);
    }
    expect(Object.keys((await api.consumerAllocations(uuid)).allocations)).toEqual([rootOf(spec)]);
    await cp.cast(spec.host, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', [uuid]);
  } finally {
    await daemon.stop('test end');
    await cp.close();
    await deleteTree(api, rootOf(spec)).catch(() => undefined);
  }
});
