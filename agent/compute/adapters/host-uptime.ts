/**
 * The default `get_host_uptime` provider: the line `uptime` (procps-ng 4) prints, built from
 * /proc/uptime, /proc/loadavg and the utmp file without spawning a process, e.g.
 * ` 00:53:00 up 31 min,  0 user,  load average: 2.46, 2.13, 1.24\n`. nova's libvirt driver
 * returns the stdout of `env LANG=C uptime`, trailing newline included.
 *
 * The virt driver will provide its own; this module only supplies the fallback. The root
 * directory is injectable so tests read fixture files.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Reads the host uptime text; rejects when /proc cannot be read. */
export type HostUptimeProvider = () => Promise<string>;

const UTMP_RECORD = 384;
const USER_PROCESS = 7;

/** Sessions in a glibc x86-64 utmp file: records of type USER_PROCESS with a user name. */
export function countUtmpUsers(buf: Buffer): number {
  let n = 0;
  for (let off = 0; off + UTMP_RECORD <= buf.length; off += UTMP_RECORD) {
    if (buf.readInt16LE(off) === USER_PROCESS && buf[off + 44] !== 0) n++;
  }
  return n;
}

const pad2 = (n: number): string => String(n).padStart(2, '0');

/** Formats like procps-ng's sprint_uptime. `now` gives the wall-clock time shown. */
export function formatUptime(uptimeSeconds: number, loads: readonly [number, number, number], users: number, now: Date): string {
  const total = Math.floor(uptimeSeconds / 60);
  const days = Math.floor(total / 1440);
  const hours = Math.floor((total % 1440) / 60);
  const minutes = total % 60;
  let s = ` ${pad2(now.getHours())}:${pad2(now.getMinutes())}:${pad2(now.getSeconds())} up `;
  if (days > 0) s += `${days} day${days !== 1 ? 's' : ''}, `;
  s += hours > 0 ? `${String(hours).padStart(2, ' ')}:${pad2(minutes)}, ` : `${minutes} min, `;
  s += `${String(users).padStart(2, ' ')} user${users > 1 ? 's' : ''},  `;
  s += `load average: ${loads.map((l) => l.toFixed(2)).join(', ')}\n`;
  return s;
}

/**
 * A provider reading `<root>/proc/uptime`, `<root>/proc/loadavg` and `<root>/var/run/utmp`; with
 * `uptimeSeconds`, the uptime comes from there instead (the virt driver's `getHostUptime`).
 */
export function procUptimeProvider(root = '/', now: () => Date = () => new Date(), uptimeSeconds?: () => Promise<number>): HostUptimeProvider {
  return async () => {
    const [up, load] = await Promise.all([
      uptimeSeconds ? uptimeSeconds().then(String) : readFile(join(root, 'proc/uptime'), 'utf8'),
      readFile(join(root, 'proc/loadavg'), 'utf8'),
    ]);
    const seconds = Number(up.trim().split(/\s+/)[0]);
    const l = load.trim().split(/\s+/).slice(0, 3).map(Number);
    if (!Number.isFinite(seconds) || l.length !== 3 || l.some((x) => !Number.isFinite(x))) {
      throw new Error(`unexpected /proc/uptime or /proc/loadavg content`);
    }
    const utmp = await readFile(join(root, 'var/run/utmp')).catch(() => Buffer.alloc(0));
    return formatUptime(seconds, [l[0] ?? 0, l[1] ?? 0, l[2] ?? 0], countUtmpUsers(utmp), now());
  };
}
