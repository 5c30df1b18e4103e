// Recovery from the journal: a request accepted (and acknowledged) but interrupted mid-flight is
// run again at start-up and resumes from its recorded state; nothing leaks, nothing doubles.
import nock from 'nock';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { systemClock, type Clock } from '../../../../lib/clock';
import { DurableJournal } from '../../../../agent/journal/durable';
import { ComputeManager } from '../../../../agent/compute/manager';
import { computeMethods } from '../../../../agent/compute/methods';
import { MemoryNotifier } from '../../../../agent/compute/ports';
import { recover } from '../../../../agent/compute/recovery';
import { bindMethod, type ComputeMethod } from '../../../../agent/compute/method-table';
import { loadConfig } from '../../../../config/loader';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../../../../tracker/tracker';
import { FakeDriver } from '../../../../virt-drivers/fake/driver';
import { ProcessExec } from '../../../../virt-drivers/host/exec';
import { RootedHostFs } from '../../../../virt-drivers/host/host-fs';
import { MockPlacement } from '../../../helpers/mock-placement';
import { HOST_FILE, InProcessPeers, instanceArgs } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

async function agent(dir: string, api: PlacementClient, rootUuid: string, clock: Clock = systemClock) {
  const hostFile = join(dir, 'host.json');
  writeFileSync(hostFile, JSON.stringify(HOST_FILE));
  const { config } = loadConfig({
    files: [],
    env: {
      COMPUTE_AGENT__DEFAULT__HOST: 'host-r',
      COMPUTE_AGENT__DEFAULT__STATE_PATH: dir,
      COMPUTE_AGENT__FAKE__HOST_FILE: hostFile,
      COMPUTE_AGENT__FAKE__INSTANCES_FILE: join(dir, 'fake-instances.json'),
    },
    defaultFile: '/nonexistent',
  });
  const logger = silentLogger();
  const driver = new FakeDriver({ config, logger, clock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
  await driver.init('host-r');
  const tracker = new ResourceTracker({ api, driver, nodename: 'host-r', rootUuid, initialRatios: initialRatiosFrom(config.DEFAULT), logger });
  await tracker.updateFromDriver();
  const journal = await DurableJournal.open(dir, { logger });
  const manager = new ComputeManager({ host: 'host-r', driver, claims: tracker.claims, store: journal, peers: new InProcessPeers(), notifier: new MemoryNotifier(), logger });
  return { driver, tracker, journal, manager, methods: computeMethods(manager) };
}

/** Runs a method of the table as the dispatcher would: arguments decoded by the row. */
function run(methods: readonly ComputeMethod[], name: string, args: Record<string, unknown>, context: Record<string, unknown>): Promise<unknown> {
  const row = methods.find((x) => x.name === name);
  if (!row) throw new Error(`no method ${name}`);
  return bindMethod(row, args, context).run();
}

test('a build interrupted after its claim is finished at start-up: one allocation, ACTIVE, journal clean', async () => {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const dir = mkdtempSync(join(tmpdir(), 'ca-recover-'));
  const rootUuid = randomUUID();
  // The first agent "dies" inside the driver: its sleeps never end (and hold no timer).
  const frozen: Clock = { now: () => Date.now(), sleep: () => new Promise<void>(() => undefined) };
  const first = await agent(dir, api, rootUuid, frozen);
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  const req = { uniqueId: randomUUID(), method: 'build_and_run_instance', version: '6.0', namespace: null, args: { instance: inst }, context: { request_id: 'r1' }, orderingKey: uuid, reply: undefined, receivedAt: Date.now() };
  expect(await first.journal.accept(req)).toBe('new');
  first.driver.faults.inject('spawn', { delayMs: 1000 });
  void run(first.methods, 'build_and_run_instance', req.args, req.context);
  for (let i = 0; i < 100 && first.manager.record(uuid)?.task_state !== 'spawning'; i++) await new Promise((r) => setTimeout(r, 10));
  expect(first.manager.record(uuid)?.task_state).toBe('spawning');
  expect(mock.consumers.has(uuid)).toBe(true);
  await first.journal.close();

  const second = await agent(dir, api, rootUuid);
  expect(second.journal.pending().map((r) => r.uniqueId)).toEqual([req.uniqueId]);
  mock.requests.length = 0;
  const report = await recover(second.manager.context, second.journal, second.methods);
  expect(report).toMatchObject({ replayed: 1, failed: 0, erroredBuilds: [], vanished: [] });
  expect(second.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(mock.writes()).toEqual([]); // the claim was already made: not made twice
  expect(mock.consumers.get(uuid)?.allocations[rootUuid]).toEqual({ VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 });
  expect((await second.driver.listInstances()).map((i) => i.uuid)).toEqual([uuid]);
  expect(second.journal.pending()).toEqual([]);
  await second.journal.close();
});

test('an instance whose guest vanished while the agent was down goes to ERROR; a missing allocation is restored', async () => {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const dir = mkdtempSync(join(tmpdir(), 'ca-recover-'));
  const rootUuid = randomUUID();
  const first = await agent(dir, api, rootUuid);
  const gone = instanceArgs();
  const kept = instanceArgs();
  for (const i of [gone, kept]) await run(first.methods, 'build_and_run_instance', { instance: i }, { request_id: 'x' });
  await first.journal.close();
  // While the agent is down: one guest dies, and someone deletes the other's allocation.
  first.driver.hypervisor.delete(String(gone.uuid));
  await first.driver.hypervisor.save();
  await api.deleteAllocations(String(kept.uuid));

  const second = await agent(dir, api, rootUuid);
  const report = await recover(second.manager.context, second.journal, second.methods);
  expect(report.vanished).toEqual([gone.uuid]);
  expect(report.rewrittenAllocations).toEqual([kept.uuid]);
  expect(second.manager.record(String(gone.uuid))?.vm_state).toBe('error');
  expect(mock.consumers.get(String(kept.uuid))?.allocations[rootUuid]).toEqual({ VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 });
  await second.journal.close();
});
