// A Placement outage strands no operation. A PRIVATE Placement (its own port and STACK_DIR, its
// SQLite database kept across the stop and the start; the shared one on 8778 is never touched) is
// stopped (connection refused) while builds and deletes are cast to an agent process; then it is
// started again on the same database. Within 60 s of its return every build is ACTIVE holding
// exactly its flavor, every deleted instance is gone with no allocation, and no instance is left in
// a task state. The second case also SIGKILLs the agent during the outage and restarts it (as
// systemd would: again until it starts). OUTAGE_SECONDS (default 20) sets the outage's length; the
// default `[placement] retry_deadline` (300 s) outlasts it. OUTAGE_KIND=freeze makes the first
// case's outage a frozen Placement (SIGSTOP: connections hang until the 30 s request timeout).
import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentSpec as benchAgentSpec } from '../../../bench/agents';
import { requestFromFlavor, totalsOf } from '../../../tracker/claims/request';
import { AgentProcess, rootOf } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { FLAVOR, instanceArgs } from '../../helpers/instance-args';
import { placementClient } from '../../helpers/placement';
import { TRANSPORT_URL } from '../../helpers/stack';
import { portFree, waitUntil } from '../../helpers/wait';

jest.setTimeout(300000);

const REPO = join(__dirname, '..', '..', '..');
const OUTAGE_MS = Number(process.env.OUTAGE_SECONDS ?? '20') * 1000;
const FREEZE = process.env.OUTAGE_KIND === 'freeze';
/** What the harness's FLAVOR claims (swap counts as disk, rounded up). */
const FLAVOR_ALLOCATION = totalsOf(requestFromFlavor(FLAVOR));

interface Row {
  uuid: string;
  vm_state: string;
  task_state: string | null;
}

