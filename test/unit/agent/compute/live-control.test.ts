// live_migration_abort and live_migration_force_complete on the fake driver: served while the
// source's live_migration runs (never queued behind it), an abort rolls the migration back (the
// instance ACTIVE on the source with its allocation, nothing on the destination), a force complete
// reaches the driver and the migration completes; with no live migration running, both are refused.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { MockPlacement } from '../../../helpers/mock-placement';
import { InProcessPeers, instanceArgs, makeHost, type HarnessHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-live-control' };

async function migrating(): Promise<{ mock: MockPlacement; a: HarnessHost; b: HarnessHost; uuid: string; running: Promise<unknown>; settle: () => Promise<void>; call: (h: HarnessHost, m: string, args: Record<string, unknown>) => Promise<unknown> }> {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const a = await makeHost('host-a', api, peers);
  const b = await makeHost('host-b', api, peers);
  const call = (h: HarnessHost, method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(h.name, method, args, CTX);
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await call(b, 'build_and_run_instance', { instance: inst });
  const mig = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: 'host-b', dest_compute: 'host-a' };
  const data = await call(a, 'check_can_live_migrate_destination', { instance: inst, migration: mig });
  // The migration takes a while: the control casts arrive while it runs.
  b.driver.faults.inject('liveMigration', { delayMs: 300, times: 1 });
  const running = call(b, 'live_migration', { instance: { uuid }, dest: 'host-a', migration: mig, migrate_data: data });
  await new Promise((r) => setTimeout(r, 50));
  return { mock, a, b, uuid, running, settle: () => peers.settle(), call };
}

test('an abort while the migration runs rolls it back: ACTIVE on the source with its allocation, nothing on the destination', async () => {
  const { mock, a, b, uuid, running, settle, call } = await migrating();
  await call(b, 'live_migration_abort', { instance: { uuid }, migration_id: 7 });
  await running;
  await settle();
  expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(b.driver.hypervisor.find(uuid)?.powerState).toBe('RUNNING');
  expect(a.manager.record(uuid)).toBeUndefined();
  expect(Object.keys(mock.consumers.get(uuid)?.allocations ?? {})).toEqual([b.rootUuid]);
  expect(b.notifier.sent.map((n) => n.event_type)).toContain('instance.live_migration_abort.end');
});

test('a force complete reaches the driver and the migration completes on the destination', async () => {
  const { a, b, uuid, running, settle, call } = await migrating();
  await call(b, 'live_migration_force_complete', { instance: { uuid } });
  expect(b.driver.hypervisor.find(uuid)?.console?.at(-1)).toMatch(/live migration forced to complete$/);
  await running;
  await settle();
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(b.manager.record(uuid)).toBeUndefined();
});

test('with no live migration from this host running, both are refused and change nothing', async () => {
  const { a, b, uuid, running, settle, call } = await migrating();
  await running;
  await settle();
  for (const method of ['live_migration_abort', 'live_migration_force_complete']) {
    await expect(call(a, method, { instance: { uuid } })).rejects.toMatchObject({ name: 'InvalidStateError' });
    await expect(call(b, method, { instance: { uuid } })).rejects.toThrow(/could not be found on this host/);
  }
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
});
