// Which oslo.messaging the python peer runs and which broker it meets. zed: the machine's own
// python3-oslo.messaging (/usr/bin/python3; 14.0.3 on Debian 12) on the shared broker
// (TRANSPORT_URL). 2025.1: Debian 13's oslo.messaging 16.1 run from the release's root
// (scripts/release-root; the machine itself on Debian 13) on the 2025.1 stack's RabbitMQ 4, whose
// URL `OPENSTACK_RELEASE=2025.1 scripts/stack env` gives; the broker is brought up with the stack
// script unless COMPUTE_AGENT_TEST_NO_STACK=1 (npm test brings it up before the suite).
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { PEER, PYTHON, TRANSPORT_URL } from './helpers';

export interface PeerRuntime {
  readonly release: string;
  /** argv before the peer script. */
  readonly command: readonly string[];
  /** The peer script, at a path the interpreter sees. */
  readonly peer: string;
  readonly url: string;
}

export const ZED_PEER: PeerRuntime = { release: 'zed', command: [PYTHON], peer: PEER, url: TRANSPORT_URL };

const REPO = join(__dirname, '..', '..', '..');
const STACK = join(REPO, 'scripts', 'stack');
const RELEASE_ROOT = join(REPO, 'scripts', 'release-root');

/** oslo.messaging 16.1 on RabbitMQ 4, or why it is not available on this machine. */
export function peer2025(): PeerRuntime | { readonly unavailable: string } {
  const env = { ...process.env, OPENSTACK_RELEASE: '2025.1' };
  try {
    execFileSync('bash', [RELEASE_ROOT, 'path', '2025.1'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    return { unavailable: `the 2025.1 root cannot be built here: ${(e as { stderr?: Buffer }).stderr?.toString().trim() ?? String(e)}` };
  }
  if (process.env.COMPUTE_AGENT_TEST_NO_STACK !== '1') execFileSync('bash', [STACK, 'up', 'rabbitmq'], { env, stdio: 'inherit' });
  const url = /^RABBIT_URL=(.*)$/m.exec(execFileSync('bash', [STACK, 'env'], { env, encoding: 'utf8' }))?.[1];
  if (url === undefined) throw new Error('scripts/stack env printed no RABBIT_URL');
  // The root sees /tmp (not necessarily this checkout), and the queue manager's lock directory.
  const dir = mkdtempSync('/tmp/ca-oslo16-');
  const peer = join(dir, 'oslo_peer.py');
  copyFileSync(PEER, peer);
  return { release: '2025.1', command: ['bash', RELEASE_ROOT, 'exec', '2025.1', 'env', `OSLO_LOCK_PATH=${dir}`, 'python3'], peer, url };
}
