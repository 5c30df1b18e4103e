// Every named crash point (agent/crash-points.ts), against the real Placement and RabbitMQ with
// two agents as processes: the agent that passes the point is started with it armed, the operation
// is run, the agent dies there as SIGKILL would, it is started again, and the operation is driven
// to its end as a control plane would. Then the invariants hold: the instance rests (no task
// state) on the host the operation put it on or rolled it back to, or is gone after a terminate;
// it holds exactly its flavor on exactly that host; its migration consumer holds nothing; each
// provider's usages are the sum of its allocations; and at the end no journal holds a request left
// unfinished. The points are shared out over a few pairs of agents that run side by side.
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CRASH_AT_ENV, CRASH_POINTS, type CrashPointName } from '../../../agent/crash-points';
import { AgentProcess, agentSpec, rootOf } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { FLAVOR, instanceArgs } from '../../helpers/instance-args';
import { hostProblems, instanceProblems, pendingRequests, restingPlace, type CheckedHost, type InstanceRow } from '../../helpers/invariants';
import { deleteTree, placementClient } from '../../helpers/placement';

jest.setTimeout(600000);

const api = placementClient();
/** Pairs of agents working through the points side by side. */
const PAIRS = 3;
/** How long a step may take before the point is reported as stuck. */
const STEP_MS = 45000;

/** Cold and live migrations go from a (source) to b (destination). */
type Operation = 'build' | 'terminate' | 'cold-confirm' | 'cold-revert' | 'live';
interface Scenario {
  readonly op: Operation;
  readonly armed: 'a' | 'b';
}

/** Keyed by every point: a point added to the table does not compile here until it has a scenario. */
const SCENARIOS: Record<CrashPointName, Scenario> = {
  'journal.accepted': { op: 'build', armed: 'a' },
  'rpc.before-ack': { op: 'build', armed: 'a' },
  'rpc.after-ack': { op: 'build', armed: 'a' },
  'rpc.before-complete': { op: 'build', armed: 'a' },
  'journal.completed': { op: 'build', armed: 'a' },
  'build.recorded': { op: 'build', armed: 'a' },
  'build.claimed': { op: 'build', armed: 'a' },
  'build.networked': { op: 'build', armed: 'a' },
  'build.volumes': { op: 'build', armed: 'a' },
  'build.spawned': { op: 'build', armed: 'a' },
  'terminate.recorded': { op: 'terminate', armed: 'a' },
  'terminate.destroyed': { op: 'terminate', armed: 'a' },
  'terminate.forgotten': { op: 'terminate', armed: 'a' },
  'terminate.freed': { op: 'terminate', armed: 'a' },
  'resize.prep.recorded': { op: 'cold-confirm', armed: 'b' },
  'resize.prep.claimed': { op: 'cold-confirm', armed: 'b' },
  'resize.prep.cast': { op: 'cold-confirm', armed: 'b' },
  'resize.source.recorded': { op: 'cold-confirm', armed: 'a' },
  'resize.source.moved': { op: 'cold-confirm', armed: 'a' },
  'resize.source.cast': { op: 'cold-revert', armed: 'a' },
  'resize.finish.recorded': { op: 'cold-confirm', armed: 'b' },
  'resize.finish.spawned': { op: 'cold-revert', armed: 'b' },
  'confirm.recorded': { op: 'cold-confirm', armed: 'a' },
  'confirm.driver': { op: 'cold-confirm', armed: 'a' },
  'confirm.freed': { op: 'cold-confirm', armed: 'a' },
  'confirm.before-cast': { op: 'cold-confirm', armed: 'a' },
  'confirm.dest': { op: 'cold-confirm', armed: 'b' },
  'revert.dest.recorded': { op: 'cold-revert', armed: 'b' },
  'revert.dest.before-cast': { op: 'cold-revert', armed: 'b' },
  'revert.source.recorded': { op: 'cold-revert', armed: 'a' },
  'revert.source.swapped': { op: 'cold-revert', armed: 'a' },
  'revert.source.spawned': { op: 'cold-revert', armed: 'a' },
  'live.check.recorded': { op: 'live', armed: 'b' },
  'live.check.claimed': { op: 'live', armed: 'b' },
  'live.check.answered': { op: 'live', armed: 'b' },
  'live.source.recorded': { op: 'live', armed: 'a' },
  'live.dest.prepared': { op: 'live', armed: 'b' },
  'live.source.running': { op: 'live', armed: 'a' },
  'live.source.migrated': { op: 'live', armed: 'a' },
  'live.dest.post': { op: 'live', armed: 'b' },
  'live.source.posted': { op: 'live', armed: 'a' },
  'live.source.freed': { op: 'live', armed: 'a' },
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it yields a value; undefined after `ms` (an agent being down is retried). */
async function until<T>(probe: () => Promise<T | undefined>, ms = STEP_MS): Promise<T | undefined> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    await sleep(200);
  }
  return undefined;
}

