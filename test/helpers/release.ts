/**
 * The OpenStack release the integration tests run against: `OPENSTACK_RELEASE`, or the release the
 * machine's own Debian carries (Debian 12: Zed, Debian 13: 2025.1), as scripts/release-root decides.
 * The other release runs from a chroot on ports of its own (scripts/stack).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export type OpenStackRelease = 'zed' | '2025.1';

function debianMajor(): string {
  try {
    return readFileSync('/etc/debian_version', 'utf8').trim().split('.')[0] ?? '';
  } catch {
    return '';
  }
}

export const NATIVE_RELEASE: OpenStackRelease = debianMajor() === '13' ? '2025.1' : 'zed';

function chosen(): OpenStackRelease {
  const r = process.env.OPENSTACK_RELEASE;
  if (r === undefined || r === '') return NATIVE_RELEASE;
  if (r !== 'zed' && r !== '2025.1') throw new Error(`OPENSTACK_RELEASE must be zed or 2025.1, not '${r}'`);
  return r;
}

export const OPENSTACK_RELEASE: OpenStackRelease = chosen();

/** True when the release under test runs from a chroot (its ports differ from the native ones). */
export const FROM_ROOT = OPENSTACK_RELEASE !== NATIVE_RELEASE;

/**
 * Why the 2025.1 services (Neutron, Ceph, Cinder: Debian 13's packages) cannot run here (not root,
 * no 2025.1 root to be had), or undefined. Builds the root once (scripts/release-root).
 */
export function release2025Unavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, the 2025.1 root)';
  try {
    execFileSync('bash', [join(__dirname, '..', '..', 'scripts', 'release-root'), 'path', '2025.1'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 20 * 60_000 });
    return undefined;
  } catch (e) {
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim().split('\n').slice(-3).join(' ');
    return `the 2025.1 root cannot be built: ${stderr || String(e)}`;
  }
}
