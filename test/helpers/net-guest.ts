/**
 * The net guest (`scripts/net-guest`) seen from a test: whether this machine can build and boot
 * it, its build (files and how long it took), and the lease and ping lines it prints on its serial
 * console.
 *
 * It is: prerequisites, a build call, a parser. It is not: the image recipe (that is the script,
 * see docs/net-guest.md) nor the network a guest boots on (`net-lab.ts`).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const REPO = join(__dirname, '..', '..');
export const NET_GUEST_SCRIPT = join(REPO, 'scripts', 'net-guest');

/** Why the net guest cannot be built and booted on a network of namespaces here; undefined when it can. */
export function netGuestUnavailableReason(): string | undefined {
  if (process.platform !== 'linux') return 'the net guest needs Linux';
  if (process.getuid?.() !== 0) return 'network namespaces, taps and the package installs need root';
  const missing = ['qemu-system-x86_64', 'qemu-img', 'ip', 'apt-get', 'dpkg-deb', 'python3'].filter(
    (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0,
  );
  if (missing.length > 0) return `missing ${missing.join(', ')} (.ci/run installs qemu-system-x86 and qemu-utils)`;
  return undefined;
}

/** The built guest: a bootable qcow2 disk, and the kernel and initramfs inside it for a direct boot. */
export interface NetGuestFiles {
  readonly image: string;
  readonly kernel: string;
  readonly initrd: string;
  /** The kernel command line the disk's syslinux passes (for `-append`). */
  readonly cmdline: string;
  /** What the script said (cache hit or build time). */
  readonly progress: string;
  readonly seconds: number;
}

/**
 * Builds the guest (or finds it cached) with `scripts/net-guest build`; with NET_GUEST_DIR set,
 * takes the files a build put there instead (a guest built elsewhere, e.g. on the other Debian
 * release). @throws Error with the script's output
 */
export function buildNetGuest(timeoutMs = 10 * 60 * 1000): NetGuestFiles {
  const given = process.env.NET_GUEST_DIR;
  if (given) return filesIn(join(given, 'net-guest.qcow2'), `given by NET_GUEST_DIR=${given}`, 0);
  const started = Date.now();
  const r = spawnSync('bash', [NET_GUEST_SCRIPT, 'build'], { encoding: 'utf8', timeout: timeoutMs });
  const seconds = (Date.now() - started) / 1000;
  const image = r.stdout.trim().split('\n').at(-1) ?? '';
  if (r.status !== 0 || !image.endsWith('.qcow2')) {
    throw new Error(`scripts/net-guest build failed (status ${String(r.status)}${r.signal ? `, ${r.signal}` : ''}):\n${r.stderr}${r.stdout}`);
  }
  return filesIn(image, r.stderr, seconds);
}

function filesIn(image: string, progress: string, seconds: number): NetGuestFiles {
  const dir = dirname(image);
  const cmdline = readFileSync(join(dir, 'cmdline'), 'utf8').trim();
  return { image, kernel: join(dir, 'vmlinuz'), initrd: join(dir, 'initrd.gz'), cmdline, progress, seconds };
}

/** One `net-guest: lease …` line. */
export interface Lease {
  readonly ip: string;
  readonly prefix: number;
  /** `none` when the server sent no router. */
  readonly router: string;
  readonly mtu: number;
  readonly mac: string;
}

const LEASE = /^net-guest: lease (\d+\.\d+\.\d+\.\d+)\/(\d+) router (\S+) mtu (\d+) mac ([0-9a-f:]{17})\r?$/;

/** Every lease line of a serial log, in order. */
export function leases(serialLog: string): Lease[] {
  const out: Lease[] = [];
  for (const line of serialLog.split('\n')) {
    const m = LEASE.exec(line);
    if (m) out.push({ ip: m[1] as string, prefix: Number(m[2]), router: m[3] as string, mtu: Number(m[4]), mac: m[5] as string });
  }
  return out;
}

/** One `net-guest: ping <ip> ok|lost` line: an address the guest was told to ping changed outcome. */
export interface PingChange {
  /** One of the lease's NTP servers (DHCP option 42), the addresses the guest pings every 2 s. */
  readonly ip: string;
  /** `ok`: it answers, and did not before; `lost`: it stopped answering after having answered. */
  readonly state: 'ok' | 'lost';
}

/**
 * `^net-guest: ping (\d+\.\d+\.\d+\.\d+) (ok|lost)$`, with an optional `\r` before the line's
 * end as on any console line. The guest prints one only on a change of outcome, never per echo.
 */
const PING = /^net-guest: ping (\d+\.\d+\.\d+\.\d+) (ok|lost)\r?$/;

/** Every ping line of a serial log, in order. */
export function pings(consoleText: string): PingChange[] {
  const out: PingChange[] = [];
  for (const line of consoleText.split('\n')) {
    const m = PING.exec(line);
    if (m) out.push({ ip: m[1] as string, state: m[2] as 'ok' | 'lost' });
  }
  return out;
}

/** The guest's uptime (s) when its /init started, from the `net-guest: init <kernel> up <s>s` line. */
export function initUptime(serialLog: string): number | undefined {
  const m = /^net-guest: init \S+ up ([\d.]+)s\r?$/m.exec(serialLog);
  return m ? Number(m[1]) : undefined;
}

/** One `net-guest: disk …` line: a virtio disk came, changed size, had its data block read or written, or went. */
export type DiskEvent =
  | { readonly disk: string; readonly kind: 'seen'; readonly serial: string; readonly bytes: number }
  | { readonly disk: string; readonly kind: 'size'; readonly bytes: number }
  | { readonly disk: string; readonly kind: 'read' | 'wrote'; readonly token: string }
  | { readonly disk: string; readonly kind: 'gone' | 'small' | 'write failed' }
  /** Every tenth sequence number written, each read back from the disk before the next. */
  | { readonly disk: string; readonly kind: 'seq'; readonly seq: number }
  /** The disk did not hold the number the guest wrote the second before. */
  | { readonly disk: string; readonly kind: 'seq lost'; readonly wrote: number; readonly read: number };

const DISK =
  /^net-guest: disk (vd[a-z]+) (?:serial (\S+) size (\d+)|size (\d+)|(read|wrote) (\S+)|(gone|write failed)|has no data block \(too small\)|seq (\d+)|seq lost: wrote (\d+) read (\d+))\r?$/;

/**
 * Every disk line of a serial log, in order (docs/net-guest.md, "Disks"). `serial` is what virtio
 * shows: a volume id cut to 20 characters, or `none`.
 */
export function diskEvents(consoleText: string): DiskEvent[] {
  const out: DiskEvent[] = [];
  for (const line of consoleText.split('\n')) {
    const m = DISK.exec(line);
    if (!m) continue;
    const disk = m[1] as string;
    if (m[2] !== undefined) out.push({ disk, kind: 'seen', serial: m[2], bytes: Number(m[3]) });
    else if (m[4] !== undefined) out.push({ disk, kind: 'size', bytes: Number(m[4]) });
    else if (m[5] !== undefined) out.push({ disk, kind: m[5] as 'read' | 'wrote', token: m[6] as string });
    else if (m[7] !== undefined) out.push({ disk, kind: m[7] as 'gone' | 'write failed' });
    else if (m[8] !== undefined) out.push({ disk, kind: 'seq', seq: Number(m[8]) });
    else if (m[9] !== undefined) out.push({ disk, kind: 'seq lost', wrote: Number(m[9]), read: Number(m[10]) });
    else out.push({ disk, kind: 'small' });
  }
  return out;
}
