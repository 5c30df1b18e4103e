// Fault injection: two agent processes run spawns, cold migrations (confirmed and reverted), live
// migrations and deletes while one of them is killed with SIGKILL at random moments, 20 times,
// and restarted each time. At the end no request is lost (every instance reached its target
// state), no allocation leaked or went missing, and nothing is stuck in a transient state.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { agentSpec, rootOf, startProcess, type AgentSpec } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { FLAVOR, instanceArgs } from '../../helpers/compute-harness';
import { deleteTree, placementClient } from '../../helpers/placement';

jest.setTimeout(600000);

const BIN = join(__dirname, '..', '..', '..', 'dist', 'agent', 'cli', 'main.js');
const api = placementClient();

interface Row {
  uuid: string;
  vm_state: string;
  task_state: string | null;
}

class Agent {
  child: ChildProcess | undefined;
  output: string[] = [];
  constructor(readonly spec: AgentSpec) {}
  async start(): Promise<void> {
    const p = await startProcess(this.spec, BIN);
    this.child = p.child;
    this.output = p.output;
  }
  async kill(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null) return;
    const gone = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await gone;
  }
}

async function waitUntil(what: string, ok: () => Promise<boolean>, ms = 180000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await ok().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('SIGKILL at 20 random points during spawn, migrate and delete flows: invariants hold at the end', async () => {
  const exchange = `test-kill-${randomUUID().slice(0, 8)}`;
  const a = new Agent(agentSpec(`kill-a-${exchange.slice(-8)}`, exchange));
  const b = new Agent(agentSpec(`kill-b-${exchange.slice(-8)}`, exchange));
  const cp = new ControlPlane(exchange);
  let kills = 0;
  let stopKiller = false;
  const list = async (agent: Agent): Promise<Map<string, Row>> => {
    const rows = await cp.call<Row[]>(agent.spec.host, 'list_instances', {}, 'compute_agent', 5000);
    return new Map(rows.map((r) => [r.uuid, r]));
  };
  const killer = async (): Promise<void> => {
    while (!stopKiller && kills < 20) {
      await new Promise((r) => setTimeout(r, 150 + Math.random() * 700));
      if (stopKiller) break;
      const victim = Math.random() < 0.5 ? a : b;
      await victim.kill();
      kills++;
      await victim.start();
    }
  };
  try {
    await cp.start();
    await a.start();
    await b.start();
    const killing = killer();

    const onA = Array.from({ length: 12 }, () => instanceArgs());
    const onB = Array.from({ length: 8 }, () => instanceArgs());
    for (const i of onA) await cp.cast(a.spec.host, 'build_and_run_instance', { instance: i });
    for (const i of onB) await cp.cast(b.spec.host, 'build_and_run_instance', { instance: i });
    await waitUntil('every spawn is ACTIVE', async () => {
      const [la, lb] = [await list(a), await list(b)];
      return onA.every((i) => la.get(String(i.uuid))?.vm_state === 'active') && onB.every((i) => lb.get(String(i.uuid))?.vm_state === 'active');
    });

    const cold = onA.slice(0, 6).map((inst) => ({ inst, mig: { uuid: randomUUID(), migration_type: 'migration', source_compute: a.spec.host, dest_compute: b.spec.host } }));
    for (const c of cold) await cp.cast(b.spec.host, 'prep_resize', { instance: c.inst, flavor: FLAVOR, migration: c.mig });
    await waitUntil('every cold migration is RESIZED on b', async () => {
      const lb = await list(b);
      return cold.every((c) => lb.get(String(c.inst.uuid))?.vm_state === 'resized');
    });
    for (const c of cold.slice(0, 3)) await cp.cast(a.spec.host, 'confirm_resize', { instance: { uuid: c.inst.uuid }, migration: c.mig });
    for (const c of cold.slice(3)) await cp.cast(b.spec.host, 'revert_resize', { instance: { uuid: c.inst.uuid }, migration: c.mig });
    await waitUntil('confirms and reverts are done', async () => {
      const [la, lb] = [await list(a), await list(b)];
      const confirmed = cold.slice(0, 3).every((c) => !la.has(String(c.inst.uuid)) && lb.get(String(c.inst.uuid))?.vm_state === 'active');
      const reverted = cold.slice(3).every((c) => !lb.has(String(c.inst.uuid)) && la.get(String(c.inst.uuid))?.vm_state === 'active');
      return confirmed && reverted;
    });

    const live = onB.slice(0, 4).map((inst) => ({ inst, mig: { uuid: randomUUID(), migration_type: 'live-migration', source_compute: b.spec.host, dest_compute: a.spec.host } }));
    for (const l of live) {
      let data: Record<string, unknown> | undefined;
      await waitUntil(`the live-migration check of ${String(l.inst.uuid)} answers`, async () => {
        data = await cp.call<Record<string, unknown>>(a.spec.host, 'check_can_live_migrate_destination', { instance: l.inst, migration: l.mig }, null, 10000);
        return true;
      });
      await cp.cast(b.spec.host, 'live_migration', { instance: { uuid: l.inst.uuid }, dest: a.spec.host, migration: l.mig, migrate_data: data ?? {} });
    }
    // A live migration may fail under kills (a call whose callee died times out): it must then
    // roll back cleanly, leaving the instance ACTIVE on b. Either way it settles on one host.
    await waitUntil('every live migration landed on a or rolled back to b', async () => {
      const [la, lb] = [await list(a), await list(b)];
      return live.every((l) => {
        const u = String(l.inst.uuid);
        const onA = la.get(u);
        const onB = lb.get(u);
        const settled = (r: Row | undefined): boolean => r?.vm_state === 'active' && r.task_state === null;
        return (settled(onA) && !onB) || (settled(onB) && !onA);
      });
    });

    stopKiller = true;
    await killing;
    expect(kills).toBeGreaterThanOrEqual(1);

    // Invariant at the stable point: every consumer on the two hosts is a known instance with the
    // allocation its record says; no migration holds anything; nothing is transient.
    const [la, lb] = [await list(a), await list(b)];
    for (const r of [...la.values(), ...lb.values()]) {
      expect(r.task_state).toBeNull();
      expect(['active', 'stopped']).toContain(r.vm_state);
    }
    const known = new Set([...la.keys(), ...lb.keys()]);
    expect(known.size).toBe(20);
    for (const spec of [a.spec, b.spec]) {
      const on = await api.providerAllocations(rootOf(spec));
      for (const consumer of Object.keys(on.allocations)) expect(known.has(consumer)).toBe(true);
    }
    for (const uuid of known) {
      const show = await cp.call<{ allocations: object; placement_allocations: object }>(la.has(uuid) ? a.spec.host : b.spec.host, 'show_instance', { instance: { uuid } }, 'compute_agent');
      expect(show.placement_allocations).toEqual(show.allocations);
    }
    for (const m of [...cold, ...live].map((x) => x.mig.uuid)) expect((await api.consumerAllocations(m)).allocations).toEqual({});

    // Delete everything; zero allocations remain.
    for (const uuid of la.keys()) await cp.cast(a.spec.host, 'terminate_instance', { instance: { uuid } });
    for (const uuid of lb.keys()) await cp.cast(b.spec.host, 'terminate_instance', { instance: { uuid } });
    await waitUntil('all deleted', async () => (await list(a)).size === 0 && (await list(b)).size === 0);
    for (const spec of [a.spec, b.spec]) expect((await api.providerAllocations(rootOf(spec))).allocations).toEqual({});
  } catch (e) {
    // Show what the agents said: the reason for a failure is in there.
    process.stderr.write(`kills so far: ${kills}\n--- a ---\n${a.output.join('').slice(-6000)}\n--- b ---\n${b.output.join('').slice(-6000)}\n`);
    throw e;
  } finally {
    stopKiller = true;
    await a.kill();
    await b.kill();
    await cp.close();
    for (const s of [a.spec, b.spec]) if (existsSync(join(s.dir, 'state', 'compute_id'))) await deleteTree(api, rootOf(s)).catch(() => undefined);
  }
});
