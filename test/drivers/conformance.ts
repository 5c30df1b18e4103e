/**
 * The virt-driver conformance suite: every driver, ours or a third party's, runs it through
 * `describeDriverConformance` with a factory and, optionally, reshape scenarios.
 *
 * It checks the tree contract (one root named after the node, unique names, parents first, no
 * total of 0, standard or CUSTOM_ names), that the driver owns only what it owns, determinism,
 * and that move instructions balance and carry every allocation to inventory that holds it.
 * The Placement writes for each tree are checked by `describePlacementConformance`
 * (`placement-conformance.ts`, nock from the real exchanges); lifecycle methods are exercised by
 * each driver's own tests and the compute integration tests, except VIF plugging, checked here for
 * drivers that say what they plugged (`ConformanceSubject.plugged`): spawn plugs, a rejecting
 * `beforeRun` leaves nothing, destroy unplugs, attach/detach.
 */
import { ProviderTree } from '../../model/provider-tree';
import type { AllocationsByConsumer, MoveInstruction, ProviderSnapshot } from '../../model/provider-types';
import type { VirtDriver } from '../../virt-drivers/driver';
import { VifTypeNotSupportedError } from '../../virt-drivers/net/errors';
import { STANDARD_TRAITS } from '../../virt-drivers/traits';
import type { InstanceSpec } from '../../virt-drivers/types';
import { ovsVif } from '../helpers/vifs';
import { checkMoves, checkProviderTree } from '../../virt-drivers/tree-checks';

/** A change to the host (or the driver's configuration) that should reshape the tree. */
export interface ReshapeScenario {
  readonly name: string;
  /** Whether the change must produce move instructions. */
  readonly expectMoves: boolean;
  /** Changes the host; returns the driver to ask next (a restarted one after a config change). */
  change(driver: VirtDriver): Promise<VirtDriver>;
}

export interface ConformanceSubject {
  readonly nodename: string;
  /** A fresh, uninitialised driver (and a fresh host state); called once per test. */
  make(): Promise<VirtDriver>;
  readonly scenarios?: readonly ReshapeScenario[];
  /** The port ids the driver has plugged on its host now; given, the VIF cases run. */
  readonly plugged?: (driver: VirtDriver) => readonly string[];
}

export const ROOT_UUID = '0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6';

export function rootOnly(nodename: string): ProviderTree {
  const tree = new ProviderTree();
  tree.newRoot(nodename, ROOT_UUID);
  return tree;
}

async function firstPass(subject: ConformanceSubject): Promise<{ driver: VirtDriver; tree: ProviderTree; moves: MoveInstruction[] }> {
  const driver = await subject.make();
  await driver.init(subject.nodename);
  const tree = rootOnly(subject.nodename);
  const moves = await driver.updateProviderTree(tree, subject.nodename);
  return { driver, tree, moves };
}

/**
 * Consumers filling about 90% of every class of the compute node's providers: up to three per
 * class, each holding 30% of the capacity (at least one unit).
 */
