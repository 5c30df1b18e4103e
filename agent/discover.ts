/**
 * One discovery pass, as the tracker will run it at the start of each audit: load (or create) the
 * compute node's uuid, create the root provider named after `[DEFAULT] host` in a fresh tree,
 * build and init the configured driver, and let it fill the tree.
 *
 * It is: shared by `compute-agent discover`, the discovery benchmark and the tests that check the
 * real machine. It is not: a Placement sync; the tree stays in memory.
 */
import { loadOrCreateComputeId } from '../tracker/identity';
import { ProviderTree } from '../model/provider-tree';
import type { MoveInstruction } from '../model/provider-types';
import type { VirtDriver } from '../virt-drivers/driver';
import type { HostFacts } from '../virt-drivers/host/discover';
import { createDriver, type DriverDeps } from './wiring';

/** What building the driver needs (config, logger and the host seams), plus: */
export interface DiscoverOnceOptions extends DriverDeps {
  /** Use this root uuid instead of `<state_path>/compute_id` (benchmarks, tests). */
  readonly rootUuid?: string;
}

export interface DiscoverOnceResult {
  readonly tree: ProviderTree;
  readonly rootUuid: string;
  readonly moves: MoveInstruction[];
  /** The facts behind the tree, when the driver exposes them. */
  readonly facts?: HostFacts;
}

/** A driver that can show the facts behind its last tree (the built-in ones can). */
interface FactsSource {
  lastHostFacts(): HostFacts | undefined;
}

function hasFacts(d: VirtDriver): d is VirtDriver & FactsSource {
  return typeof (d as Partial<FactsSource>).lastHostFacts === 'function';
}

/**
 * Runs one pass.
 * @throws ComputeIdError, DriverNotChosenError, UnknownDriverError, DriverInitError, and whatever the driver throws
 */
export async function discoverOnce(opts: DiscoverOnceOptions): Promise<DiscoverOnceResult> {
  const { config } = opts;
  const host = config.DEFAULT.host;
  const driver = createDriver(opts);
  const rootUuid = opts.rootUuid ?? (await loadOrCreateComputeId(config.DEFAULT.state_path));
  await driver.init(host);
  try {
    const tree = new ProviderTree();
    tree.newRoot(host, rootUuid);
    const moves = await driver.updateProviderTree(tree, host);
    const facts = hasFacts(driver) ? driver.lastHostFacts() : undefined;
    return { tree, rootUuid, moves, ...(facts ? { facts } : {}) };
  } finally {
    await driver.cleanupHost(host);
  }
}
