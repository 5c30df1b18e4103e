// Two agents (host-a, host-b) on one real Placement and one real RabbitMQ, driven by casts as a
// control plane would: 50 spawns; 10 cold migrations a -> b (5 confirmed, 5 reverted); 10 live
// migrations b -> a; a conflicting outside write during a move; a resize and a delete sent
// together; everything deleted. After every phase Placement holds exactly what the instances hold.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Daemon } from '../../../agent/daemon';
import { agentSpec, rootOf, startDaemon, type AgentSpec } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { deleteTree, placementClient } from '../../helpers/placement';
import { FLAVOR, instanceArgs } from '../../helpers/compute-harness';

jest.setTimeout(300000);

const api = placementClient();

/** Every consumer on the agents' providers is a known instance, and holds exactly what it should. */
async function expectConsistent(agents: Array<{ spec: AgentSpec; daemon: Daemon }>): Promise<void> {
  const expected = new Map<string, Record<string, Record<string, number>>>();
  for (const { daemon } of agents) {
    for (const rec of daemon.compute?.instances() ?? []) {
      expect(rec.migration).toBeUndefined();
      expect(rec.task_state).toBeNull();
      expected.set(rec.uuid, rec.allocations);
    }
  }
  const seen = new Map<string, Record<string, Record<string, number>>>();
  for (const { spec } of agents) {
    const on = await api.providerAllocations(rootOf(spec));
    for (const [c, v] of Object.entries(on.allocations)) seen.set(c, { ...(seen.get(c) ?? {}), [rootOf(spec)]: v.resources });
  }
  expect(new Set(seen.keys())).toEqual(new Set(expected.keys()));
  for (const [c, allocs] of expected) expect(seen.get(c)).toEqual(allocs);
}

