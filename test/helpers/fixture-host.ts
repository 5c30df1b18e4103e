/**
 * Loads a fixture host from test/fixtures/hosts/<name>: its config, a HostFs rooted at its
 * recorded sys/ and proc/ trees (with recorded filesystem sizes), and a FakeExec that replays its
 * recorded tool outputs. Builds the fake driver on top, as `discover` would on that host.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger, type Logger } from '../../lib/logging/logger';
import { systemClock } from '../../lib/clock';
import { treeJson, type ProviderJson } from '../../agent/cli/render-tree';
import { loadConfig } from '../../config/loader';
import type { AgentConfig } from '../../config/schema';
import { ProviderTree } from '../../model/provider-tree';
import type { MoveInstruction } from '../../model/provider-types';
import { FakeDriver } from '../../virt-drivers/fake/driver';
import { FakeExec, type FakeAnswer } from './fake-exec';
import { RecordedSizesHostFs, type FsSize } from '../../virt-drivers/host/host-fs';
import type { DriverContext } from '../../virt-drivers/types';

export const FIXTURES = join(__dirname, '..', 'fixtures', 'hosts');
/** The root provider uuid every fixture test uses (what compute_id would hold). */
export const FIXTURE_ROOT_UUID = '5c6f1e2a-7b3d-4c8e-9f10-2a3b4c5d6e7f';

type RecordedAnswer = { stdout_file: string } | { hang: true } | { exit_code: number; stderr?: string } | { not_found: true };

export interface FixtureHost {
  readonly dir: string;
  readonly config: AgentConfig;
  readonly fs: RecordedSizesHostFs;
  readonly exec: FakeExec;
}

/** Replaces options of the fixture's config (`section.key` -> raw value, as in the file). */
export type ConfigOverrides = Readonly<Record<string, string>>;

export function loadFixtureHost(name: string, overrides: ConfigOverrides = {}): FixtureHost {
  const dir = join(FIXTURES, name);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(overrides)) {
    const [section = '', key = ''] = k.split('.');
    env[`COMPUTE_AGENT__${section.toUpperCase()}__${key.toUpperCase()}`] = v;
  }
  const { config } = loadConfig({ files: [join(dir, 'compute-agent.conf')], env, defaultFile: join(dir, 'none') });
  const sizes = JSON.parse(readFileSync(join(dir, 'statfs.json'), 'utf8')) as Record<string, FsSize>;
  const recorded = JSON.parse(readFileSync(join(dir, 'commands.json'), 'utf8')) as Record<string, RecordedAnswer>;
  const script: Record<string, FakeAnswer> = {};
  for (const [line, a] of Object.entries(recorded)) {
    if ('stdout_file' in a) script[line] = { stdout: readFileSync(join(dir, a.stdout_file), 'utf8') };
    else if ('hang' in a) script[line] = { hang: true };
    else if ('not_found' in a) script[line] = { notFound: true };
    else script[line] = { exitCode: a.exit_code, stderr: a.stderr ?? '' };
  }
  return { dir, config, fs: new RecordedSizesHostFs(dir, sizes), exec: new FakeExec(script) };
}

export function driverContext(host: FixtureHost, logger: Logger = silentLogger()): DriverContext {
  return { config: host.config, logger, clock: systemClock, exec: host.exec, fs: host.fs };
}

/** A tree holding only the root the tracker would create. */
export function rootOnlyTree(config: AgentConfig, rootUuid = FIXTURE_ROOT_UUID): ProviderTree {
  const tree = new ProviderTree();
  tree.newRoot(config.DEFAULT.host, rootUuid);
  return tree;
}

export interface FixtureDiscovery {
  readonly host: FixtureHost;
  readonly driver: FakeDriver;
  readonly tree: ProviderTree;
  readonly moves: MoveInstruction[];
  readonly providers: ProviderJson[];
}

/** Discovers a fixture host from scratch with the fake driver on its recorded probes. */
export async function discoverFixture(name: string, overrides: ConfigOverrides = {}, logger?: Logger): Promise<FixtureDiscovery> {
  const host = loadFixtureHost(name, overrides);
  const driver = new FakeDriver(driverContext(host, logger));
  await driver.init(host.config.DEFAULT.host);
  const tree = rootOnlyTree(host.config);
  const moves = await driver.updateProviderTree(tree, host.config.DEFAULT.host);
  return { host, driver, tree, moves, providers: treeJson(tree, host.config).providers };
}
