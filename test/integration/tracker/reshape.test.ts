// A driver moves VGPU from the root to per-GPU children while two consumers hold VGPU on the root:
// one POST /reshaper moves inventory and allocations together; totals are preserved; a poller
// that reads whole-tree snapshots throughout never sees a half-moved state.
import { randomUUID } from 'node:crypto';
import axios from 'axios';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../../lib/clock';
import { loadConfig } from '../../../config/loader';
import { FakeDriver } from '../../../virt-drivers/fake/driver';
import { ProcessExec } from '../../../virt-drivers/host/exec';
import { RootedHostFs } from '../../../virt-drivers/host/host-fs';
import { RequestCounter } from '../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../../../tracker/tracker';
import { captureLog, deleteTree, placementClient, uniqueHost } from '../../helpers/placement';
import { ScriptedDriver } from '../../helpers/scripted-driver';
import { PLACEMENT_URL } from '../../helpers/stack';

const RATIOS = initialRatiosFrom({ initial_cpu_allocation_ratio: 4, initial_ram_allocation_ratio: 1, initial_disk_allocation_ratio: 1 });
const HEADERS = { 'X-Auth-Token': 'admin', 'OpenStack-API-Version': 'placement 1.31' };

interface Summary {
  resources: Record<string, { capacity: number; used: number }>;
}

/** One request, one transaction: capacity and usage of VGPU summed over the whole tree. */
async function treeVgpu(root: string): Promise<{ capacity: number; used: number; holders: number } | undefined> {
  const res = await axios.get(`${PLACEMENT_URL}/allocation_candidates`, {
    params: { resources: 'VGPU:1', in_tree: root, limit: 1 },
    headers: HEADERS,
    validateStatus: () => true,
  });
  if (res.status !== 200) return undefined;
  const summaries = (res.data as { provider_summaries: Record<string, Summary> }).provider_summaries;
  let capacity = 0;
  let used = 0;
  let holders = 0;
  for (const s of Object.values(summaries)) {
    const v = s.resources.VGPU;
    if (!v) continue;
    capacity += v.capacity;
    used += v.used;
    if (v.used > 0) holders++;
  }
  return { capacity, used, holders };
}

