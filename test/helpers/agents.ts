/**
 * Compute agents for integration tests: a config per agent (own host name, state dir, fake host
 * file with room for many instances, a test-private control exchange), started as in-process
 * daemons or as real processes of the built binary (for SIGKILL tests).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { agentSpec as benchAgentSpec, type AgentSpec } from '../../bench/agents';
import { Daemon } from '../../agent/daemon';
import { silentLogger } from '../../lib/logging/logger';
import { NoAuth } from '../../tracker/placement/auth';
import { PlacementClient } from '../../tracker/placement/client';
import { PlacementHttp } from '../../tracker/placement/http';
import { NodeHttpTransport, type HttpTransport, type TransportRequest, type TransportResponse } from '../../tracker/placement/transport';
import { agentConfig } from '../../bench/agents';
import { PLACEMENT_URL, TRANSPORT_URL } from './stack';

export type { AgentSpec } from '../../bench/agents';
export { agentConfig, rootOf, startDaemon } from '../../bench/agents';

/** An agent on the dev stack (see bench/agents.ts for what its config holds). */
export function agentSpec(host: string, exchange: string, extra = ''): AgentSpec {
  return benchAgentSpec(host, exchange, { placementUrl: PLACEMENT_URL, transportUrl: TRANSPORT_URL }, extra);
}

/**
 * The built binary as a child process; resolves once it logged "compute-agent up". `env` is added
 * to the test's environment (a crash point armed with `COMPUTE_AGENT_CRASH_AT`, for one).
 */
export async function startProcess(spec: AgentSpec, bin: string, env: Readonly<Record<string, string>> = {}): Promise<{ child: ChildProcess; output: string[] }> {
  const child = spawn(process.execPath, [bin, 'run', '--config-file', spec.file], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
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

/** The built agent binary. */
export const AGENT_BIN = join(__dirname, '..', '..', 'dist', 'agent', 'cli', 'main.js');

/** One agent as a real process that a test kills, stops and starts again on the same state. */
export class AgentProcess {
  child: ChildProcess | undefined;
  output: string[] = [];
  constructor(readonly spec: AgentSpec) {}

  async start(env: Readonly<Record<string, string>> = {}): Promise<void> {
    const p = await startProcess(this.spec, AGENT_BIN, env);
    this.child = p.child;
    this.output = p.output;
  }

  /** Starts it again until it comes up, as systemd's Restart= would (startup gives up while Placement is down). */
  async startUntilUp(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      try {
        await this.start();
        return;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  /** Resolves with the signal (or exit code) when the running process ends. */
  exited(): Promise<string> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return Promise.resolve(String(c?.signalCode ?? c?.exitCode ?? 'not started'));
    return new Promise((r) => c.once('exit', (code, signal) => r(String(signal ?? code))));
  }

  /** SIGKILL, or SIGTERM (`graceful`); resolves once the process is gone. */
  async kill(graceful = false): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const gone = this.exited();
    c.kill(graceful ? 'SIGTERM' : 'SIGKILL');
    await gone;
  }
}

/** Runs `before` ahead of each Placement request it matches, then sends the request on. */
export class InterceptingTransport implements HttpTransport {
  private readonly inner = new NodeHttpTransport({ timeoutMs: 30000 });
  before: ((req: TransportRequest) => Promise<void>) | undefined;

  async send(req: TransportRequest): Promise<TransportResponse> {
    await this.before?.(req);
    return this.inner.send(req);
  }
}

/** An in-process daemon on the dev stack whose Placement requests go through `transport`. */
export async function startDaemonVia(spec: AgentSpec, transport: HttpTransport): Promise<Daemon> {
  const placement = new PlacementClient(new PlacementHttp({ auth: new NoAuth(PLACEMENT_URL), transport }));
  const d = new Daemon({ config: agentConfig(spec), logger: silentLogger(), placement, startupAttempts: 3 });
  await d.start();
  return d;
}