export function fillAllocations(snaps: readonly ProviderSnapshot[], root: string): AllocationsByConsumer {
  const out: Record<string, Record<string, Record<string, number>>> = {};
  let n = 0;
  for (const p of snaps.filter((s) => s.root_provider_uuid === root)) {
    for (const [rc, rec] of Object.entries(p.inventories)) {
      const cap = Math.floor((rec.total - (rec.reserved ?? 0)) * (rec.allocation_ratio ?? 1));
      const each = Math.max(1, Math.floor(cap * 0.3));
      for (let i = 0; i < Math.min(3, cap) && (i + 1) * each <= cap; i++) {
        const consumer = `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;
        out[consumer] = { [p.uuid]: { [rc]: Math.min(each, rec.max_unit ?? each) } };
      }
    }
  }
  return out;
}

const shape = (moves: readonly MoveInstruction[]): Array<Omit<MoveInstruction, 'consumers'>> =>
  moves.map((m) => ({ from: m.from, to: m.to, resources: m.resources })).sort((a, b) => `${a.from}${a.to}`.localeCompare(`${b.from}${b.to}`));

/** Registers the suite for one driver setup. */
export function describeDriverConformance(label: string, subject: ConformanceSubject): void {
  const node = subject.nodename;

  describe(`driver conformance: ${label}`, () => {
    test('fills a root-only tree with a valid tree and no moves', async () => {
      const { tree, moves } = await firstPass(subject);
      expect(checkProviderTree(tree.snapshot(), node)).toEqual([]);
      expect(moves).toEqual([]);
      expect(tree.data(node).uuid).toBe(ROOT_UUID);
      expect(tree.snapshot().length).toBeGreaterThanOrEqual(1);
    });

    test('a second pass over its own tree changes nothing and moves nothing', async () => {
      const { driver, tree } = await firstPass(subject);
      const before = tree.snapshot();
      const copy = tree.clone();
      expect(await driver.updateProviderTree(copy, node)).toEqual([]);
      expect(copy.snapshot()).toEqual(before);
    });

    test('the same host yields the same tree, uuids included, from a fresh tree', async () => {
      const a = await firstPass(subject);
      const b = await firstPass(subject);
      expect(b.tree.snapshot()).toEqual(a.tree.snapshot());
    });

    test('leaves alone what it does not own', async () => {
      const driver = await subject.make();
      await driver.init(node);
      const tree = rootOnly(node);
      tree.updateTraits(node, ['COMPUTE_STATUS_DISABLED', 'CUSTOM_RACK_A1']);
      tree.updateAggregates(node, ['6f8a0b1c-2d3e-4f50-8a9b-0c1d2e3f4a5b']);
      const fpga = tree.newChild('cyborg-fpga-0', node, '1a2b3c4d-5e6f-4a70-8b91-a2b3c4d5e6f7');
      tree.updateInventory(fpga, { CUSTOM_FPGA_INTEL_ARRIA10: { total: 1 } });
      tree.updateTraits(fpga, ['OWNER_CYBORG']);
      const nfs = tree.newRoot('nfs-pool', '2b3c4d5e-6f70-4a81-9ba2-b3c4d5e6f708');
      tree.updateInventory(nfs, { DISK_GB: { total: 10000 } });
      tree.updateTraits(nfs, ['MISC_SHARES_VIA_AGGREGATE']);
      tree.updateAggregates(nfs, ['7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d']);
      const foreign = [tree.data(fpga), tree.data(nfs)];
      await driver.updateProviderTree(tree, node);
      expect([tree.data(fpga), tree.data(nfs)]).toEqual(foreign);
      expect(tree.data(node).traits).toEqual(expect.arrayContaining(['COMPUTE_STATUS_DISABLED', 'CUSTOM_RACK_A1']));
      expect(tree.data(node).aggregates).toContain('6f8a0b1c-2d3e-4f50-8a9b-0c1d2e3f4a5b');
      expect(checkProviderTree(tree.snapshot(), node)).toEqual([]);
    });

    test('refuses a tree without its root', async () => {
      const driver = await subject.make();
      await driver.init(node);
      const tree = new ProviderTree();
      tree.newRoot('someone-else', ROOT_UUID);
      await expect(driver.updateProviderTree(tree, node)).rejects.toThrow(node);
    });

    test('capability traits are standard COMPUTE_ traits', async () => {
      const driver = await subject.make();
      for (const trait of Object.keys(driver.capabilitiesAsTraits())) {
        expect(trait).toMatch(/^COMPUTE_/);
        expect(STANDARD_TRAITS.has(trait)).toBe(true);
      }
    });

    test('reports its instances and the host uptime', async () => {
      const driver = await subject.make();
      await driver.init(node);
      expect(Array.isArray(await driver.listInstances())).toBe(true);
      const uptime = await driver.getHostUptime();
      expect(Number.isFinite(uptime) && uptime >= 0).toBe(true);
      await driver.cleanupHost(node);
    });

    if (subject.plugged) describeVifCases(subject, subject.plugged);

    for (const scenario of subject.scenarios ?? []) {
      test(`reshape: ${scenario.name}`, async () => {
        const first = await firstPass(subject);
        const t0 = first.tree;
        const allocations = fillAllocations(t0.snapshot(), ROOT_UUID);
        const driver = await scenario.change(first.driver);
        const plain = t0.clone();
        const withoutAllocations = await driver.updateProviderTree(plain, node);
        const t1 = t0.clone();
        const moves = await driver.updateProviderTree(t1, node, allocations);

        expect(checkProviderTree(t1.snapshot(), node)).toEqual([]);
        expect(t1.snapshot()).toEqual(plain.snapshot());
        expect(shape(moves)).toEqual(shape(withoutAllocations));
        expect(withoutAllocations.every((m) => m.consumers === undefined)).toBe(true);
        expect(moves.every((m) => m.consumers !== undefined)).toBe(true);
        if (scenario.expectMoves) expect(moves.length).toBeGreaterThan(0);
        expect(checkMoves(t0.snapshot(), t1.snapshot(), moves, allocations)).toEqual([]);
      });
    }
  });
}

const P1 = 'c0000001-0000-4000-8000-000000000001';
const P2 = 'c0000002-0000-4000-8000-000000000002';

function vifSpec(uuid: string, ports: readonly string[]): InstanceSpec {
  return {
    uuid,
    name: `instance-${uuid.slice(0, 8)}`,
    flavor: { name: 'tiny', vcpus: 1, memory_mb: 64, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} },
    allocations: {},
    network_info: ports.map((p, i) => ovsVif(p, `fa:16:3e:00:00:0${i + 1}`)),
  };
}

/** The VIF-plugging contract (`VirtDriver.spawn`, `destroy`, `attachInterface`, `detachInterface`). */
function describeVifCases(subject: ConformanceSubject, plugged: (d: VirtDriver) => readonly string[]): void {
  const ready = async (): Promise<VirtDriver> => {
    const d = await subject.make();
    await d.init(subject.nodename);
    await d.updateProviderTree(rootOnly(subject.nodename), subject.nodename);
    return d;
  };
  const uuid = 'd0000001-0000-4000-8000-000000000001';
  const ref = { uuid, name: '' };

  test('VIFs: spawn plugs every VIF; beforeRun sees them plugged and the guest not running; destroy unplugs', async () => {
    const d = await ready();
    let during: unknown;
    let pluggedDuring: readonly string[] = [];
    await d.spawn(vifSpec(uuid, [P1, P2]), {
      beforeRun: async () => {
        during = (await d.getInfo(ref)).powerState;
        pluggedDuring = [...plugged(d)];
      },
    });
    expect(during).not.toBe('RUNNING');
    expect([...pluggedDuring].sort()).toEqual([P1, P2]);
    expect((await d.getInfo(ref)).powerState).toBe('RUNNING');
    await d.destroy(ref);
    expect(plugged(d)).toEqual([]);
  });

  test('VIFs: a rejecting beforeRun is rethrown unchanged and leaves no instance and nothing plugged', async () => {
    const d = await ready();
    const boom = new Error('vif plugging timed out');
    await expect(d.spawn(vifSpec(uuid, [P1]), { beforeRun: () => Promise.reject(boom) })).rejects.toBe(boom);
    expect(plugged(d)).toEqual([]);
    expect((await d.listInstances()).map((i) => i.uuid)).not.toContain(uuid);
  });

  test('VIFs: a port whose binding failed fails the spawn with VifTypeNotSupportedError and leaves nothing', async () => {
    const d = await ready();
    const spec = vifSpec(uuid, [P1]);
    const bad = { ...spec, network_info: [{ ...ovsVif(P2, 'fa:16:3e:00:00:09'), type: 'binding_failed' }] };
    await expect(d.spawn(bad)).rejects.toThrow(VifTypeNotSupportedError);
    expect(plugged(d)).toEqual([]);
    expect((await d.listInstances()).map((i) => i.uuid)).not.toContain(uuid);
  });

  test('VIFs: attach and detach (both idempotent); plugVifs/unplugVifs without an instance', async () => {
    const d = await ready();
    await d.spawn(vifSpec(uuid, [P1]));
    await d.attachInterface(ref, ovsVif(P2, 'fa:16:3e:00:00:02'));
    await d.attachInterface(ref, ovsVif(P2, 'fa:16:3e:00:00:02'));
    expect([...plugged(d)].sort()).toEqual([P1, P2]);
    await d.detachInterface(ref, ovsVif(P1, 'fa:16:3e:00:00:01'));
    await d.detachInterface(ref, ovsVif(P1, 'fa:16:3e:00:00:01'));
    expect(plugged(d)).toEqual([P2]);
    await d.destroy(ref);
    expect(plugged(d)).toEqual([]);
    const other = { uuid: 'd0000002-0000-4000-8000-000000000002', name: '' };
    await d.plugVifs(other, [ovsVif(P1, 'fa:16:3e:00:00:01')]);
    await d.plugVifs(other, [ovsVif(P1, 'fa:16:3e:00:00:01')]);
    expect(plugged(d)).toEqual([P1]);
    await d.unplugVifs(other, [ovsVif(P1, 'fa:16:3e:00:00:01')]);
    await d.unplugVifs(other, [ovsVif(P1, 'fa:16:3e:00:00:01')]);
    expect(plugged(d)).toEqual([]);
  });
}
