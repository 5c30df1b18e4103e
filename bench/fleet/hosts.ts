/**
 * A group of simulated hosts in one process: per host, its own configuration file, state dir and
 * fake-driver host file, the real fake driver, the real tracker and auditor (`agent/wiring.ts`, as
 * the daemon builds them) and its own Placement client with a request counter. No RabbitMQ: the
 * fleet scenario is about Placement traffic, and the RPC side has its own benchmark.
 *
 * A host here is everything the daemon runs against Placement, minus the RPC server; hundreds of
 * them share an event loop, which is why a fleet is sharded over a few processes (`shard.ts`).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../lib/logging/logger';
import { createDriver, createTracker } from '../../agent/wiring';
import { loadConfig } from '../../config/loader';
import type { Auditor } from '../../tracker/audit';
import { placementFromConfig } from '../../tracker/placement/factory';
import { RequestCounter } from '../../tracker/placement/http';
import type { ResourceTracker } from '../../tracker/tracker';
import type { CountEntries } from './report';

/**
 * One host: 16 threads (64 VCPU at the default 4.0 ratio), 64 GiB, 1 TB, two 25 Gb/s NICs with 16
 * VFs each, so each tree is a root and two NIC children, and a few dozen small instances fill it.
 */
export const FLEET_HOST = {
  cpu: { sockets: 1, cores_per_socket: 8, threads_per_core: 2, vendor: 'GenuineIntel', flags: ['avx2', 'sse4_2'] },
  memory: { total_mb: 65536 },
  disk: { total_gb: 1000 },
  gpus: [],
  nics: [
    { name: 'ens1f0', address: '0000:3b:00.0', speed_mbps: 25000, sriov_totalvfs: 16, sriov_numvfs: 16 },
    { name: 'ens1f1', address: '0000:3b:00.1', speed_mbps: 25000, sriov_totalvfs: 16, sriov_numvfs: 16 },
  ],
};

export interface HostGroupOptions {
  /** Host names are `<prefix>-<index>`; the prefix keeps runs apart. */
  readonly prefix: string;
  readonly first: number;
  readonly count: number;
  readonly placementUrl: string;
  /** Where per-host files go; removed by `close`. */
  readonly dir: string;
}

interface FleetHost {
  readonly name: string;
  readonly hostFile: string;
  readonly rootUuid: string;
  readonly tracker: ResourceTracker;
  readonly auditor: Auditor;
  readonly counter: RequestCounter;
}

export interface FirstSyncReport {
  /** Epoch ms at which each host's first sync completed (the tree is in Placement). */
  readonly doneAt: readonly number[];
  /** First-sync attempts that failed and were retried (the daemon retries the same way). */
  readonly retries: number;
  /** Hosts that never synced. */
  readonly failed: readonly string[];
}

export interface AuditStats {
  readonly runs: number;
  readonly failures: number;
}

function writeHostFiles(dir: string, name: string, placementUrl: string): { file: string; hostFile: string } {
  const hostDir = join(dir, name);
  mkdirSync(join(hostDir, 'state'), { recursive: true });
  const hostFile = join(hostDir, 'host.json');
  writeFileSync(hostFile, JSON.stringify(FLEET_HOST));
  const file = join(hostDir, 'agent.conf');
  // The fleet's `+vf` flavor asks one NIC provider for a VF and bandwidth together (claimer.ts),
  // as in a cloud without Neutron's placement plugin: the NIC providers report bandwidth.
  writeFileSync(
    file,
    `[DEFAULT]\nhost = ${name}\ncompute_driver = fake\nstate_path = ${join(hostDir, 'state')}\n` +
      `[network]\nreport_bandwidth_inventory = true\n` +
      `[placement]\nendpoint_override = ${placementUrl}\n[metrics]\nlisten =\n` +
      `[fake]\nhost_file = ${hostFile}\ninstances_file = ${join(hostDir, 'state', 'fake-instances.json')}\n`,
    { mode: 0o600 },
  );
  return { file, hostFile };
}

export class HostGroup {
  private audits = 0;
  private auditFailures = 0;

  private constructor(
    private readonly opts: HostGroupOptions,
    private readonly hosts: readonly FleetHost[],
  ) {}

