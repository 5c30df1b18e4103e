// Fault injection: two agent processes run spawns, cold migrations (confirmed and reverted), live
// migrations and deletes while one of them is killed with SIGKILL at random moments, 20 times,
// and restarted each time. At the end the invariants of test/helpers/invariants.ts hold: every
// instance rests on the host its operations put it on (a live migration on either host: it may
// roll back), holding exactly its flavor there; no migration consumer holds anything; each
// provider's usages are the sum of its allocations; and once everything is deleted and the agents
// stopped, no journal holds a request left unfinished.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AgentProcess, agentSpec, rootOf } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { FLAVOR, instanceArgs } from '../../helpers/instance-args';
import { hostProblems, instanceProblems, pendingRequests, type CheckedHost, type InstanceExpectation } from '../../helpers/invariants';
import { deleteTree, placementClient } from '../../helpers/placement';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(600000);

const api = placementClient();

interface Row {
  uuid: string;
  vm_state: string;
  task_state: string | null;
}

test('SIGKILL at 20 random points during spawn, migrate and delete flows: invariants hold at the end', async () => {
  const exchange = `test-kill-${randomUUID().slice(0, 8)}`;
  const a = new AgentProcess(agentSpec(`kill-a-${exchange.slice(-8)}`, exchange));
  const b = new AgentProcess(agentSpec(`kill-b-${exchange.slice(-8)}`, exchange));
  const cp = new ControlPlane(exchange);
  let kills = 0;
  let stopKiller = false;
  const list = async (agent: AgentProcess): Promise<Map<string, Row>> => {
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

    // The invariants at the stable point, for every instance and both hosts.
    const hosts: CheckedHost[] = [a, b].map((x) => ({ host: x.spec.host, root: rootOf(x.spec), list: () => list(x) }));
    const [ha, hb] = [a.spec.host, b.spec.host];
    const confirmed = new Set(cold.slice(0, 3).map((c) => String(c.inst.uuid)));
    const wants: InstanceExpectation[] = [
      ...cold.map((c) => ({ uuid: String(c.inst.uuid), flavor: FLAVOR, hosts: [confirmed.has(String(c.inst.uuid)) ? hb : ha], migrations: [c.mig.uuid] })),
      ...onA.slice(6).map((i) => ({ uuid: String(i.uuid), flavor: FLAVOR, hosts: [ha] })),
      ...live.map((l) => ({ uuid: String(l.inst.uuid), flavor: FLAVOR, hosts: [ha, hb], migrations: [l.mig.uuid] })),
      ...onB.slice(4).map((i) => ({ uuid: String(i.uuid), flavor: FLAVOR, hosts: [hb] })),
    ];
    expect(wants).toHaveLength(20);
    const problems: string[] = [];
    for (const want of wants) problems.push(...(await instanceProblems(api, hosts, want)));
    problems.push(...(await hostProblems(api, hosts)));
    expect(problems).toEqual([]);

    // Delete everything; zero allocations remain, and no journal holds an unfinished request.
    const [la, lb] = [await list(a), await list(b)];
    for (const uuid of la.keys()) await cp.cast(a.spec.host, 'terminate_instance', { instance: { uuid } });
    for (const uuid of lb.keys()) await cp.cast(b.spec.host, 'terminate_instance', { instance: { uuid } });
    await waitUntil('all deleted', async () => (await list(a)).size === 0 && (await list(b)).size === 0);
    await waitUntil('every removal is done', async () => (await Promise.all([a, b].map(async (x) => Object.keys((await api.providerAllocations(rootOf(x.spec))).allocations).length))).every((n) => n === 0), 30000);
    for (const want of wants) expect(await instanceProblems(api, hosts, { ...want, hosts: [] })).toEqual([]);
    expect(await hostProblems(api, hosts)).toEqual([]);
    for (const spec of [a.spec, b.spec]) expect((await api.providerAllocations(rootOf(spec))).allocations).toEqual({});
    await a.kill(true);
    await b.kill(true);
    for (const spec of [a.spec, b.spec]) expect(await pendingRequests(join(spec.dir, 'state'))).toEqual([]);
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
