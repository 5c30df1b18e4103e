/**
 * Agents for benchmarks and integration tests: a config file per agent (own host name, state dir,
 * a fake host file roomy enough for hundreds of instances, a private control exchange so runs never
 * meet other traffic), and in-process daemons with a request counter on their Placement client.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Daemon } from '../agent/daemon';
import { silentLogger, type Logger } from '../lib/logging/logger';
import { loadConfig } from '../config/loader';
import type { AgentConfig } from '../config/schema';
import { placementFromConfig } from '../tracker/placement/factory';
import { NoAuth } from '../tracker/placement/auth';
import { PlacementClient } from '../tracker/placement/client';
import { PlacementHttp, RequestCounter } from '../tracker/placement/http';

/** 128 threads, 1 TiB, 4 TB: room for a few hundred small instances. */
export const BIG_HOST = {
  cpu: { sockets: 4, cores_per_socket: 16, threads_per_core: 2, vendor: 'GenuineIntel', flags: ['avx2', 'sse4_2'] },
  memory: { total_mb: 1048576 },
  disk: { total_gb: 4000 },
  gpus: [],
  nics: [],
};

export interface AgentSpec {
  readonly host: string;
  readonly exchange: string;
  readonly dir: string;
  readonly file: string;
}

export interface AgentEndpoints {
  readonly placementUrl: string;
  readonly transportUrl: string;
}

export function agentSpec(host: string, exchange: string, ends: AgentEndpoints, extra = ''): AgentSpec {
  const dir = mkdtempSync(join(tmpdir(), `ca-${host}-`));
  mkdirSync(join(dir, 'state'));
  const hostFile = join(dir, 'host.json');
  writeFileSync(hostFile, JSON.stringify(BIG_HOST));
  const file = join(dir, 'agent.conf');
  writeFileSync(
    file,
    `[DEFAULT]\nhost = ${host}\ncompute_driver = fake\nstate_path = ${join(dir, 'state')}\ntransport_url = ${ends.transportUrl}\ncontrol_exchange = ${exchange}\n` +
      `update_resources_interval = -1\ngraceful_shutdown_timeout = 10\n` +
      `[placement]\nendpoint_override = ${ends.placementUrl}\n[metrics]\nlisten =\n` +
      `[fake]\nhost_file = ${hostFile}\ninstances_file = ${join(dir, 'state', 'fake-instances.json')}\n${extra}`,
    { mode: 0o600 },
  );
  return { host, exchange, dir, file };
}

export function agentConfig(spec: AgentSpec): AgentConfig {
  return loadConfig({ files: [spec.file], env: {} }).config;
}

export function rootOf(spec: AgentSpec): string {
  return readFileSync(join(spec.dir, 'state', 'compute_id'), 'utf8').trim();
}

export async function startDaemon(spec: AgentSpec, logger: Logger = silentLogger(), counter = new RequestCounter()): Promise<Daemon> {
  const config = agentConfig(spec);
  const d = new Daemon({ config, logger, placement: placementFromConfig(config, counter), startupAttempts: 3 });
  await d.start();
  return d;
}

/**
 * Removes what an agent left once its daemon has stopped: its provider tree in Placement (children
 * first) and its directory (config, state, journal). Best effort: a bench that ends must not fail
 * on its cleanup, and a tree never registered has nothing to delete.
 */
export async function removeAgent(spec: AgentSpec, placementUrl: string): Promise<void> {
  try {
    const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(placementUrl) }));
    for (const p of [...(await api.providersInTree(rootOf(spec)))].reverse()) await api.deleteProvider(p.uuid);
  } catch {
    /* best effort */
  }
  rmSync(spec.dir, { recursive: true, force: true });
}