class Pair {
  readonly cp: ControlPlane;
  readonly a: AgentProcess;
  readonly b: AgentProcess;
  readonly hosts: CheckedHost[] = [];

  constructor(n: number) {
    const exchange = `test-crash-${n}-${randomUUID().slice(0, 8)}`;
    this.cp = new ControlPlane(exchange);
    this.a = new AgentProcess(agentSpec(`crash-a${n}-${exchange.slice(-8)}`, exchange));
    this.b = new AgentProcess(agentSpec(`crash-b${n}-${exchange.slice(-8)}`, exchange));
    // Peer calls to a dead agent time out quickly, so a crash mid-call rolls back within the step.
    for (const { spec } of [this.a, this.b]) writeFileSync(spec.file, readFileSync(spec.file, 'utf8').replace('[DEFAULT]\n', '[DEFAULT]\nrpc_response_timeout = 8\n'));
  }

  async start(): Promise<void> {
    await this.cp.start();
    await Promise.all([this.a.start(), this.b.start()]);
    for (const agent of [this.a, this.b]) {
      const host = agent.spec.host;
      this.hosts.push({ host, root: rootOf(agent.spec), list: () => this.list(host) });
    }
  }

  async list(host: string): Promise<Map<string, InstanceRow>> {
    const rows = await this.cp.call<InstanceRow[]>(host, 'list_instances', {}, 'compute_agent', 3000);
    return new Map(rows.map((r) => [r.uuid, r]));
  }

  /** Waits until the instance rests on `host` (null: is gone); false when it never does. */
  async restsOn(uuid: string, host: string | null): Promise<boolean> {
    return (await until(async () => ((await restingPlace(this.hosts, uuid)) === host ? true : undefined))) ?? false;
  }

  /** A failure notification for the instance has arrived (the operation rolled back). */
  failed(uuid: string): boolean {
    return this.cp.events.some((e) => e.uuid === uuid && (e.event_type.endsWith('.error') || e.event_type === 'instance.live_migration_abort.end'));
  }

  /** The invariants, polled until they hold (a removal retried in the background, a late cast), or the last problems. */
  async settle(uuid: string, hosts: string[], migration: string | undefined): Promise<string[]> {
    let found: string[] = [];
    const ok = await until(async () => {
      found = [...(await instanceProblems(api, this.hosts, { uuid, flavor: FLAVOR, hosts, migrations: migration ? [migration] : [] })), ...(await hostProblems(api, this.hosts))];
      return found.length === 0 ? true : undefined;
    }, 15000);
    return ok ? [] : found;
  }

  /** Runs one point; returns what is wrong afterwards. */
  async run(point: CrashPointName): Promise<string[]> {
    const { op, armed } = SCENARIOS[point];
    const a = this.a.spec.host;
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    if (op !== 'build') {
      await this.cp.cast(a, 'build_and_run_instance', { instance: inst });
      if (!(await this.restsOn(uuid, a))) return [`${point}: the instance to work on did not build`];
    }
    const victim = armed === 'a' ? this.a : this.b;
    await victim.kill(true);
    await victim.start({ [CRASH_AT_ENV]: point });
    const died = victim.exited();
    const driving = this.drive(op, inst).catch((e: unknown) => ({ hosts: [] as string[], migration: undefined, problem: `driving failed: ${(e as Error).message}` }));
    const how = await Promise.race([died, sleep(STEP_MS).then(() => 'alive')]);
    const problems: string[] = [];
    if (how !== 'SIGKILL' || !victim.output.join('').includes(`crash point ${point} reached`)) problems.push(`the agent did not die at the point (${how})`);
    if (how !== 'alive') await victim.start();
    const end = await driving;
    if ('problem' in end) problems.push(end.problem);
    problems.push(...(await this.settle(uuid, end.hosts, end.migration)));
    return problems.map((p) => `${point}: ${p}`);
  }

