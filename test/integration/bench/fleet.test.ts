// The fleet scenario at a tiny size against a private real Placement: five hosts (real trackers
// and auditors over the fake driver, in this process) converge while the scheduler-style claimer
// fills them, audits in steady state write nothing, and no provider ends over-allocated. Placement
// runs on PostgreSQL with two workers when the local PostgreSQL answers (as on CI), else on SQLite.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { runFleet } from '../../../bench/fleet/run';

const PORT = 18793;
const STACK = join(__dirname, '..', '..', '..', 'scripts', 'stack');

function postgresAnswers(): boolean {
  try {
    execFileSync('psql', ['-h', '127.0.0.1', '-U', 'root', '-d', 'postgres', '-qAtc', 'select 1'], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

const env: NodeJS.ProcessEnv = {
  ...process.env,
  PLACEMENT_PORT: String(PORT),
  STACK_DIR: '/tmp/compute-agent-test-fleet-stack',
  ...(postgresAnswers() ? { PLACEMENT_DB: 'postgres', PLACEMENT_WORKERS: '2' } : { PLACEMENT_DB: 'sqlite', PLACEMENT_WORKERS: '1' }),
};
const stack = (...args: string[]): void => {
  execFileSync('bash', [STACK, ...args], { env, stdio: 'ignore' });
};

beforeAll(() => {
  stack('up', 'placement');
  stack('purge-placement');
}, 120000);

afterAll(() => {
  stack('down', 'placement');
});

test('five hosts converge, the claimer fills them, steady audits write nothing, nothing is over-allocated', async () => {
  const r = await runFleet({
    hosts: 5,
    shards: 0,
    placementUrl: `http://127.0.0.1:${PORT}`,
    auditInterval: 1,
    windowSeconds: 2,
    claimers: 2,
    claimSeconds: 60,
  });
  expect(r.converged).toBe(true);
  expect(r.firstSyncFailed).toBe(0);
  expect(r.providersInPlacement).toBe(5 * r.providersPerHost);
  expect(r.providersPerHost).toBe(3);
  // Three of the claimer's flavors fit a fleet host: the fleet is full at 15 claims.
  expect(r.claimPhase.fleetFull).toBe(true);
  expect(r.claimer.claimed).toBe(15);
  expect(r.hostsFull).toBe(5);
  expect(r.overAllocations).toEqual([]);
  expect(r.providersChecked).toBe(15);
  expect(r.steady.audits).toBeGreaterThan(0);
  expect(r.steady.auditFailures).toBe(0);
  expect(r.steady.agents.writes).toBe(0);
  // A quiet audit is one listing of the tree per host (give or take audits straddling the
  // window's edges: one per host at each end).
  expect(Math.abs(r.steady.agents.requests - r.steady.audits)).toBeLessThanOrEqual(2 * 5);
}, 120000);
