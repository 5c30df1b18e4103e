// Every fixture host against the real Placement: the first sync creates the whole tree exactly as
// `discover --json` shows it (Placement's own field names and defaults), and a second sync makes no
// write. Also the acceptance sizes for a real GPU host (8 H100, MIG on two).
import { randomUUID } from 'node:crypto';
import { treeJson } from '../../../agent/cli/render-tree';
import { RequestCounter } from '../../../tracker/placement/http';
import { initialRatiosFrom, ResourceTracker } from '../../../tracker/tracker';
import { ProviderTree } from '../../../model/provider-tree';
import { FakeDriver } from '../../../virt-drivers/fake/driver';
import { driverContext, loadFixtureHost } from '../../helpers/fixture-host';
import { captureLog, deleteTree, placementClient } from '../../helpers/placement';
import type { PlacementClient } from '../../../tracker/placement/client';

/** Removes whatever a crashed earlier run left under this host name. */
async function cleanByName(api: PlacementClient, name: string): Promise<void> {
  const res = await api.http.request<{ resource_providers: Array<{ uuid: string; root_provider_uuid: string }> }>({
    method: 'GET',
    path: `/resource_providers?name=${encodeURIComponent(name)}`,
    microversion: '1.14',
  });
  for (const p of res.data.resource_providers) await deleteTree(api, p.root_provider_uuid);
}

describe.each(['h100-mig', 'mi250-amd', 'm60-mdev', 'nic-sriov-25g', 'numa-hugepages'])('fixture host %s on the real Placement', (fixture) => {
  test('first sync creates the tree discover --json shows; the second writes nothing', async () => {
    const host = loadFixtureHost(fixture);
    const nodename = host.config.DEFAULT.host;
    const rootUuid = randomUUID();
    const counter = new RequestCounter();
    const api = placementClient(counter);
    await cleanByName(api, nodename);
    const driver = new FakeDriver(driverContext(host));
    await driver.init(nodename);
    const tracker = new ResourceTracker({
      api,
      driver,
      nodename,
      rootUuid,
      initialRatios: initialRatiosFrom(host.config.DEFAULT),
      logger: captureLog().logger,
    });
    try {
      const first = await tracker.updateFromDriver();
      expect(first.problems).toEqual([]);

      // What `discover --json` prints for this host with this compute_id.
      const fresh = new ProviderTree();
      fresh.newRoot(nodename, rootUuid);
      const d2 = new FakeDriver(driverContext(loadFixtureHost(fixture)));
      await d2.init(nodename);
      await d2.updateProviderTree(fresh, nodename);
      const shown = treeJson(fresh, host.config).providers;

      const inPlacement = [];
      for (const p of await api.providersInTree(rootUuid)) {
        const [inv, traits, aggs] = await Promise.all([api.getInventories(p.uuid), api.getTraits(p.uuid), api.getAggregates(p.uuid)]);
        inPlacement.push({
          uuid: p.uuid,
          name: p.name,
          parent_provider_uuid: p.parent_provider_uuid,
          inventories: inv.inventories,
          traits: [...traits.traits].sort(),
          aggregates: [...aggs.aggregates].sort(),
        });
      }
      const byUuid = <T extends { uuid: string }>(xs: T[]): T[] => [...xs].sort((a, b) => a.uuid.localeCompare(b.uuid));
      expect(byUuid(inPlacement)).toEqual(byUuid(shown.map((p) => ({ ...p, traits: [...p.traits].sort(), aggregates: [...p.aggregates].sort() }))));
      if (fixture === 'h100-mig') expect(shown.length).toBeGreaterThanOrEqual(9);

      counter.reset();
      const second = await tracker.updateFromDriver();
      expect(second.stats.writes).toBe(0);
      expect(counter.writes()).toBe(0);
      expect(counter.reads()).toBe(1);
    } finally {
      await deleteTree(api, rootUuid);
    }
  });
});