  /** Drives `op` to its end as a control plane would; returns where the instance may rest. */
  private async drive(op: Operation, inst: Record<string, unknown>): Promise<{ hosts: string[]; migration: string | undefined } | { hosts: string[]; migration: string | undefined; problem: string }> {
    const [a, b] = [this.a.spec.host, this.b.spec.host];
    const uuid = String(inst.uuid);
    const stuck = (what: string, hosts: string[], migration?: string) => ({ hosts, migration, problem: `stuck: ${what}` });
    if (op === 'build' || op === 'terminate') {
      await this.cp.cast(a, op === 'build' ? 'build_and_run_instance' : 'terminate_instance', op === 'build' ? { instance: inst } : { instance: { uuid } });
      const want = op === 'build' ? a : null;
      return (await this.restsOn(uuid, want)) ? { hosts: want ? [a] : [], migration: undefined } : stuck(`${op} did not finish`, want ? [a] : []);
    }
    const mig = { uuid: randomUUID(), migration_type: op === 'live' ? 'live-migration' : 'migration', source_compute: a, dest_compute: b };
    if (op === 'live') {
      const data = await this.cp.call<Record<string, unknown>>(b, 'check_can_live_migrate_destination', { instance: inst, migration: mig, block_migration: false, disk_over_commit: false }, null, 8000).catch(() => undefined);
      // A check that failed ends the migration there, as nova's conductor ends it.
      if (data) await this.cp.cast(a, 'live_migration', { instance: { uuid }, dest: b, migration: mig, migrate_data: data, block_migration: false });
      const done = data ? await until(async () => ((await restingPlace(this.hosts, uuid)) === b || (this.failed(uuid) && (await restingPlace(this.hosts, uuid)) === a) ? true : undefined)) : await this.restsOn(uuid, a);
      return done ? { hosts: data ? [a, b] : [a], migration: mig.uuid } : stuck('live migration did not settle', [a, b], mig.uuid);
    }
    await this.cp.cast(b, 'prep_resize', { instance: inst, flavor: FLAVOR, migration: mig });
    const moved = await until(async () => {
      const r = (await this.list(b)).get(uuid);
      if (r?.vm_state === 'resized' && r.task_state === null) return 'resized';
      return this.failed(uuid) && (await restingPlace(this.hosts, uuid)) === a ? 'rolled back' : undefined;
    });
    if (!moved) return stuck('cold migration did not reach RESIZED or roll back', [a, b], mig.uuid);
    if (moved === 'rolled back') return { hosts: [a], migration: mig.uuid };
    if (op === 'cold-confirm') await this.cp.cast(a, 'confirm_resize', { instance: { uuid }, migration: mig });
    else await this.cp.cast(b, 'revert_resize', { instance: { uuid }, migration: mig });
    const want = op === 'cold-confirm' ? b : a;
    return (await this.restsOn(uuid, want)) ? { hosts: [want], migration: mig.uuid } : stuck(`${op} did not finish`, [want], mig.uuid);
  }

  async stop(): Promise<string[]> {
    await Promise.all([this.a.kill(true), this.b.kill(true)]);
    const problems: string[] = [];
    for (const { spec } of [this.a, this.b]) problems.push(...(await pendingRequests(join(spec.dir, 'state'))).map((p) => `${spec.host}: journal still holds ${p}`));
    await this.cp.close();
    return problems;
  }

  async cleanUp(): Promise<void> {
    await Promise.all([this.a.kill(), this.b.kill()]);
    await this.cp.close();
    for (const { spec } of [this.a, this.b]) if (existsSync(join(spec.dir, 'state', 'compute_id'))) await deleteTree(api, rootOf(spec)).catch(() => undefined);
  }
}

test('a crash at every named point of build, terminate, cold and live migration loses nothing and leaks nothing', async () => {
  const points = Object.keys(CRASH_POINTS) as CrashPointName[];
  expect(new Set(Object.keys(SCENARIOS))).toEqual(new Set(points));
  const pairs = Array.from({ length: PAIRS }, (_, n) => new Pair(n));
  const started = Date.now();
  const problems: string[] = [];
  try {
    await Promise.all(pairs.map((p) => p.start()));
    const queue = [...points];
    await Promise.all(
      pairs.map(async (pair) => {
        for (let point = queue.shift(); point; point = queue.shift()) {
          const found = await pair.run(point);
          if (found.length > 0) process.stderr.write(`${found.join('\n')}\n--- a ---\n${pair.a.output.join('').slice(-3000)}\n--- b ---\n${pair.b.output.join('').slice(-3000)}\n`);
          problems.push(...found);
        }
      }),
    );
    for (const pair of pairs) problems.push(...(await pair.stop()));
    process.stderr.write(`crash points: ${points.length} in ${Math.round((Date.now() - started) / 1000)} s over ${PAIRS} pairs of agents\n`);
    expect(problems).toEqual([]);
  } finally {
    for (const pair of pairs) await pair.cleanUp();
  }
});
