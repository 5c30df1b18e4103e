/**
 * A private network for booting guests on, made of network namespaces this test creates: a "net"
 * namespace holding a Linux bridge with one tap per guest (QEMU runs in that namespace to open its
 * tap), and a "dhcp" namespace joined to the bridge by a veth pair, where busybox's udhcpd hands
 * out fixed addresses by MAC, the MTU option and the NTP servers option (the addresses the net
 * guest pings), and from where the guests are pinged. A small python3 listener there records which
 * options each DHCP request asked for (option 55): udhcpd sends every option it has whether asked
 * or not, where other servers (dnsmasq) send only what was asked. Peers (`addPeer`) are more
 * namespaces on the bridge, each with one address that answers ping, which a test can take away
 * and give back.
 *
 *     dhcp ns: veth-d 10.77.0.1/24, udhcpd ──veth── net ns: br0 ── tap0 ── QEMU (guest)
 *                                                               ├─ tap1 ── …
 *     peer ns: veth-p <address>/24 ─────────────veth────────────┘  (one namespace per peer)
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
  /** The addresses udhcpd announces as NTP servers (option 42); none when empty or absent. */
  readonly ntpServers?: readonly string[];
}

/** A namespace on the lab's bridge with one address (prefix /24) whose kernel answers ping. */
export interface LabPeer {
  readonly ns: string;
  readonly ip: string;
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

/**
 * The DHCP request listener: reads every IPv4 frame arriving on the interface (argv[1]) and writes
 * one JSON line per BOOTP request to port 67 to the file (argv[2]): the client's MAC, the message
 * type (option 53: 1 discover, 3 request) and the options it asked for (option 55).
 */
const DHCP_LISTENER = `
import json, socket, struct, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind((sys.argv[1], 0))
out = open(sys.argv[2], 'a', buffering=1)
print('listening', flush=True)
while True:
    ip = s.recv(65535)[14:]
    if len(ip) < 20 or ip[9] != 17:
        continue
    udp = ip[(ip[0] & 15) * 4:]
    if len(udp) < 8 or struct.unpack('!H', udp[2:4])[0] != 67:
        continue
    d = udp[8:]
    if len(d) < 240 or d[236:240] != bytes([99, 130, 83, 99]):
        continue
    opts, i = {}, 240
    while i + 1 < len(d) and d[i] != 255:
        if d[i] == 0:
            i += 1
            continue
        opts[d[i]] = d[i + 2:i + 2 + d[i + 1]]
        i += 2 + d[i + 1]
    mac = ':'.join('%02x' % b for b in d[28:34])
    out.write(json.dumps({'mac': mac, 'type': opts.get(53, b'\\0')[0], 'requested': list(opts.get(55, b''))}) + '\\n')
`;

/** One DHCP request a guest sent, as the lab's listener saw it. */
export interface DhcpRequest {
  readonly mac: string;
  /** Option 53: 1 discover, 3 request. */
  readonly type: number;
  /** The option codes of its parameter request list (option 55), in its order. */
  readonly requested: readonly number[];
}

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
    const m = /^(ngt(\d+)-\d+-(?:net|dhcp|peer\d+))\b/.exec(line);
    if (m && !alive(Number(m[2])) && nsPids(m[1] as string).length === 0) spawnSync('ip', ['netns', 'del', m[1] as string]);
  }
}

export class NetLab {
  readonly dir = mkdtempSync(join(tmpdir(), 'net-lab-'));
  readonly netNs: string;
  readonly dhcpNs: string;
  /** The guests booted so far, in order. */
  readonly guests: LabGuest[] = [];
  /** The peers added so far, in order. */
  readonly peers: LabPeer[] = [];
  private readonly id: string;
  private readonly procs: ChildProcess[] = [];
  private taps = 0;
  private created = false;

  constructor(private readonly opts: LabOptions) {
    this.id = `ngt${process.pid}-${labs++}`;
    this.netNs = `${this.id}-net`;
    this.dhcpNs = `${this.id}-dhcp`;
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
        ...(this.opts.ntpServers?.length ? [`opt ntpsrv ${this.opts.ntpServers.join(' ')}`] : []),
        'opt lease 3600',
        '',
      ].join('\n'),
    );
    writeFileSync(join(this.dir, 'dhcp-requests.jsonl'), '');
    const listenerLog = join(this.dir, 'dhcp-listener.log');
    this.spawnIn(d, ['python3', '-c', DHCP_LISTENER, 'veth-d', join(this.dir, 'dhcp-requests.jsonl')], listenerLog);
    await waitForText(listenerLog, 'listening', 'the DHCP request listener');
    const log = join(this.dir, 'udhcpd.log');
    this.spawnIn(d, ['busybox', 'udhcpd', '-f', conf], log);
    await waitForText(log, 'started', 'udhcpd');
  }

  /** The DHCP requests the guests sent so far, in order. */
  dhcpRequests(): DhcpRequest[] {
    return readOr(join(this.dir, 'dhcp-requests.jsonl'))
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as DhcpRequest);
  }

  /** Adds a peer: a namespace joined to the bridge by a veth pair, holding `addr`/24, up. */
  addPeer(addr: string): LabPeer {
    const n = this.peers.length;
    const peer = { ns: `${this.id}-peer${n}`, ip: addr };
    ip('netns', 'add', peer.ns);
    this.peers.push(peer);
    ip('-n', this.netNs, 'link', 'add', `veth-p${n}`, 'type', 'veth', 'peer', 'name', 'veth-p', 'netns', peer.ns);
    ip('-n', this.netNs, 'link', 'set', `veth-p${n}`, 'master', 'br0', 'up');
    ip('-n', peer.ns, 'link', 'set', 'lo', 'up');
    this.setPeerAddress(peer, true);
    ip('-n', peer.ns, 'link', 'set', 'veth-p', 'up');
    return peer;
  }

  /** Gives the peer its address (`present`) or takes it away: from then on nothing answers there. */
  setPeerAddress(peer: LabPeer, present: boolean): void {
    ip('-n', peer.ns, 'addr', present ? 'add' : 'del', `${peer.ip}/24`, 'dev', 'veth-p');
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

  /**
   * Waits until the guest's console text satisfies `done`; the console then and the seconds waited.
   * @throws Error naming `what`, with the console, after `ms`
   */
  async waitForConsole(guest: LabGuest, what: string, done: (console: string) => boolean, ms: number): Promise<{ console: string; seconds: number }> {
    const started = Date.now();
    for (;;) {
      const text = readOr(guest.console);
      if (done(text)) return { console: text, seconds: (Date.now() - started) / 1000 };
      if (Date.now() - started > ms) throw new Error(`${guest.name}: no ${what} within ${ms} ms; console:\n${text}`);
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
      for (const ns of [this.netNs, this.dhcpNs, ...this.peers.map((p) => p.ns)]) {
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

/** Waits up to 10 s for `text` in the log file of a process the lab started. */
async function waitForText(log: string, text: string, what: string): Promise<void> {
  const deadline = Date.now() + 10000;
  while (!readOr(log).includes(text)) {
    if (Date.now() > deadline) throw new Error(`${what} did not start: ${readOr(log)}`);
    await new Promise((r) => setTimeout(r, 100));
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
