/**
 * The whole small cloud of scripts/cloud seen from a test: brought up once (or found running), its
 * APIs called as the cloud's admin, and taken down after the run's last file only when a test of
 * the run brought it up (a marker in the cloud's directory, read by
 * test/integration/global-teardown.ts). Suites that need nova, Neutron and the agents together
 * share this one cloud rather than each starting its own.
 *
 * It is not: a stack manager (scripts/cloud is) nor an OpenStack client library: each call is one
 * HTTP request with the admin's token, its answer checked by the caller.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CloudApi, cloudEnv, cloudRunning, runScript } from '../../bench/cloud-api';
import { plugVmNamespace, type PluggablePort } from './neutron-cloud';
import { pidRunning } from './process';

export type { CloudReply, Service } from '../../bench/cloud-api';

/** The file that says a test run brought the cloud in `cloudDir` up (and must take it down). */
export const CLOUD_MARKER = (cloudDir: string): string => join(cloudDir, 'brought-up-by-tests');

/** The fields of nova's server view the cloud tests read. */
export interface ServerView {
  readonly id: string;
  readonly status: string;
  readonly 'OS-EXT-SRV-ATTR:host': string | null;
  readonly 'OS-EXT-STS:task_state': string | null;
  readonly fault?: { readonly message: string };
}

/** The pid a pid file names, when that process runs (`pidRunning`); 0 otherwise. */
function livePid(file: string): number {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return pidRunning(pid) ? pid : 0;
  } catch {
    return 0;
  }
}

export class SharedCloud extends CloudApi {
  private readonly probes: string[] = [];

  private constructor(
    env: Record<string, string>,
    private readonly log: (line: string) => void,
  ) {
    super(env);
  }

  /** The running cloud, or a new one (`scripts/cloud up`, a few minutes). */
  static async start(log: (line: string) => void): Promise<SharedCloud> {
    const running = await cloudRunning();
    const t0 = Date.now();
    if (!running) await runScript('cloud', ['up']);
    log(running ? 'scripts/cloud was running: reused' : `scripts/cloud up: ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    const env = cloudEnv();
    if (!running) writeFileSync(CLOUD_MARKER(env.CLOUD_DIR ?? ''), `${process.pid}\n`);
    const cloud = new SharedCloud(env, log);
    await cloud.login();
    return cloud;
  }

  /** The agent's JSON log lines of `host`. */
  agentLog(host: string): string {
    return readFileSync(join(this.env.CLOUD_DIR ?? '', 'hosts', host, 'agent.log'), 'utf8');
  }

  /**
   * The pid of the haproxy that `host`'s metadata agent runs for `network` (in that network's
   * ovnmeta namespace, which only that agent's mount namespace names); 0 while there is none.
   */
  metadataProxyPid(host: string, network: string): number {
    const conf = join(this.env.NEUTRON_DIR ?? '', 'hosts', host, 'metadata', 'ovn-metadata-proxy', `${network}.conf`);
    try {
      return Number(execFileSync('pgrep', ['-f', `haproxy -f ${conf}`], { encoding: 'utf8' }).trim().split('\n')[0] ?? 0);
    } catch {
      return 0;
    }
  }

  /** nova's view of server `id` (microversion `microversion`); undefined once it is gone (404). */
  async server<T extends ServerView = ServerView>(id: string, microversion?: string): Promise<T | undefined> {
    const r = await this.call('nova', 'GET', `/servers/${id}`, undefined, microversion);
    return r.status === 404 ? undefined : (r.body.server as T);
  }

  /**
   * Server `id` once it is `status` with no task state. @throws Error at once when it goes to
   * ERROR (with its fault), or after `ms` naming what it was last
   */
  async settled<T extends ServerView = ServerView>(id: string, status: string, ms = 300_000, microversion?: string): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const s = await this.server<T>(id, microversion);
      if (s?.status === status && s['OS-EXT-STS:task_state'] === null) return s;
      if (s?.status === 'ERROR' && status !== 'ERROR') throw new Error(`server ${id} went to ERROR: ${s.fault?.message ?? '(no fault)'}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting until server ${id} is ${status}: ${s?.status ?? 'gone'} task ${s?.['OS-EXT-STS:task_state'] ?? '-'}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** The last `lines` lines of server `id`'s console, through nova's API (os-getConsoleOutput). */
  async consoleOf(id: string, lines = 50): Promise<string> {
    return (await this.must<{ output: string }>('nova', 'POST', `/servers/${id}/action`, { 'os-getConsoleOutput': { length: lines } })).output;
  }

  /** A command in agent host `host`'s namespace, aimed at its Open vSwitch. */
  inHost(host: string, ...cmd: string[]): Promise<string> {
    return runScript('neutron-stack', ['host-exec', host, ...cmd], 60_000);
  }

  /** A "VM" namespace for `port` plugged on chassis `host` (deleted by `stop`). */
  async probe(host: string, port: PluggablePort): Promise<string> {
    const ns = `ca-probe-${Math.random().toString(36).slice(2, 8)}`;
    this.probes.push(ns);
    await plugVmNamespace((...cmd) => this.inHost(host, ...cmd), host, port, ns);
    return ns;
  }

  /** The pid of `host`'s agent (0 when it is not running). */
  agentPid(host: string): number {
    return livePid(join(this.env.CLOUD_DIR ?? '', 'hosts', host, 'agent.pid'));
  }

  /**
   * Starts `host`'s agent again (after a test killed it); resolves once it is up. `env` reaches the
   * agent's process: `COMPUTE_AGENT__<SECTION>__<OPTION>` overrides its configuration.
   */
  async restartAgent(host: string, env: Readonly<Record<string, string>> = {}): Promise<void> {
    await runScript('cloud', ['agent-up', host], 180_000, env);
  }

  /** The pid of glance-api (0 when it is not running). */
  glanceApiPid(): number {
    return livePid(join(this.env.GLANCE_DIR ?? '', 'glance-api.pid'));
  }

  /** `host`'s agent's instances_path, as its configuration names it (scripts/cloud keeps socket paths short). */
  instancesPath(host: string): string {
    const conf = readFileSync(join(this.env.CLOUD_DIR ?? '', 'hosts', host, 'agent.conf'), 'utf8');
    const path = /^instances_path\s*=\s*(\S+)/m.exec(conf)?.[1];
    if (!path) throw new Error(`no instances_path in ${host}'s agent.conf`);
    return path;
  }

  /** The pid of cinder-api (0 when it is not running). */
  cinderApiPid(): number {
    return livePid(join(this.env.CINDER_DIR ?? '', 'cinder-api.pid'));
  }

  /** Starts whatever of Cinder is not running (after a test stopped its API). */
  async restartCinder(): Promise<void> {
    await runScript('cinder-stack', ['up'], 300_000);
  }

  /** Starts whatever of Neutron is not running (after a test stopped its API). */
  async restartNeutron(): Promise<void> {
    await runScript('neutron-stack', ['up'], 300_000);
  }

  /** Deletes the probes (the cloud itself goes in the run's global teardown). Never throws. */
  stop(): Promise<void> {
    for (const ns of this.probes) execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
    this.log('probes deleted');
    return Promise.resolve();
  }
}
