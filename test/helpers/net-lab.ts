/**
 * A private network for booting guests on, made of network namespaces this test creates: a "net"
 * namespace holding a Linux bridge with one tap per guest (QEMU runs in that namespace to open its
 * tap), and a "dhcp" namespace joined to the bridge by a veth pair, where busybox's udhcpd hands
 * out fixed addresses by MAC and the MTU option, and from where the guests are pinged.
 *
 *     dhcp ns: veth-d 10.77.0.1/24, udhcpd ──veth── net ns: br0 ── tap0 ── QEMU (guest)
 *                                                               └─ tap1 ── …
 *
 * Nothing leaves these namespaces: no address of the machine's own network is used. `cleanup`
 * kills every process the lab started (by pid, then whatever is left inside its namespaces) and
 * deletes the namespaces with their interfaces; it is safe to call twice and after a failure.
 *
 * It is: the lab, and QEMU started with the qemu driver's own command line (`qemuCommandLine`)
 * plus a NIC. It is not: the guest image (`net-guest.ts`) nor the qemu driver itself.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { qemuCommandLine } from '../../virt-drivers/qemu/cmdline';
import { instancePaths } from '../../virt-drivers/qemu/instance-files';
import { QmpClient } from '../../virt-drivers/qemu/qmp';
import { type Lease, leases } from './net-guest';

/** The lab's subnet: private, and only ever inside the lab's namespaces. */
export const LAB_PREFIX = '10.77.0';
export const LAB_GATEWAY = `${LAB_PREFIX}.1`;

export interface LabOptions {
  /** The MTU udhcpd announces (option 26). */
  readonly mtu: number;
  /** Fixed addresses by MAC (lower-case, colon-separated). */
  readonly staticLeases: readonly { readonly mac: string; readonly ip: string }[];
}

/** How a guest boots: from its disk image like the qemu driver does, or directly from the kernel. */
export type GuestBoot =
  | { readonly kind: 'disk'; readonly image: string }
  | { readonly kind: 'kernel'; readonly kernel: string; readonly initrd: string; readonly cmdline: string };

export interface LabGuest {
  readonly name: string;
  readonly console: string;
  readonly qmp: string;
  readonly startedAt: number;
  readonly process: ChildProcess;
}

let labs = 0;

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function nsPids(ns: string): number[] {
  const r = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.split(/\s+/).filter(Boolean).map(Number) : [];
}

/**
 * Deletes the namespaces an earlier run of this helper left behind when its process was killed
 * (named after a pid that is gone), where nothing runs inside any more.
 */
function sweepStale(): void {
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  for (const line of r.stdout?.split('\n') ?? []) {
    const m = /^(ngt(\d+)-\d+-(?:net|dhcp))\b/.exec(line);
    if (m && !alive(Number(m[2])) && nsPids(m[1] as string).length === 0) spawnSync('ip', ['netns', 'del', m[1] as string]);
  }
}

export class NetLab {
  readonly dir = mkdtempSync(join(tmpdir(), 'net-lab-'));
  readonly netNs: string;
  readonly dhcpNs: string;
  /** The guests booted so far, in order. */
  readonly guests: LabGuest[] = [];
  private readonly procs: ChildProcess[] = [];
  private taps = 0;
  private created = false;

  constructor(private readonly opts: LabOptions) {
    const id = `ngt${process.pid}-${labs++}`;
    this.netNs = `${id}-net`;
    this.dhcpNs = `${id}-dhcp`;
  }

