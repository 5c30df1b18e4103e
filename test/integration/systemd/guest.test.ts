// The shipped unit under a real systemd: a Debian guest (systemd as PID 1, kernel from Debian's
// packages) boots under qemu, systemd/install.sh installs this checkout, and the scenario
// (guest/scenario.sh) proves Type=notify readiness, journald JSON, discovery inside the unit's
// sandbox, reload, a watchdog restart after a hung event loop, and a clean stop. The agent in the
// guest talks to this machine's Placement and RabbitMQ through qemu's user network (10.0.2.2 is
// the host's 127.0.0.1 there).
//
// The guest image is cached (scripts/systemd-guest), so only the first run pays for debootstrap.
// Skipped, saying why, where qemu, debootstrap or root are missing.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_BIN } from '../../helpers/agents';
import { deleteTree, placementClient } from '../../helpers/placement';
import { PLACEMENT_URL, RABBIT_PORT } from '../../helpers/stack';
import { guestUnavailableReason, parseGuestLog, runGuest } from '../../helpers/systemd-guest';

const SCENARIO = join(__dirname, 'guest', 'scenario.sh');
/** First run on a 2-core machine under TCG: debootstrap, the image, the boot and the scenario. */
const GUEST_DEADLINE_MS = 20 * 60 * 1000;
/** Every check the scenario must report as PASS (the GPU ones only where the guest has /dev/dri). */
const REQUIRED = ['install', 'ready', 'status-text', 'journald-json', 'sandbox-discover', 'reload', 'watchdog-restart', 'clean-stop'];

const unavailable = guestUnavailableReason();
if (unavailable) console.log(`systemd guest test skipped: ${unavailable}`);
const guestTest = unavailable ? test.skip : test;

/** The agent's configuration inside the guest: this machine's stack, reached through qemu's gateway. */
function guestConfig(dir: string): string {
  const placementPort = new URL(PLACEMENT_URL).port || '80';
  const host = `systemd-guest-${dir.slice(-6).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
  const file = join(dir, 'compute-agent.conf');
  writeFileSync(
    file,
    `[DEFAULT]\nhost = ${host}\ncompute_driver = fake\ntransport_url = rabbit://guest:guest@10.0.2.2:${RABBIT_PORT}/\n` +
      `[placement]\nendpoint_override = http://10.0.2.2:${placementPort}\n`,
  );
  return file;
}

guestTest(
  'the unit under systemd: READY, journald JSON, sandboxed discovery, reload, watchdog restart, clean stop',
  async () => {
    expect(existsSync(AGENT_BIN)).toBe(true);
    const out = mkdtempSync(join(tmpdir(), 'ca-systemd-guest-'));
    const logFile = join(out, 'guest.log');
    console.log(`systemd guest: scenario log ${logFile}, serial console ${join(out, 'console.log')}`);
    const run = await runGuest(SCENARIO, guestConfig(out), out, GUEST_DEADLINE_MS);
    const text = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
    const log = parseGuestLog(text);
    if (log.computeId) await deleteTree(placementClient(), log.computeId);

    const summary = log.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'} ${c.name}: ${c.detail}`).join('\n');
    console.log(`systemd guest: ${run.seconds} s, qemu exit ${String(run.code)}\n${run.progress}${summary}\nfull log: ${logFile}`);

    expect(log.result).toBe('pass');
    expect(log.checks.filter((c) => !c.ok)).toEqual([]);
    expect(log.checks.filter((c) => c.ok).map((c) => c.name)).toEqual(expect.arrayContaining(REQUIRED));
    expect(run.code).toBe(0);
  },
  GUEST_DEADLINE_MS + 60_000,
);