/** A Placement of this test's own, run by `scripts/stack` with its own port and STACK_DIR. */
class PrivatePlacement {
  readonly dir = mkdtempSync(join(tmpdir(), 'ca-placement-outage-'));
  constructor(readonly port: number) {}
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  up(): Promise<void> {
    return this.stack('up');
  }
  down(): Promise<void> {
    return this.stack('down');
  }
  /** Stops (SIGSTOP) or resumes (SIGCONT) the uwsgi master and its workers, by their pids. */
  signal(sig: 'SIGSTOP' | 'SIGCONT'): void {
    const master = Number(readFileSync(join(this.dir, `placement-${this.port}`, 'uwsgi.pid'), 'utf8').trim());
    const workers = execFileSync('pgrep', ['-P', String(master)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
    for (const pid of [master, ...workers]) process.kill(pid, sig);
  }
  private stack(cmd: 'up' | 'down'): Promise<void> {
    const env = { ...process.env, PLACEMENT_PORT: String(this.port), STACK_DIR: this.dir, PLACEMENT_DB: 'sqlite', PLACEMENT_WORKERS: '1' };
    return new Promise((resolve, reject) => {
      execFile('bash', [join(REPO, 'scripts', 'stack'), cmd, 'placement'], { env, timeout: 120000 }, (err, _out, stderr) => (err ? reject(new Error(`stack ${cmd}: ${err.message}\n${stderr}`)) : resolve()));
    });
  }
}

async function privatePlacement(): Promise<PrivatePlacement> {
  for (let i = 0; i < 50; i++) {
    const port = 21000 + Math.floor(Math.random() * 8000);
    if (await portFree(port)) return new PrivatePlacement(port);
  }
  throw new Error('no free port for a private Placement');
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let placement: PrivatePlacement;

beforeAll(async () => {
  placement = await privatePlacement();
  await placement.up();
});

afterAll(async () => {
  await placement.down().catch(() => undefined);
  rmSync(placement.dir, { recursive: true, force: true });
});

/** Runs one outage; `during` runs right after Placement stops and the casts are sent. */
async function outage(name: string, during: (agent: AgentProcess, background: (restart: Promise<void>) => void) => Promise<void>, freeze = false): Promise<void> {
  const exchange = `test-outage-${randomUUID().slice(0, 8)}`;
  const agent = new AgentProcess(benchAgentSpec(`${name}-${exchange.slice(-8)}`, exchange, { placementUrl: placement.url, transportUrl: TRANSPORT_URL }));
  const cp = new ControlPlane(exchange);
  const api = placementClient(undefined, placement.url);
  let restarting: Promise<void> | undefined;
  const list = async (): Promise<Map<string, Row>> => new Map((await cp.call<Row[]>(agent.spec.host, 'list_instances', {}, 'compute_agent', 5000)).map((r) => [r.uuid, r]));
  try {
    await cp.start();
    await agent.start();
    const doomed = Array.from({ length: 3 }, () => instanceArgs());
    for (const i of doomed) await cp.cast(agent.spec.host, 'build_and_run_instance', { instance: i });
    await waitUntil('the instances to delete are ACTIVE', async () => {
      const rows = await list();
      return doomed.every((i) => rows.get(String(i.uuid))?.vm_state === 'active');
    }, 60000);

    if (freeze) placement.signal('SIGSTOP');
    else await placement.down();
    const built = Array.from({ length: 4 }, () => instanceArgs());
    for (const i of built) await cp.cast(agent.spec.host, 'build_and_run_instance', { instance: i });
    for (const i of doomed) await cp.cast(agent.spec.host, 'terminate_instance', { instance: { uuid: i.uuid } });
    const stoppedAt = Date.now();
    await during(agent, (restart) => {
      restarting = restart;
    });
    await sleep(Math.max(0, OUTAGE_MS - (Date.now() - stoppedAt)));
    if (freeze) placement.signal('SIGCONT');
    else await placement.up();
    const back = Date.now();
    await restarting;

    const root = rootOf(agent.spec);
    await waitUntil('every build is ACTIVE with its allocation and every deleted instance is gone with none', async () => {
      const rows = await list();
      if (rows.size !== built.length) return false;
      if (![...rows.values()].every((r) => r.vm_state === 'active' && r.task_state === null)) return false;
      if (!built.every((i) => rows.has(String(i.uuid)))) return false;
      const on = (await api.providerAllocations(root)).allocations;
      return Object.keys(on).length === built.length;
    }, 60000);
    const settledSeconds = (Date.now() - back) / 1000;
    process.stdout.write(`${name}: outage ${(back - stoppedAt) / 1000} s; settled ${settledSeconds.toFixed(1)} s after Placement's return\n`);

    const rows = await list();
    for (const r of rows.values()) expect(r).toMatchObject({ vm_state: 'active', task_state: null });
    expect([...rows.keys()].sort()).toEqual(built.map((i) => String(i.uuid)).sort());
    for (const i of built) {
      const held = (await api.consumerAllocations(String(i.uuid))).allocations;
      expect(Object.fromEntries(Object.entries(held).map(([rp, a]) => [rp, a.resources]))).toEqual({ [root]: FLAVOR_ALLOCATION });
    }
    for (const i of doomed) expect((await api.consumerAllocations(String(i.uuid))).allocations).toEqual({});
    expect(Object.keys((await api.providerAllocations(root)).allocations).sort()).toEqual(built.map((i) => String(i.uuid)).sort());
    expect(settledSeconds).toBeLessThan(60);
  } catch (e) {
    process.stderr.write(`--- ${agent.spec.host} ---\n${agent.output.join('').slice(-8000)}\n`);
    throw e;
  } finally {
    await agent.kill();
    await cp.close();
    // Leave Placement up (and running) for the next case.
    if (freeze) placement.signal('SIGCONT');
    if (await portFree(placement.port)) await placement.up();
  }
}

test('builds and deletes cast while Placement is down finish once it is back', async () => {
  await outage('outage', () => Promise.resolve(), FREEZE);
});

test('the same when the agent is also SIGKILLed during the outage and restarted', async () => {
  await outage('outage-kill', async (agent, background) => {
    await sleep(Math.min(5000, OUTAGE_MS / 4));
    await agent.kill();
    // Started again at once: startup waits for Placement and gives up; started again until it is up.
    const restart = agent.startUntilUp(OUTAGE_MS + 60000);
    restart.catch(() => undefined);
    background(restart);
  });
});