test('spawn, migrate (cold confirm/revert, live), conflict, serialized resize+delete, delete: Placement always matches', async () => {
  const exchange = `test-compute-${randomUUID().slice(0, 8)}`;
  const a = agentSpec(`host-a-${exchange.slice(-8)}`, exchange);
  const b = agentSpec(`host-b-${exchange.slice(-8)}`, exchange);
  const cp = new ControlPlane(exchange);
  const agents: Array<{ spec: AgentSpec; daemon: Daemon }> = [];
  try {
    await cp.start();
    agents.push({ spec: a, daemon: await startDaemon(a) }, { spec: b, daemon: await startDaemon(b) });

    // 50 spawns by cast: 30 on a, 20 on b.
    const onA = Array.from({ length: 30 }, () => instanceArgs());
    const onB = Array.from({ length: 20 }, () => instanceArgs());
    await Promise.all([...onA.map((i) => cp.cast(a.host, 'build_and_run_instance', { instance: i })), ...onB.map((i) => cp.cast(b.host, 'build_and_run_instance', { instance: i }))]);
    await cp.waitFor('instance.create.end', [...onA, ...onB].map((i) => String(i.uuid)));
    await expectConsistent(agents);

    // 10 cold migrations a -> b; 5 confirmed, 5 reverted.
    const cold = onA.slice(0, 10).map((inst) => ({ inst, mig: { uuid: randomUUID(), migration_type: 'migration', source_compute: a.host, dest_compute: b.host } }));
    await Promise.all(cold.map(({ inst, mig }) => cp.cast(b.host, 'prep_resize', { instance: inst, flavor: FLAVOR, migration: mig })));
    await cp.waitFor('instance.resize_finish.end', cold.map((c) => String(c.inst.uuid)));
    for (const { inst, mig } of cold) {
      const held = await api.consumerAllocations(mig.uuid);
      expect(Object.keys(held.allocations)).toEqual([rootOf(a)]);
      expect(Object.keys((await api.consumerAllocations(String(inst.uuid))).allocations)).toEqual([rootOf(b)]);
    }
    await Promise.all(cold.slice(0, 5).map(({ inst, mig }) => cp.cast(a.host, 'confirm_resize', { instance: { uuid: inst.uuid }, migration: mig })));
    await Promise.all(cold.slice(5).map(({ inst, mig }) => cp.cast(b.host, 'revert_resize', { instance: { uuid: inst.uuid }, migration: mig })));
    await cp.waitFor('instance.resize_confirm.end', cold.slice(0, 5).map((c) => String(c.inst.uuid)));
    await cp.waitFor('instance.resize_revert.end', cold.slice(5).map((c) => String(c.inst.uuid)));
    await new Promise((r) => setTimeout(r, 300)); // confirm_resize_at_destination settles on b
    await expectConsistent(agents);
    for (const { mig } of cold) expect((await api.consumerAllocations(mig.uuid)).allocations).toEqual({});

    // 10 live migrations b -> a.
    const live = onB.slice(0, 10).map((inst) => ({ inst, mig: { uuid: randomUUID(), migration_type: 'live-migration', source_compute: b.host, dest_compute: a.host } }));
    for (const { inst, mig } of live) {
      const data = await cp.call<Record<string, unknown>>(a.host, 'check_can_live_migrate_destination', { instance: inst, migration: mig, block_migration: false, disk_over_commit: false });
      await cp.cast(b.host, 'live_migration', { instance: { uuid: inst.uuid }, dest: a.host, migration: mig, migrate_data: data, block_migration: false });
    }
    await cp.waitFor('instance.live_migration_post.end', live.map((l) => String(l.inst.uuid)));
    await expectConsistent(agents);

    // A conflicting outside write to an instance's consumer during a migration fails it cleanly.
    const victim = onA[20];
    if (!victim) throw new Error('fixture');
    const vuuid = String(victim.uuid);
    const cur = await api.consumerAllocations(vuuid);
    // The outside writer bumps the consumer generation right before the destination's prep.
    await api.putAllocations(vuuid, { allocations: cur.allocations, project_id: cur.project_id ?? 'p', user_id: cur.user_id ?? 'u', consumer_generation: cur.consumer_generation ?? null });
    const stale = { uuid: randomUUID(), migration_type: 'migration', source_compute: a.host, dest_compute: b.host };
    // Race the outside write against the prep: retry the outside write while the prep runs.
    const racing = (async () => {
      for (let i = 0; i < 30; i++) {
        const c = await api.consumerAllocations(vuuid);
        await api.putAllocations(vuuid, { allocations: c.allocations, project_id: c.project_id ?? 'p', user_id: c.user_id ?? 'u', consumer_generation: c.consumer_generation ?? null }).catch(() => undefined);
      }
    })();
    await cp.cast(b.host, 'prep_resize', { instance: victim, flavor: FLAVOR, migration: stale });
    await racing;
    await new Promise((r) => setTimeout(r, 1500));
    const outcome = cp.events.filter((e) => e.uuid === vuuid && e.event_type.startsWith('instance.resize'));
    if (outcome.some((e) => e.event_type === 'instance.resize_prep.error')) {
      // Failed cleanly: nothing held by the migration, the instance still on a.
      expect((await api.consumerAllocations(stale.uuid)).allocations).toEqual({});
      expect(Object.keys((await api.consumerAllocations(vuuid)).allocations)).toEqual([rootOf(a)]);
    } else {
      // The prep won the race: finish the move so the state is stable again.
      await cp.waitFor('instance.resize_finish.end', [vuuid]);
      await cp.cast(a.host, 'confirm_resize', { instance: { uuid: vuuid }, migration: stale });
      await cp.waitFor('instance.resize_confirm.end', [vuuid]);
      await new Promise((r) => setTimeout(r, 300));
    }
    await expectConsistent(agents);

    // A resize and a delete of one instance sent together are serialized; the end is consistent.
    const both = onA[21];
    if (!both) throw new Error('fixture');
    const m2 = { uuid: randomUUID(), migration_type: 'migration', source_compute: a.host, dest_compute: b.host };
    await Promise.all([cp.cast(b.host, 'prep_resize', { instance: both, flavor: FLAVOR, migration: m2 }), cp.cast(a.host, 'terminate_instance', { instance: { uuid: both.uuid } })]);
    await cp.waitFor('instance.delete.end', [String(both.uuid)]);
    await new Promise((r) => setTimeout(r, 1500));
    const leftOnB = agents[1]?.daemon.compute?.record(String(both.uuid));
    if (leftOnB) await cp.cast(b.host, 'terminate_instance', { instance: { uuid: both.uuid } });
    await new Promise((r) => setTimeout(r, 500));
    expect((await api.consumerAllocations(m2.uuid)).allocations).toEqual({});

    // Delete everything, wherever it lives now.
    const everything = agents.flatMap(({ spec, daemon }) => (daemon.compute?.instances() ?? []).map((r) => ({ host: spec.host, uuid: r.uuid })));
    await Promise.all(everything.map((x) => cp.cast(x.host, 'terminate_instance', { instance: { uuid: x.uuid } })));
    await cp.waitFor('instance.delete.end', everything.map((x) => x.uuid));
    for (const { spec } of agents) expect((await api.providerAllocations(rootOf(spec))).allocations).toEqual({});
    for (const { daemon } of agents) expect(daemon.compute?.instances()).toEqual([]);
  } finally {
    for (const { daemon } of agents) await daemon.stop('test end');
    await cp.close();
    for (const s of [a, b]) if (existsSync(join(s.dir, 'state', 'compute_id'))) await deleteTree(api, rootOf(s)).catch(() => undefined);
  }
});
