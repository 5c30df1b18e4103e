/**
 * Whether a process runs, as the tests must ask it here: `kill(pid, 0)` also succeeds for a
 * zombie (killed, not yet reaped), and this machine's PID 1 may leave a daemon reparented to it
 * unreaped for a long time. The stack scripts ask the same way (`pid_alive`, scripts/stack-lib.sh).
 */
import { readFileSync } from 'node:fs';

/** Whether `pid` runs: it exists and is not a zombie. */
export function pidRunning(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
