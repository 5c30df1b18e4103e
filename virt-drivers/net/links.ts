/**
 * The `HostLinks` port: the Linux network devices VIF plugging creates (persistent kernel taps,
 * Linux bridges, veth pairs), in the agent's network namespace or a named one, through `ip`
 * (iproute2) on the `Exec` port.
 *
 * A named namespace (`[qemu] network_namespace`) is where a simulated compute host's devices, its
 * Open vSwitch and its QEMU processes live when several hosts share one machine; every command
 * then runs as `ip -n <ns> ...`, which enters the namespace for that one command.
 *
 * It is: mechanism, one method per device operation. It is not: the decision which devices a
 * VIF needs (`plugger.ts`), nor Open vSwitch (`ovsdb.ts`).
 */
import { CommandFailedError, type Exec } from '../host/exec';

/** The Linux devices plugging touches. Methods throw the `Exec` errors. */
export interface HostLinks {
  /** Whether a device of that name exists. */
  exists(name: string): Promise<boolean>;
  /** Creates a persistent kernel tap (nobody holds it until QEMU opens it by name). */
  addTap(name: string): Promise<void>;
  /** Creates a Linux bridge without STP and forward delay (os-vif's qbr). */
  addBridge(name: string): Promise<void>;
  /** Creates a veth pair `a` <-> `b`. */
  addVethPair(a: string, b: string): Promise<void>;
  /** Sets the device up, with the MTU and the bridge (master) when given. */
  setUp(name: string, opts?: { readonly mtu?: number; readonly master?: string }): Promise<void>;
  /** Deletes the device when it exists (a veth takes its peer with it). */
  remove(name: string): Promise<void>;
}

/** `HostLinks` on iproute2's `ip`, in `netns` when given. */
export class IpLinks implements HostLinks {
  constructor(
    private readonly exec: Exec,
    private readonly opts: { readonly netns?: string; readonly timeoutMs: number; readonly ip?: string },
  ) {}

  private ip(args: readonly string[]): Promise<unknown> {
    const ns = this.opts.netns ? ['-n', this.opts.netns] : [];
    return this.exec.run(this.opts.ip ?? 'ip', [...ns, ...args], { timeoutMs: this.opts.timeoutMs });
  }

  async exists(name: string): Promise<boolean> {
    try {
      await this.ip(['link', 'show', 'dev', name]);
      return true;
    } catch (e) {
      // `Device "x" does not exist.`; anything else (a missing namespace) is a real failure.
      if (e instanceof CommandFailedError && /does not exist/.test(e.stderr)) return false;
      throw e;
    }
  }

  async addTap(name: string): Promise<void> {
    await this.ip(['tuntap', 'add', 'dev', name, 'mode', 'tap']);
  }

  async addBridge(name: string): Promise<void> {
    await this.ip(['link', 'add', 'name', name, 'type', 'bridge', 'forward_delay', '0', 'stp_state', '0']);
  }

  async addVethPair(a: string, b: string): Promise<void> {
    await this.ip(['link', 'add', 'dev', a, 'type', 'veth', 'peer', 'name', b]);
  }

  async setUp(name: string, opts: { readonly mtu?: number; readonly master?: string } = {}): Promise<void> {
    const mtu = opts.mtu === undefined ? [] : ['mtu', String(opts.mtu)];
    const master = opts.master === undefined ? [] : ['master', opts.master];
    await this.ip(['link', 'set', 'dev', name, ...mtu, ...master, 'up']);
  }

  async remove(name: string): Promise<void> {
    if (await this.exists(name)) await this.ip(['link', 'del', 'dev', name]);
  }
}
