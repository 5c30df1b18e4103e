/**
 * A private Open vSwitch for integration tests: a network namespace the test owns, and in it an
 * ovsdb-server (fresh database from `ovsdb-tool create`) and an ovs-vswitchd, started directly
 * with pidfiles, logs, control sockets and run directory in a temp directory, never through
 * ovs-ctl (which modprobes the openvswitch kernel module this machine lacks) and never touching
 * the system's /run/openvswitch. Bridges must use `datapath_type=netdev` (userspace datapath).
 *
 * `stop()` kills exactly the two daemons it started (by their pidfiles) and deletes the namespace;
 * it never throws, so an `afterAll` can always call it.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema';

/** Whether the OVS daemons and tools are installed and we are root (namespaces need it). */
export const HAVE_OVS = ['/usr/sbin/ovsdb-server', '/usr/sbin/ovs-vswitchd', '/usr/bin/ovs-vsctl', '/usr/bin/ovsdb-tool', SCHEMA].every((p) => existsSync(p)) && process.getuid?.() === 0;

export class PrivateOvs {
  readonly dir = mkdtempSync(join(tmpdir(), 'ovs-'));
  /** The OVSDB remote to give `[os_vif_ovs] ovsdb_connection`. */
  readonly db = `unix:${join(this.dir, 'db.sock')}`;
  private readonly env = { ...process.env, OVS_RUNDIR: this.dir, OVS_LOGDIR: this.dir, OVS_DBDIR: this.dir };

  private constructor(readonly netns: string) {}

  /** Creates the namespace and starts both daemons; on failure, undoes what it did and throws. */
  static start(netns = `ovsit-${process.pid}`): PrivateOvs {
    const ovs = new PrivateOvs(netns);
    try {
      execFileSync('ip', ['netns', 'add', netns]);
      execFileSync('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
      const d = ovs.dir;
      execFileSync('ovsdb-tool', ['create', join(d, 'conf.db'), SCHEMA]);
      ovs.inNs('ovsdb-server', [join(d, 'conf.db'), `--remote=punix:${join(d, 'db.sock')}`, `--pidfile=${join(d, 'ovsdb-server.pid')}`, `--unixctl=${join(d, 'ovsdb-server.ctl')}`, `--log-file=${join(d, 'ovsdb-server.log')}`, '--detach']);
      ovs.vsctl(['--no-wait', 'init']);
      ovs.inNs('ovs-vswitchd', [ovs.db, `--pidfile=${join(d, 'ovs-vswitchd.pid')}`, `--unixctl=${join(d, 'ovs-vswitchd.ctl')}`, `--log-file=${join(d, 'ovs-vswitchd.log')}`, '--detach']);
      return ovs;
    } catch (e) {
      ovs.stop();
      throw e;
    }
  }

  private inNs(file: string, args: readonly string[]): string {
    return execFileSync('ip', ['netns', 'exec', this.netns, file, ...args], { env: this.env, encoding: 'utf8', timeout: 30_000 });
  }

  /** Runs ovs-vsctl against this OVS; its stdout, trimmed. */
  vsctl(args: readonly string[]): string {
    return execFileSync('ovs-vsctl', [`--db=${this.db}`, '--timeout=20', ...args], { env: this.env, encoding: 'utf8', timeout: 30_000 }).trim();
  }

  /** `ip -j -n <ns> link show dev <name>`, parsed; undefined when the device does not exist. */
  link(name: string): { ifname: string; mtu: number; flags: string[]; master?: string } | undefined {
    try {
      const out = execFileSync('ip', ['-j', '-n', this.netns, 'link', 'show', 'dev', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      return (JSON.parse(out) as Array<{ ifname: string; mtu: number; flags: string[]; master?: string }>)[0];
    } catch {
      return undefined;
    }
  }

  /** An Interface's external_ids as a map (empty when there is no such interface). */
  externalIds(iface: string): Record<string, string> {
    let raw: string;
    try {
      raw = this.vsctl(['get', 'Interface', iface, 'external_ids']);
    } catch {
      return {};
    }
    const out: Record<string, string> = {};
    for (const m of raw.matchAll(/([\w-]+)=("(?:[^"\\]|\\.)*"|[^,}\s]+)/g)) out[m[1] as string] = (m[2] as string).replace(/^"|"$/g, '');
    return out;
  }

  /** Kills the daemons it started, removes the namespace and the directory. Never throws. */
  stop(): void {
    for (const name of ['ovs-vswitchd', 'ovsdb-server']) {
      try {
        const pid = Number(readFileSync(join(this.dir, `${name}.pid`), 'utf8').trim());
        if (pid > 0) process.kill(pid, 'SIGTERM');
      } catch {
        /* not started or gone */
      }
    }
    try {
      execFileSync('ip', ['netns', 'del', this.netns], { stdio: 'ignore' });
    } catch {
      /* not created */
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
