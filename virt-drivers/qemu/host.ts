/**
 * What the QEMU driver needs to know about its host before it runs anything: the QEMU version
 * (both binaries present) and the accelerator to use.
 *
 * `accel = auto` picks KVM only when it is really there: `/dev/kvm` opens read-write AND the CPU
 * advertises hardware virtualization (vmx or svm in /proc/cpuinfo). A `/dev/kvm` without either
 * flag is a paravirtual or partial nested KVM (such as kvm_pvm, on which a stock Linux kernel
 * stops at its protected-mode switch), so `auto` uses TCG there; `accel = kvm` forces it.
 *
 * It is: read-only probing, at `init`. It is not: a capability negotiation with a peer host
 * (the live-migration pre-checks compare what each side found).
 */
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { CommandNotFoundError, type Exec } from '../host/exec';
import type { HostFs } from '../host/host-fs';
import { DriverInitError } from '../errors';

/** A QEMU version. */
export interface QemuVersion {
  readonly major: number;
  readonly minor: number;
  readonly micro: number;
  /** As printed, e.g. "7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)". */
  readonly text: string;
}

/** The accelerator `init` chose, and why (logged). */
export interface AccelChoice {
  readonly accel: 'kvm' | 'tcg';
  readonly reason: string;
}

/** Parses `qemu-system-x86_64 --version`. */
export function parseQemuVersion(out: string): QemuVersion | undefined {
  const m = /version\s+(\d+)\.(\d+)\.(\d+)([^\n]*)/.exec(out);
  if (!m) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), micro: Number(m[3]), text: `${m[1]}.${m[2]}.${m[3]}${(m[4] ?? '').trimEnd()}` };
}

/** -1, 0 or 1 as `a` is older than, the same as, or newer than `b` (major.minor.micro). */
export function compareVersions(a: Pick<QemuVersion, 'major' | 'minor' | 'micro'>, b: Pick<QemuVersion, 'major' | 'minor' | 'micro'>): number {
  for (const k of ['major', 'minor', 'micro'] as const) if (a[k] !== b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
}

/** The first QEMU whose live migration under TCG keeps every guest write (see `tcgMigrationHazard`). */
export const TCG_MIGRATION_FIXED = { major: 9, minor: 0, micro: 0 } as const;

/**
 * Why live migration may corrupt guests on this host, or undefined. Before QEMU 9.0 the
 * migration's dirty-bitmap sync did not reset the TCG TLB's dirty state, so stores through the
 * TLB after the first pass can go unrecorded and unsent ("physmem: Fix migration dirty bitmap
 * coherency with TCG memory access"); a guest that touched such a page runs on at the destination
 * with stale memory. KVM tracks dirty pages itself and is not affected.
 */
export function tcgMigrationHazard(version: QemuVersion, accel: AccelChoice['accel']): string | undefined {
  if (accel !== 'tcg' || compareVersions(version, TCG_MIGRATION_FIXED) >= 0) return undefined;
  return `QEMU ${version.major}.${version.minor}.${version.micro} under TCG can lose guest writes during a live migration (fixed in QEMU 9.0): a live-migrated guest may crash on the destination; use KVM or QEMU 9.0 or newer ([qemu] binary)`;
}

/** The version of `binary`, checking that `qemuImg` runs too. @throws DriverInitError */
export async function probeQemu(exec: Exec, binary: string, qemuImg: string): Promise<QemuVersion> {
  const install = 'install qemu-system-x86 and qemu-utils (apt-get install --no-install-recommends qemu-system-x86 qemu-utils)';
  let out: string;
  try {
    out = (await exec.run(binary, ['--version'], { timeoutMs: 10_000 })).stdout;
  } catch (e) {
    if (e instanceof CommandNotFoundError) throw new DriverInitError(`${binary} not found: ${install}, or set [qemu] binary`, { cause: e });
    throw new DriverInitError(`${binary} --version failed: ${(e as Error).message}`, { cause: e });
  }
  const version = parseQemuVersion(out);
  if (!version) throw new DriverInitError(`${binary} --version printed no QEMU version: ${JSON.stringify(out.slice(0, 100))}`);
  try {
    await exec.run(qemuImg, ['--version'], { timeoutMs: 10_000 });
  } catch (e) {
    if (e instanceof CommandNotFoundError) throw new DriverInitError(`${qemuImg} not found: ${install}, or set [qemu] qemu_img_binary`, { cause: e });
    throw new DriverInitError(`${qemuImg} --version failed: ${(e as Error).message}`, { cause: e });
  }
  return version;
}

async function kvmOpens(): Promise<boolean> {
  try {
    await access('/dev/kvm', constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The accelerator for `mode`.
 * @throws DriverInitError when `kvm` is demanded and /dev/kvm cannot be opened
 */
export async function chooseAccel(mode: 'auto' | 'kvm' | 'tcg', fs: HostFs, kvmUsable: () => Promise<boolean> = kvmOpens): Promise<AccelChoice> {
  if (mode === 'tcg') return { accel: 'tcg', reason: '[qemu] accel = tcg' };
  const opens = await kvmUsable();
  if (mode === 'kvm') {
    if (!opens) throw new DriverInitError('[qemu] accel = kvm, but /dev/kvm cannot be opened read-write (missing, or no permission: is the agent in group kvm?)');
    return { accel: 'kvm', reason: '[qemu] accel = kvm' };
  }
  if (!opens) return { accel: 'tcg', reason: '/dev/kvm cannot be opened read-write' };
  const cpuinfo = await fs.read('/proc/cpuinfo').catch(() => undefined);
  const hw = /^flags\s*:.*\b(vmx|svm)\b/m.test(cpuinfo ?? '');
  return hw ? { accel: 'kvm', reason: '/dev/kvm opens and the CPU has vmx/svm' } : { accel: 'tcg', reason: '/dev/kvm opens but the CPU advertises no vmx/svm (partial or paravirtual KVM)' };
}