test('VGPU moves from the root to per-GPU children in one atomic reshape', async () => {
  const host = uniqueHost('reshape');
  const counter = new RequestCounter();
  const api = placementClient(counter);
  const driver = new ScriptedDriver();
  driver.root = { inventories: { VCPU: { total: 32 }, MEMORY_MB: { total: 131072 }, VGPU: { total: 8 } }, traits: ['COMPUTE_NODE'], aggregates: [] };
  const tracker = new ResourceTracker({ api, driver, nodename: host.name, rootUuid: host.uuid, initialRatios: RATIOS, logger: captureLog().logger });
  try {
    await tracker.updateFromDriver();
    const project = randomUUID();
    const user = randomUUID();
    const consumers = { [randomUUID()]: 2, [randomUUID()]: 3 };
    for (const [c, n] of Object.entries(consumers)) {
      await api.putAllocations(c, {
        allocations: { [host.uuid]: { resources: { VGPU: n, VCPU: 1, MEMORY_MB: 1024 } } },
        project_id: project,
        user_id: user,
        consumer_generation: null,
      });
    }
    expect(await treeVgpu(host.uuid)).toEqual({ capacity: 8, used: 5, holders: 1 });

    // The driver switches to one child per physical GPU, 4 VGPU each.
    const gpu0 = randomUUID();
    const gpu1 = randomUUID();
    driver.root = { ...driver.root, inventories: { VCPU: { total: 32 }, MEMORY_MB: { total: 131072 } } };
    driver.children = [
      { uuid: gpu0, name: `${host.name}_pci_0000_3b_00_0`, inventories: { VGPU: { total: 4 } } },
      { uuid: gpu1, name: `${host.name}_pci_0000_86_00_0`, inventories: { VGPU: { total: 4 } } },
    ];
    driver.moves = [
      { from: host.uuid, to: gpu0, resources: { VGPU: 4 } },
      { from: host.uuid, to: gpu1, resources: { VGPU: 4 } },
    ];

    // A poller reads single-transaction snapshots of the tree all through the reshape.
    const seen: Array<{ capacity: number; used: number; holders: number }> = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const s = await treeVgpu(host.uuid);
        if (s) seen.push(s);
      }
    })();
    counter.reset();
    const result = await tracker.updateFromDriver();
    driver.moves = [];
    polling = false;
    await poller;

    expect(result.reshaped).toBe(true);
    expect(counter.snapshot().get('POST /reshaper 204')).toBe(1);
    expect(counter.total((m, route) => m === 'POST' && route === '/allocations')).toBe(0);
    // Every snapshot shows the whole VGPU pool and every allocation, before or after, never between;
    // and the poller did watch the transition (both consumers on the root, then spread on two GPUs).
    expect(seen.some((s) => s.holders === 1)).toBe(true);
    expect(seen.some((s) => s.holders === 2)).toBe(true);
    for (const s of seen) {
      expect(s.capacity).toBe(8);
      expect(s.used).toBe(5);
    }

    // After: the root has no VGPU; the children hold inventory and allocations; totals preserved.
    const rootInv = await api.getInventories(host.uuid);
    expect(rootInv.inventories.VGPU).toBeUndefined();
    for (const g of [gpu0, gpu1]) expect((await api.getInventories(g)).inventories.VGPU?.total).toBe(4);
    for (const [c, n] of Object.entries(consumers)) {
      const a = await api.consumerAllocations(c);
      expect(a.allocations[host.uuid]?.resources).toEqual({ VCPU: 1, MEMORY_MB: 1024 });
      const onChildren = [gpu0, gpu1].reduce((sum, g) => sum + (a.allocations[g]?.resources.VGPU ?? 0), 0);
      expect(onChildren).toBe(n);
      expect(a.project_id).toBe(project);
    }
    expect(await treeVgpu(host.uuid)).toMatchObject({ capacity: 8, used: 5 });
    // The driver saw the allocations it needed to decide (nova's ReshapeNeeded second pass).
    expect(Object.keys(driver.lastAllocations ?? {}).sort()).toEqual(Object.keys(consumers).sort());

    // The next cycle is quiet: the new shape is in place.
    counter.reset();
    const after = await tracker.updateFromDriver();
    expect(after.stats.writes).toBe(0);
  } finally {
    await deleteTree(api, host.uuid);
  }
});

test('a reshape that cannot place a consumer is refused before anything is sent; Placement unchanged', async () => {
  const host = uniqueHost('reshape-bad');
  const counter = new RequestCounter();
  const api = placementClient(counter);
  const driver = new ScriptedDriver();
  driver.root = { inventories: { VGPU: { total: 8 } }, traits: [], aggregates: [] };
  const tracker = new ResourceTracker({ api, driver, nodename: host.name, rootUuid: host.uuid, initialRatios: RATIOS, logger: captureLog().logger });
  try {
    await tracker.updateFromDriver();
    const c = randomUUID();
    await api.putAllocations(c, { allocations: { [host.uuid]: { resources: { VGPU: 6 } } }, project_id: randomUUID(), user_id: randomUUID(), consumer_generation: null });
    const small = randomUUID();
    driver.root = { inventories: {}, traits: [], aggregates: [] };
    driver.children = [{ uuid: small, name: `${host.name}_pci_0000_01_00_0`, inventories: { VGPU: { total: 4 } } }];
    driver.moves = [{ from: host.uuid, to: small, resources: { VGPU: 4 } }];
    counter.reset();
    await expect(tracker.updateFromDriver()).rejects.toThrow(/reshape failed, Placement is unchanged .*no target .* room for consumer/);
    expect(counter.snapshot().get('POST /reshaper 204')).toBeUndefined();
    expect((await api.getInventories(host.uuid)).inventories.VGPU?.total).toBe(8);
    expect((await api.consumerAllocations(c)).allocations[host.uuid]?.resources.VGPU).toBe(6);
  } finally {
    await deleteTree(api, host.uuid);
  }
});

