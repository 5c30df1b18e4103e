// The periodic audit against the real Placement: it syncs, finds orphaned and missing allocations,
// heals them when told to, and survives Placement going away with one clear log line.
import { randomUUID } from 'node:crypto';
import { Auditor, type InstanceInfo } from '../../../tracker/audit';
import { NoAuth } from '../../../tracker/placement/auth';
import { PlacementClient } from '../../../tracker/placement/client';
import { PlacementHttp } from '../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../../../tracker/tracker';
import { captureLog, deleteTree, placementClient, uniqueHost } from '../../helpers/placement';
import { startProxy } from '../../helpers/proxy';
import { ScriptedDriver } from '../../helpers/scripted-driver';
import { PLACEMENT_URL } from '../../helpers/stack';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });

function scripted(): ScriptedDriver {
  const d = new ScriptedDriver();
  d.root = { inventories: { VCPU: { total: 8 }, MEMORY_MB: { total: 16384 } }, traits: ['COMPUTE_NODE'], aggregates: [] };
  return d;
}

test('orphaned and missing allocations are reported, then healed; in-flight consumers are left alone', async () => {
  const host = uniqueHost('audit');
  const api = placementClient();
  const driver = scripted();
  const log = captureLog();
  const tracker = new ResourceTracker({ api, driver, nodename: host.name, rootUuid: host.uuid, initialRatios: RATIOS, logger: log.logger });
  const instances: InstanceInfo[] = [];
  const busy = new Set<string>();
  const make = (heal: 'report' | 'heal'): Auditor =>
    new Auditor({ tracker, api, logger: log.logger, heal, healGraceMs: 0, instances: { listInstances: () => Promise.resolve(instances) }, inFlight: () => busy });
  try {
    await make('report').run();
    const project = randomUUID();
    const user = randomUUID();
    const orphan = randomUUID();
    const building = randomUUID();
    const running = randomUUID();
    for (const c of [orphan, building, running]) {
      await api.putAllocations(c, { allocations: { [host.uuid]: { resources: { VCPU: 1 } } }, project_id: project, user_id: user, consumer_generation: null });
    }
    const unallocated = { uuid: randomUUID(), allocations: { [host.uuid]: { VCPU: 2, MEMORY_MB: 512 } }, project_id: project, user_id: user };
    instances.push({ uuid: running }, unallocated);
    busy.add(building);

    const report = await make('report').run();
    expect(report.orphaned).toEqual([orphan]);
    expect(report.missing).toEqual([unallocated.uuid]);
    expect(report.healed).toEqual([]);
    expect(log.lines().some((l) => l.msg === 'allocations do not match the instances on this host')).toBe(true);

    const healed = await make('heal').run();
    expect([...healed.healed].sort()).toEqual([orphan, unallocated.uuid].sort());
    expect((await api.consumerAllocations(orphan)).allocations).toEqual({});
    expect((await api.consumerAllocations(unallocated.uuid)).allocations[host.uuid]?.resources).toEqual({ VCPU: 2, MEMORY_MB: 512 });
    expect((await api.consumerAllocations(building)).allocations[host.uuid]).toBeDefined();

    const clean = await make('heal').run();
    expect(clean.orphaned).toEqual([]);
    expect(clean.missing).toEqual([]);
  } finally {
    await deleteTree(api, host.uuid);
  }
});

test('Placement unreachable: one log line naming the endpoint and the cause; the next run converges', async () => {
  const host = uniqueHost('audit-down');
  const port = Number(new URL(PLACEMENT_URL).port);
  const proxy = await startProxy(port);
  const endpoint = `http://127.0.0.1:${proxy.port}`;
  const noWait = { now: () => Date.now(), sleep: () => Promise.resolve() };
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(endpoint), clock: noWait, attempts: 2 }));
  const driver = scripted();
  const log = captureLog();
  const tracker = new ResourceTracker({ api, driver, nodename: host.name, rootUuid: host.uuid, initialRatios: RATIOS, logger: log.logger });
  const auditor = new Auditor({ tracker, api, logger: log.logger, heal: 'report', instances: { listInstances: () => Promise.resolve([]) } });
  try {
    expect(await auditor.runLogged()).toBeDefined();
    await proxy.cut();
    driver.root.inventories = { ...driver.root.inventories, VCPU: { total: 12 } };
    expect(await auditor.runLogged()).toBeUndefined();
    const errors = log.lines().filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]?.msg).toBe('audit failed; the next run retries');
    expect(String(errors[0]?.reason)).toContain(`Placement at ${endpoint}`);
    expect(String(errors[0]?.reason)).toContain('ECONNREFUSED');
    expect(auditor.lastFailure).toContain('ECONNREFUSED');

    await proxy.restore();
    const after = await auditor.runLogged();
    expect(after?.sync.stats.writes).toBe(1);
    expect((await placementClient().getInventories(host.uuid)).inventories.VCPU?.total).toBe(12);
    expect(auditor.lastFailure).toBeUndefined();
  } finally {
    await proxy.close();
    await deleteTree(placementClient(), host.uuid);
  }
});

test('the schedule runs the audit by itself and never overlaps', async () => {
  const host = uniqueHost('audit-cron');
  const api = placementClient();
  const driver = scripted();
  let concurrent = 0;
  let maxConcurrent = 0;
  const slow = {
    updateProviderTree: async (...args: Parameters<ScriptedDriver['updateProviderTree']>) => {
      concurrent++;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      await new Promise((r) => setTimeout(r, 1500)); // longer than the 1 s interval
      concurrent--;
      return driver.updateProviderTree(...args);
    },
  };
  const log = captureLog();
  const tracker = new ResourceTracker({ api, driver: slow, nodename: host.name, rootUuid: host.uuid, initialRatios: RATIOS, logger: log.logger });
  const auditor = new Auditor({ tracker, api, logger: log.logger, heal: 'report', instances: { listInstances: () => Promise.resolve([]) } });
  try {
    auditor.start(1, host.name);
    expect(auditor.nextRun()).toBeInstanceOf(Date);
    await new Promise((r) => setTimeout(r, 4500));
    auditor.stop();
    await auditor.settle();
    expect(auditor.lastSuccess).toBeDefined();
    expect(maxConcurrent).toBe(1);
  } finally {
    auditor.stop();
    await deleteTree(api, host.uuid);
  }
});

test('heal waits for the grace period: a mismatch seen once is reported, not healed', async () => {
  const host = uniqueHost('audit-grace');
  const api = placementClient();
  const driver = scripted();
  const log = captureLog();
  const tracker = new ResourceTracker({ api, driver, nodename: host.name, rootUuid: host.uuid, initialRatios: RATIOS, logger: log.logger });
  let now = 1_000_000;
  const auditor = new Auditor({ tracker, api, logger: log.logger, heal: 'heal', healGraceMs: 60000, now: () => now, instances: { listInstances: () => Promise.resolve([]) } });
  try {
    await auditor.run();
    const orphan = randomUUID();
    await api.putAllocations(orphan, { allocations: { [host.uuid]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    expect((await auditor.run()).healed).toEqual([]);
    now += 30000;
    expect((await auditor.run()).healed).toEqual([]);
    now += 31000;
    expect((await auditor.run()).healed).toEqual([orphan]);
    expect((await api.consumerAllocations(orphan)).allocations).toEqual({});
  } finally {
    await deleteTree(api, host.uuid);
  }
});
