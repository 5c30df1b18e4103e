/**
 * The volumes bench's guest side: whether this machine can run the scenario, the net guest's image
 * (`scripts/net-guest build`, the cached build, or NET_GUEST_DIR's), the `disk` lines its disk loop
 * prints on the serial console (docs/net-guest.md, "Disks"), read from a mark on so that a volume
 * attached again is not mistaken for its earlier self, and a QEMU process's memory from /proc.
 *
 * The bench reads these itself because product code (bench/ included) imports nothing from test/
 * (.dependency-cruiser.js, product-imports-no-test); the integration tests' helpers do the same
 * for them. It is not: the image recipe (the script) nor the driver (`volumes-host.ts`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from './volumes-ceph';
import { statusMbs } from './proc';

const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;

/** Why the scenario cannot run here; undefined when it can. Builds nothing. */
export function volumesUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'needs Linux';
  if (process.getuid?.() !== 0) return 'needs root (the 2025.1 root, the net guest build)';
  const missing = ['qemu-system-x86_64', 'qemu-img', 'python3'].filter((t) => !has(t));
  if (missing.length) return `missing ${missing.join(', ')}`;
  // Never build the 2025.1 root from here (tens of minutes): say how instead.
  const status = spawnSync('bash', [join(REPO, 'scripts', 'release-root'), 'status'], { encoding: 'utf8' });
  if (!/^2025\.1 (native|cached) /m.test(status.stdout ?? '')) return 'the 2025.1 root is not built (scripts/release-root path 2025.1)';
  return undefined;
}

/** The net guest's qcow2, built or taken from the cache (NET_GUEST_DIR: a build made elsewhere). @throws Error with the script's output */
export function netGuestImage(): string {
  const given = process.env.NET_GUEST_DIR;
  if (given) return join(given, 'net-guest.qcow2');
  const r = spawnSync('bash', [join(REPO, 'scripts', 'net-guest'), 'build'], { encoding: 'utf8', timeout: 20 * 60_000 });
  const image = (r.stdout ?? '').trim().split('\n').at(-1) ?? '';
  if (r.status !== 0 || !image.endsWith('.qcow2')) throw new Error(`scripts/net-guest build failed (status ${String(r.status)}):\n${r.stderr ?? ''}`);
  return image;
}

/** One `net-guest: disk` line, the kinds the bench waits for. */
export interface DiskLine {
  readonly disk: string;
  readonly kind: 'seen' | 'gone' | 'io';
  /** `seen`: the virtio serial (a volume id cut to 20 characters). */
  readonly serial?: string;
}

const DISK = /^net-guest: disk (vd[a-z]+) (?:serial (\S+) size \d+|(read|wrote) \S+|(gone))\r?$/;

/** The serial console of one guest, read from a mark on. */
export class GuestConsole {
  private from = 0;

  constructor(private readonly path: string) {}

  /** Later waits see only lines written after this call. */
  mark(): void {
    this.from = existsSync(this.path) ? statSync(this.path).size : 0;
  }

  lines(): DiskLine[] {
    if (!existsSync(this.path)) return [];
    const text = readFileSync(this.path).subarray(this.from).toString('utf8');
    const out: DiskLine[] = [];
    for (const line of text.split('\n')) {
      const m = DISK.exec(line);
      if (!m) continue;
      const disk = m[1] as string;
      if (m[2] !== undefined) out.push({ disk, kind: 'seen', serial: m[2] });
      else if (m[3] !== undefined) out.push({ disk, kind: 'io' });
      else out.push({ disk, kind: 'gone' });
    }
    return out;
  }

  /** Waits until a line since the mark satisfies `pick`. @throws Error after `timeoutMs` */
  async until(what: string, pick: (l: DiskLine, all: readonly DiskLine[]) => boolean, timeoutMs = 60_000): Promise<DiskLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const all = this.lines();
      const hit = all.find((l) => pick(l, all));
      if (hit) return hit;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for the guest: ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The guest saw volume `volumeId` and read or wrote its data block (so librbd did guest I/O). @returns its disk name */
  async sawAndUsed(volumeId: string, timeoutMs = 60_000): Promise<string> {
    const serial = volumeId.slice(0, 20);
    const seen = await this.until(`disk with serial ${serial}`, (l) => l.kind === 'seen' && l.serial === serial, timeoutMs);
    await this.until(`I/O on ${seen.disk}`, (l, all) => l.kind === 'io' && l.disk === seen.disk && all.indexOf(l) > all.indexOf(seen), timeoutMs);
    return seen.disk;
  }
}

/** A QEMU process's memory, in MB. */
export interface ProcessMemory {
  readonly rss: number;
  /** Private anonymous pages: the heap and thread stacks librbd and librados allocate. */
  readonly anon: number;
  /** File-backed pages: the binary and libraries (librbd, librados, the rbd block module), shared with other QEMUs. */
  readonly file: number;
  /** Proportional set size (`smaps_rollup`): shared pages split among the processes mapping them; NaN when unreadable. */
  readonly pss: number;
}

/** @throws when the process is gone */
export function processMemory(pid: number): ProcessMemory {
  const s = statusMbs(pid, ['VmRSS', 'RssAnon', 'RssFile']);
  let pss = NaN;
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    if (m) pss = Number(m[1]) / 1024;
  } catch {
    /* not readable here: PSS stays NaN */
  }
  return { rss: s.VmRSS, anon: s.RssAnon, file: s.RssFile, pss };
}

/** SIGKILLs the QEMUs whose command line names `root` (this scenario's own directory). @returns how many */
export function reapQemus(root: string): number {
  let killed = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!cmd.includes('qemu-system') || !cmd.includes(root)) continue;
    try {
      process.kill(Number(pid), 'SIGKILL');
      killed++;
    } catch {
      /* gone already */
    }
  }
  return killed;
}