test('the fake driver moves VGPU from the root to per-GPU children (config switch, two consumers): one reshape, never half-moved', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ca-vgpu-'));
  const hostFile = join(dir, 'host.json');
  writeFileSync(
    hostFile,
    JSON.stringify({
      cpu: { sockets: 2, cores_per_socket: 8, threads_per_core: 2, vendor: 'GenuineIntel', flags: ['avx2'] },
      memory: { total_mb: 262144 },
      disk: { total_gb: 1800 },
      gpus: [
        { address: '0000:84:00.0', vendor_id: '10de', device_id: '13f2', model: 'Tesla M60', memory_mb: 8129, mdev_types: [{ type: 'nvidia-35', available_instances: 4 }] },
        { address: '0000:85:00.0', vendor_id: '10de', device_id: '13f2', model: 'Tesla M60', memory_mb: 8129, mdev_types: [{ type: 'nvidia-35', available_instances: 4 }] },
      ],
      nics: [],
    }),
  );
  const host = uniqueHost('fake-vgpu');
  const config = (layout: string) =>
    loadConfig({
      files: [],
      env: {
        COMPUTE_AGENT__DEFAULT__HOST: host.name,
        COMPUTE_AGENT__FAKE__HOST_FILE: hostFile,
        COMPUTE_AGENT__DEVICES__ENABLED_MDEV_TYPES: 'nvidia-35',
        COMPUTE_AGENT__DEVICES__VGPU_PROVIDER_LAYOUT: layout,
      },
      defaultFile: '/nonexistent',
    }).config;
  const counter = new RequestCounter();
  const api = placementClient(counter);
  const driver = new FakeDriver({ config: config('root'), logger: captureLog().logger, clock: systemClock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
  await driver.init(host.name);
  const tracker = new ResourceTracker({ api, driver, nodename: host.name, rootUuid: host.uuid, initialRatios: RATIOS, logger: captureLog().logger });
  try {
    await tracker.updateFromDriver();
    expect((await api.getInventories(host.uuid)).inventories.VGPU?.total).toBe(8);
    const consumers = { [randomUUID()]: 2, [randomUUID()]: 3 };
    for (const [c, n] of Object.entries(consumers)) {
      await api.putAllocations(c, { allocations: { [host.uuid]: { resources: { VGPU: n } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    }
    driver.reconfigure(config('per_gpu'));
    const seen: Array<{ capacity: number; used: number; holders: number }> = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const s = await treeVgpu(host.uuid);
        if (s) seen.push(s);
      }
    })();
    counter.reset();
    const r = await tracker.updateFromDriver();
    polling = false;
    await poller;
    expect(r.reshaped).toBe(true);
    expect(counter.snapshot().get('POST /reshaper 204')).toBe(1);
    for (const s of seen) expect([s.capacity, s.used]).toEqual([8, 5]);
    // The poller watched the move: both consumers on the root before; after, on two GPUs (2 + 3
    // VGPU cannot share one GPU of 4).
    expect(seen.some((s) => s.holders === 1)).toBe(true);
    expect(seen.some((s) => s.holders === 2)).toBe(true);
    expect((await api.getInventories(host.uuid)).inventories.VGPU).toBeUndefined();
    const children = (await api.providersInTree(host.uuid)).filter((p) => p.parent_provider_uuid === host.uuid);
    expect(children).toHaveLength(2);
    for (const ch of children) expect((await api.getInventories(ch.uuid)).inventories.VGPU?.total).toBe(4);
    for (const [c, n] of Object.entries(consumers)) {
      const a = await api.consumerAllocations(c);
      expect(a.allocations[host.uuid]).toBeUndefined();
      expect(children.reduce((s, ch) => s + (a.allocations[ch.uuid]?.resources.VGPU ?? 0), 0)).toBe(n);
    }
    expect((await tracker.updateFromDriver()).stats.writes).toBe(0);
  } finally {
    await deleteTree(api, host.uuid);
  }
});