  /** Creates the namespaces, the bridge and the veth, and starts udhcpd. */
  async start(): Promise<void> {
    sweepStale();
    this.created = true;
    const n = this.netNs;
    const d = this.dhcpNs;
    ip('netns', 'add', n);
    ip('netns', 'add', d);
    ip('-n', n, 'link', 'add', 'br0', 'type', 'bridge');
    ip('-n', n, 'link', 'set', 'br0', 'up');
    ip('-n', n, 'link', 'add', 'veth-n', 'type', 'veth', 'peer', 'name', 'veth-d', 'netns', d);
    ip('-n', n, 'link', 'set', 'veth-n', 'master', 'br0', 'up');
    ip('-n', d, 'link', 'set', 'lo', 'up');
    ip('-n', d, 'addr', 'add', `${LAB_GATEWAY}/24`, 'dev', 'veth-d');
    ip('-n', d, 'link', 'set', 'veth-d', 'up');
    const conf = join(this.dir, 'udhcpd.conf');
    const leaseFile = join(this.dir, 'udhcpd.leases');
    writeFileSync(leaseFile, '');
    writeFileSync(
      conf,
      [
        'interface veth-d',
        `start ${LAB_PREFIX}.100`,
        `end ${LAB_PREFIX}.200`,
        `lease_file ${leaseFile}`,
        `pidfile ${join(this.dir, 'udhcpd.pid')}`,
        ...this.opts.staticLeases.map((l) => `static_lease ${l.mac} ${l.ip}`),
        'opt subnet 255.255.255.0',
        `opt router ${LAB_GATEWAY}`,
        `opt mtu ${this.opts.mtu}`,
        'opt lease 3600',
        '',
      ].join('\n'),
    );
    const log = join(this.dir, 'udhcpd.log');
    this.spawnIn(d, ['busybox', 'udhcpd', '-f', conf], log);
    const deadline = Date.now() + 10000;
    while (!readFileSync(log, 'utf8').includes('started')) {
      if (Date.now() > deadline) throw new Error(`udhcpd did not start: ${readFileSync(log, 'utf8')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** udhcpd's log so far. */
  dhcpLog(): string {
    return readFileSync(join(this.dir, 'udhcpd.log'), 'utf8');
  }

  /**
   * Boots a guest on a new tap of the bridge, with the qemu driver's command line (TCG, `-cpu
   * max`, 128 MiB, q35, COM1 to a file, the sandbox on) plus a virtio-net NIC with `mac`.
   */
  bootGuest(name: string, mac: string, boot: GuestBoot): LabGuest {
    const tap = `tap${this.taps++}`;
    ip('-n', this.netNs, 'tuntap', 'add', 'dev', tap, 'mode', 'tap');
    ip('-n', this.netNs, 'link', 'set', tap, 'master', 'br0', 'up');
    const dir = join(this.dir, name);
    mkdirSync(dir);
    const paths = instancePaths(dir);
    if (boot.kind === 'disk') {
      // As the driver makes an instance disk: a qcow2 overlay on the image, which stays untouched.
      execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', boot.image, '-F', 'qcow2', paths.disk]);
    }
    const args = qemuCommandLine({
      uuid: randomUUID(),
      name,
      def: { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 1, memoryMb: 128, disk: boot.kind === 'disk' },
      paths,
      sandbox: true,
    });
    if (boot.kind === 'kernel') args.push('-kernel', boot.kernel, '-initrd', boot.initrd, '-append', boot.cmdline);
    args.push(
      '-netdev',
      `tap,id=n0,ifname=${tap},script=no,downscript=no,vnet_hdr=off`,
      '-device',
      `virtio-net-pci,netdev=n0,mac=${mac}`,
    );
    const startedAt = Date.now();
    const child = this.spawnIn(this.netNs, ['qemu-system-x86_64', ...args], paths.log);
    const guest = { name, console: paths.console, qmp: paths.qmp, startedAt, process: child };
    this.guests.push(guest);
    return guest;
  }

  /** Waits for the guest's first lease line; the seconds are from QEMU's start. */
  async waitForLease(guest: LabGuest, ms: number): Promise<{ lease: Lease; seconds: number; console: string }> {
    const deadline = Date.now() + ms;
    for (;;) {
      const text = readOr(guest.console);
      const first = leases(text)[0];
      if (first) return { lease: first, seconds: (Date.now() - guest.startedAt) / 1000, console: text };
      if (guest.process.exitCode !== null || guest.process.signalCode !== null) {
        throw new Error(`${guest.name}: QEMU ended before a lease:\n${readOr(join(this.dir, guest.name, 'qemu.log'))}\n${text}`);
      }
      if (Date.now() > deadline) throw new Error(`${guest.name}: no lease line within ${ms} ms; console:\n${text}\nudhcpd:\n${this.dhcpLog()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** What the guest printed on its serial console so far. */
  consoleOf(guest: LabGuest): string {
    return readOr(guest.console);
  }

  /**
   * Presses the guest's ACPI power button over QMP (`system_powerdown`, what the driver's powerOff
   * does) and waits for QEMU to exit; its exit code, or undefined when it still ran after `ms`.
   */
  async powerDown(guest: LabGuest, ms: number): Promise<{ code: number | null | undefined; seconds: number }> {
    const started = Date.now();
    const exited = new Promise<number | null>((resolve) => {
      if (guest.process.exitCode !== null || guest.process.signalCode !== null) resolve(guest.process.exitCode);
      else guest.process.once('exit', (code) => resolve(code));
    });
    const qmp = await QmpClient.connect(guest.qmp, { timeoutMs: 10000 });
    try {
      await qmp.execute('system_powerdown');
    } finally {
      qmp.close();
    }
    const code = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms).unref())]);
    return { code, seconds: (Date.now() - started) / 1000 };
  }

  /** Pings `addr` from the DHCP namespace; the number of replies and ping's output. */
  ping(addr: string, count = 3): { received: number; output: string } {
    const r = spawnSync('ip', ['netns', 'exec', this.dhcpNs, 'busybox', 'ping', '-c', String(count), '-W', '2', addr], {
      encoding: 'utf8',
      timeout: (count + 5) * 1000,
    });
    const output = `${r.stdout ?? ''}${r.stderr ?? ''}`;
    const m = /(\d+) packets received/.exec(output);
    return { received: m ? Number(m[1]) : 0, output };
  }

  /**
   * Kills what the lab started and deletes its namespaces (and so its bridge, taps and veth); its
   * files (consoles, QEMU and udhcpd logs) too, unless `keepFiles` (a failed test's evidence).
   */
  async cleanup(keepFiles = false): Promise<void> {
    await Promise.all(this.procs.map((p) => stop(p)));
    if (this.created) {
      for (const ns of [this.netNs, this.dhcpNs]) {
        // Anything still inside was started by this lab (children of its processes).
        for (const pid of nsPids(ns)) process.kill(pid, 'SIGKILL');
        spawnSync('ip', ['netns', 'del', ns]);
      }
      this.created = false;
    }
    if (!keepFiles) rmSync(this.dir, { recursive: true, force: true });
  }

  private spawnIn(ns: string, argv: string[], logPath: string): ChildProcess {
    const fd = openSync(logPath, 'a');
    try {
      // `ip netns exec` execs the command: the child's pid is the command's.
      const child = spawn('ip', ['netns', 'exec', ns, ...argv], { stdio: ['ignore', fd, fd] });
      this.procs.push(child);
      return child;
    } finally {
      closeSync(fd);
    }
  }
}

function readOr(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function stop(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    p.once('exit', () => resolve());
    p.kill('SIGKILL');
  });
}
