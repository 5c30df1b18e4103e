/**
 * The systemd guest (`scripts/systemd-guest`) seen from a test: whether this machine can run it,
 * one boot of it, and its scenario log read back as checks.
 *
 * It is: prerequisites, a child process with a deadline, a parser. It is not: the scenario (that is
 * `test/integration/systemd/guest/scenario.sh`, run as root inside the guest) nor the image build.
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';

const REPO = join(__dirname, '..', '..');
const GUEST_SCRIPT = join(REPO, 'scripts', 'systemd-guest');

/** The tools the guest needs that this machine lacks, and why the test cannot run; undefined when it can. */
export function guestUnavailableReason(): string | undefined {
  if (process.platform !== 'linux') return 'the systemd guest needs Linux';
  if (process.getuid?.() !== 0) return 'the systemd guest image is built with debootstrap, which needs root';
  const missing = ['qemu-system-x86_64', 'qemu-img', 'debootstrap', 'mke2fs'].filter(
    (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0,
  );
  if (missing.length > 0) return `missing ${missing.join(', ')} (.ci/run installs qemu-system-x86, qemu-utils, debootstrap)`;
  return undefined;
}

export interface GuestRun {
  /** qemu's exit status (0 when the guest powered itself off). */
  readonly code: number | null;
  /** What scripts/systemd-guest said on stderr: image cache, timings. */
  readonly progress: string;
  readonly seconds: number;
}

/** Boots the guest once with `scenario` and `conf`; output lands in `out` (guest.log, console.log). */
export function runGuest(scenario: string, conf: string, out: string, timeoutMs: number): Promise<GuestRun> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [GUEST_SCRIPT, 'run', scenario, conf, out], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    const progress: string[] = [];
    child.stderr.on('data', (d: Buffer) => progress.push(d.toString()));
    const timer = setTimeout(() => {
      // The whole process group: the script, qemu and any build step it started.
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, progress: progress.join(''), seconds: Math.round((Date.now() - started) / 1000) });
    });
  });
}

export interface GuestCheck {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

export interface GuestLog {
  readonly checks: GuestCheck[];
  /** "pass", "fail", or undefined when the scenario never finished. */
  readonly result: string | undefined;
  readonly computeId: string | undefined;
}

/** Reads the scenario's PASS/FAIL/COMPUTE_ID/RESULT lines. */
export function parseGuestLog(text: string): GuestLog {
  const checks: GuestCheck[] = [];
  let result: string | undefined;
  let computeId: string | undefined;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/^\[[^\]]*\] /, '');
    const check = /^(PASS|FAIL) ([\w-]+): ?(.*)$/.exec(line);
    if (check) checks.push({ name: check[2] ?? '', ok: check[1] === 'PASS', detail: check[3] ?? '' });
    const id = /^COMPUTE_ID ([0-9a-f-]{36})$/.exec(line);
    if (id) computeId = id[1];
    const end = /^RESULT (\w+)$/.exec(line);
    if (end) result = end[1];
  }
  return { checks, result, computeId };
}
