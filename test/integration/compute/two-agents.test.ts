// Two agents (host-a, host-b) on one real Placement and one real RabbitMQ, driven by casts as a
// control plane would: 50 spawns; 10 cold migrations a -> b (5 confirmed, 5 reverted); 10 live
// migrations b -> a; an outside write to a consumer forced between the destination's read and its
// swap, and one before the prep; a delete before the destination's prep, and one after the move
// reached RESIZED; everything deleted. After every phase Placement holds exactly what the
// instances hold. Each ordering is forced, so each block has one outcome.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Daemon } from '../../../agent/daemon';
import { InterceptingTransport, agentSpec, rootOf, startDaemon, startDaemonVia, type AgentSpec } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { deleteTree, placementClient } from '../../helpers/placement';
import { FLAVOR, instanceArgs } from '../../helpers/instance-args';

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

/** An outside writer rewrites the consumer's allocations as they are: only its generation moves. */
async function bumpGeneration(consumer: string): Promise<void> {
  const c = await api.consumerAllocations(consumer);
  const allocations = Object.fromEntries(Object.entries(c.allocations).map(([rp, a]) => [rp, { resources: a.resources }]));
  await api.putAllocations(consumer, { allocations, project_id: c.project_id ?? 'p', user_id: c.user_id ?? 'u', consumer_generation: c.consumer_generation ?? null });
}

/** Waits until no record on either agent is in a task or holds a migration (a late cast landed). */
async function settled(agents: Array<{ daemon: Daemon }>): Promise<void> {
  const deadline = Date.now() + 10000;
  const busy = (): boolean => agents.some(({ daemon }) => (daemon.compute?.instances() ?? []).some((r) => r.task_state !== null || r.migration !== undefined));
  while (busy() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

test('spawn, migrate (cold confirm/revert, live), forced conflict and delete orders, delete: Placement always matches', async () => {
  const exchange = `test-compute-${randomUUID().slice(0, 8)}`;
  const a = agentSpec(`host-a-${exchange.slice(-8)}`, exchange);
  const b = agentSpec(`host-b-${exchange.slice(-8)}`, exchange);
  const cp = new ControlPlane(exchange);
  const agents: Array<{ spec: AgentSpec; daemon: Daemon }> = [];
  try {
    await cp.start();
    // b's Placement requests pass through an interceptor, to place an outside write exactly.
    const interceptB = new InterceptingTransport();
    agents.push({ spec: a, daemon: await startDaemon(a) }, { spec: b, daemon: await startDaemonVia(b, interceptB) });

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

    // An outside write to an instance's consumer forced between the destination's read of it and
    // its allocation swap: the swap meets a consumer-generation conflict and the move fails
    // cleanly (the migration holds nothing, the instance stays on a with its allocation).
    const victim = onA[20];
    if (!victim) throw new Error('fixture');
    const vuuid = String(victim.uuid);
    const stale = { uuid: randomUUID(), migration_type: 'migration', source_compute: a.host, dest_compute: b.host };
    let bumped = 0;
    interceptB.before = async (req) => {
      if (bumped > 0 || req.method !== 'POST' || !req.url.endsWith('/allocations') || !(req.body ?? '').includes(stale.uuid)) return;
      bumped++;
      await bumpGeneration(vuuid);
    };
    await cp.cast(b.host, 'prep_resize', { instance: victim, flavor: FLAVOR, migration: stale });
    await cp.waitFor('instance.resize_prep.error', [vuuid], 30000);
    interceptB.before = undefined;
    expect(bumped).toBe(1);
    expect((await api.consumerAllocations(stale.uuid)).allocations).toEqual({});
    expect(Object.keys((await api.consumerAllocations(vuuid)).allocations)).toEqual([rootOf(a)]);
    await expectConsistent(agents);

    // The same outside write landing before the prep: the destination reads the new generation
    // and the move goes through.
    const early = onA[22];
    if (!early) throw new Error('fixture');
    const euuid = String(early.uuid);
    const m1 = { uuid: randomUUID(), migration_type: 'migration', source_compute: a.host, dest_compute: b.host };
    await bumpGeneration(euuid);
    await cp.cast(b.host, 'prep_resize', { instance: early, flavor: FLAVOR, migration: m1 });
    await cp.waitFor('instance.resize_finish.end', [euuid]);
    await cp.cast(a.host, 'confirm_resize', { instance: { uuid: euuid }, migration: m1 });
    await cp.waitFor('instance.resize_confirm.end', [euuid]);
    await settled(agents);
    expect(Object.keys((await api.consumerAllocations(euuid)).allocations)).toEqual([rootOf(b)]);
    await expectConsistent(agents);

    // A delete that the source runs before the destination's prep: the prep finds no allocation
    // to move and fails; nothing is left anywhere.
    const gone = onA[21];
    if (!gone) throw new Error('fixture');
    const guuid = String(gone.uuid);
    const m2 = { uuid: randomUUID(), migration_type: 'migration', source_compute: a.host, dest_compute: b.host };
    await cp.cast(a.host, 'terminate_instance', { instance: { uuid: guuid } });
    await cp.waitFor('instance.delete.end', [guuid]);
    await cp.cast(b.host, 'prep_resize', { instance: gone, flavor: FLAVOR, migration: m2 });
    await cp.waitFor('instance.resize_prep.error', [guuid], 30000);
    await settled(agents);
    expect(agents[1]?.daemon.compute?.record(guuid)).toBeUndefined();
    expect((await api.consumerAllocations(guuid)).allocations).toEqual({});
    expect((await api.consumerAllocations(m2.uuid)).allocations).toEqual({});
    await expectConsistent(agents);

    // A delete that the source runs after the move reached RESIZED: the source copy and both
    // consumers go; the destination keeps the instance until it is deleted there too.
    const late = onA[23];
    if (!late) throw new Error('fixture');
    const luuid = String(late.uuid);
    const m3 = { uuid: randomUUID(), migration_type: 'migration', source_compute: a.host, dest_compute: b.host };
    await cp.cast(b.host, 'prep_resize', { instance: late, flavor: FLAVOR, migration: m3 });
    await cp.waitFor('instance.resize_finish.end', [luuid]);
    await cp.cast(a.host, 'terminate_instance', { instance: { uuid: luuid } });
    await cp.waitFor('instance.delete.end', [luuid]);
    expect(agents[0]?.daemon.compute?.record(luuid)).toBeUndefined();
    expect(agents[1]?.daemon.compute?.record(luuid)?.vm_state).toBe('resized');
    await cp.cast(b.host, 'terminate_instance', { instance: { uuid: luuid } });
    await settled(agents);
    expect(agents[1]?.daemon.compute?.record(luuid)).toBeUndefined();
    expect((await api.consumerAllocations(luuid)).allocations).toEqual({});
    expect((await api.consumerAllocations(m3.uuid)).allocations).toEqual({});
    await expectConsistent(agents);

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