  /** Builds every host (files, driver, tracker); talks to Placement only from `firstSync` on. */
  static async create(opts: HostGroupOptions): Promise<HostGroup> {
    const hosts: FleetHost[] = [];
    let group: HostGroup | undefined;
    const logger = silentLogger();
    for (let i = opts.first; i < opts.first + opts.count; i++) {
      const name = `${opts.prefix}-${String(i).padStart(4, '0')}`;
      const { file, hostFile } = writeHostFiles(opts.dir, name, opts.placementUrl);
      const config = loadConfig({ files: [file], env: {} }).config;
      const counter = new RequestCounter();
      const api = placementFromConfig(config, counter);
      const driver = createDriver({ config, logger });
      await driver.init(name);
      const parts = await createTracker(config, api, driver, logger, {
        onAudit: (outcome) => {
          // `group` is set before any audit can run (audits start after create returns).
          if (outcome === 'ok') group?.countAudit(false);
          else group?.countAudit(true);
        },
      });
      hosts.push({ name, hostFile, rootUuid: parts.rootUuid, tracker: parts.tracker, auditor: parts.auditor, counter });
    }
    group = new HostGroup(opts, hosts);
    return group;
  }

  private countAudit(failed: boolean): void {
    this.audits++;
    if (failed) this.auditFailures++;
  }

  get size(): number {
    return this.hosts.length;
  }

  roots(): string[] {
    return this.hosts.map((h) => h.rootUuid);
  }

  /**
   * Every host's first sync at once (a fleet coming up together), each retried like the daemon's
   * start-up until it succeeds or `attempts` run out.
   */
  async firstSync(attempts = 5): Promise<FirstSyncReport> {
    const doneAt: number[] = [];
    const failed: string[] = [];
    let retries = 0;
    await Promise.all(
      this.hosts.map(async (h) => {
        for (let a = 1; ; a++) {
          try {
            await h.tracker.updateFromDriver();
            doneAt.push(Date.now());
            return;
          } catch {
            if (a >= attempts) {
              failed.push(h.name);
              return;
            }
            retries++;
            await new Promise((r) => setTimeout(r, 500 * a));
          }
        }
      }),
    );
    return { doneAt, retries, failed };
  }

  /** Providers per host as the first host's tracker knows them (all hosts are alike). */
  providersPerHost(): number {
    return this.hosts[0]?.tracker.ourProviders().length ?? 0;
  }

  /**
   * Grows the disk of every `every`-th host by 10 % (an operator extends a volume): its next audit
   * writes the root's inventory while claims land on it, so the generation it writes with can be
   * stale. Growth, not shrinkage, so no write can fail for inventory in use.
   * @returns how many hosts changed
   */
  drift(every: number): number {
    let n = 0;
    this.hosts.forEach((h, i) => {
      if (every <= 0 || i % every !== 0) return;
      writeFileSync(h.hostFile, JSON.stringify({ ...FLEET_HOST, disk: { total_gb: Math.round(FLEET_HOST.disk.total_gb * 1.1) } }));
      n++;
    });
    return n;
  }

  /** Starts every host's periodic audit (node-cron, per-host offset), as the daemon does. */
  startAudits(intervalSeconds: number): void {
    for (const h of this.hosts) h.auditor.start(intervalSeconds, h.name);
  }

  /** Stops the schedules and waits for audits in progress. */
  async stopAudits(): Promise<void> {
    for (const h of this.hosts) h.auditor.stop();
    await Promise.all(this.hosts.map((h) => h.auditor.settle()));
  }

  /** Request counts summed over the hosts; `reset` starts a new window. */
  counts(reset = false): CountEntries {
    const sum = new Map<string, number>();
    for (const h of this.hosts) {
      for (const [k, v] of h.counter.snapshot()) sum.set(k, (sum.get(k) ?? 0) + v);
      if (reset) h.counter.reset();
    }
    return [...sum];
  }

  auditStats(reset = false): AuditStats {
    const s = { runs: this.audits, failures: this.auditFailures };
    if (reset) this.audits = this.auditFailures = 0;
    return s;
  }

  async close(): Promise<void> {
    await this.stopAudits();
    rmSync(this.opts.dir, { recursive: true, force: true });
  }
}
