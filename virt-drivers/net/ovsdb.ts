/**
 * The `OvsDb` port: the Open vSwitch database rows VIF plugging writes (a bridge, a port with its
 * interface's external_ids), and the implementation on `ovs-vsctl --db=<ovsdb_connection>` over
 * the `Exec` port, as os-vif's vsctl backend does.
 *
 * Every call passes `--timeout`, so an absent ovs-vswitchd (ovs-vsctl waits for it to apply a
 * change) fails after `[os_vif_ovs] ovsdb_timeout` instead of hanging. Values are written as
 * OVSDB quoted strings, so a MAC's colons are never parsed as syntax.
 *
 * It is: three idempotent operations. It is not: a general OVSDB client.
 */
import type { Exec } from '../host/exec';

/** The OVSDB writes of plugging. Methods throw the `Exec` errors. */
export interface OvsDb {
  /** The bridge exists with `datapathType` (`--may-exist add-br` + set). */
  ensureBridge(bridge: string, datapathType: string): Promise<void>;
  /** The port is on `bridge` and its interface carries `externalIds`, in one transaction. */
  addPort(bridge: string, port: string, externalIds: Readonly<Record<string, string>>): Promise<void>;
  /** The port is on no bridge (`--if-exists del-port`). */
  deletePort(port: string): Promise<void>;
}

/** An OVSDB string literal (JSON's quoting is OVSDB's). */
function quoted(v: string): string {
  return JSON.stringify(v);
}

/** `OvsDb` on `ovs-vsctl`. */
export class VsctlOvsDb implements OvsDb {
  constructor(
    private readonly exec: Exec,
    private readonly opts: { readonly vsctl: string; readonly connection: string; readonly timeoutSec: number },
  ) {}

  private vsctl(args: readonly string[]): Promise<unknown> {
    const { vsctl, connection, timeoutSec } = this.opts;
    // ovs-vsctl enforces its own --timeout; the Exec deadline is a backstop a little later.
    return this.exec.run(vsctl, [`--db=${connection}`, `--timeout=${timeoutSec}`, ...args], { timeoutMs: (timeoutSec + 5) * 1000 });
  }

  async ensureBridge(bridge: string, datapathType: string): Promise<void> {
    await this.vsctl(['--', '--may-exist', 'add-br', bridge, '--', 'set', 'Bridge', bridge, `datapath_type=${datapathType}`]);
  }

  async addPort(bridge: string, port: string, externalIds: Readonly<Record<string, string>>): Promise<void> {
    const ids = Object.entries(externalIds).map(([k, v]) => `external_ids:${k}=${quoted(v)}`);
    await this.vsctl(['--', '--may-exist', 'add-port', bridge, port, '--', 'set', 'Interface', port, ...ids]);
  }

  async deletePort(port: string): Promise<void> {
    await this.vsctl(['--', '--if-exists', 'del-port', port]);
  }
}
