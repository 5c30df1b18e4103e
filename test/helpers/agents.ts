/**
 * Compute agents for integration tests: a config per agent (own host name, state dir, fake host
 * file with room for many instances, a test-private control exchange), started as in-process
 * daemons or as real processes of the built binary (for SIGKILL tests).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Daemon } from '../../agent/daemon';
import { silentLogger, type Logger } from '../../agent/logging/logger';
import { loadConfig } from '../../config/loader';
import type { AgentConfig } from '../../config/schema';
import { placementFromConfig } from '../../tracker/placement/factory';
import { HOST_FILE } from './compute-harness';
import { PLACEMENT_URL, TRANSPORT_URL } from './stack';

export interface AgentSpec {
  readonly host: string;
  readonly exchange: string;
  readonly dir: string;
  readonly file: string;
}

export function agentSpec(host: string, exchange: string, extra = ''): AgentSpec {
  const dir = mkdtempSync(join(tmpdir(), `ca-${host}-`));
  mkdirSync(join(dir, 'state'));
  const hostFile = join(dir, 'host.json');
  writeFileSync(hostFile, JSON.stringify({ ...HOST_FILE, cpu: { ...HOST_FILE.cpu, sockets: 4 }, memory: { total_mb: 1048576 } }));
  const file = join(dir, 'agent.conf');
  writeFileSync(
    file,
    `[DEFAULT]\nhost = ${host}\nstate_path = ${join(dir, 'state')}\ntransport_url = ${TRANSPORT_URL}\ncontrol_exchange = ${exchange}\n` +
      `update_resources_interval = -1\ngraceful_shutdown_timeout = 10\n` +
      `[placement]\nendpoint_override = ${PLACEMENT_URL}\n[metrics]\nlisten =\n` +
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

export async function startDaemon(spec: AgentSpec, logger: Logger = silentLogger()): Promise<Daemon> {
  const config = agentConfig(spec);
  const d = new Daemon({ config, logger, placement: placementFromConfig(config), startupAttempts: 3 });
  await d.start();
  return d;
}

/** The built binary as a child process; resolves once it logged "compute-agent up". */
export async function startProcess(spec: AgentSpec, bin: string): Promise<{ child: ChildProcess; output: string[] }> {
  const child = spawn(process.execPath, [bin, 'run', '--config-file', spec.file], { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  const deadline = Date.now() + 60000;
  while (!output.join('').includes('"msg":"compute-agent up"')) {
    if (child.exitCode !== null) throw new Error(`agent ${spec.host} exited (${child.exitCode}):\n${output.join('')}`);
    if (Date.now() > deadline) throw new Error(`agent ${spec.host} did not come up:\n${output.join('')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, output };
}
