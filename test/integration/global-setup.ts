// Brings the dev stack up (scripts/stack is idempotent) unless the run says not to.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

export default function globalSetup(): void {
  if (process.env.COMPUTE_AGENT_TEST_NO_STACK === '1') return;
  execFileSync('bash', [join(__dirname, '..', '..', 'scripts', 'stack'), 'up'], { stdio: 'inherit' });
}
