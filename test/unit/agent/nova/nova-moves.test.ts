// Cold and live migration in nova mode between two agents (in-process peers, mocked Placement,
// one in-memory conductor with nova's rules). The test plays nova's part exactly where nova plays
// it: the conductor moves the source allocations to the migration and the scheduler claims the
// destination before prep_resize / check_can_live_migrate_destination; the API marks confirm and
// revert. Everything else (the saves, the host change, the migration statuses, the allocation
// moves back or away) must come from the agents.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, InProcessPeers, makeHost, type HarnessHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';
import { EPOXY, ZED, type NovaRelease } from '../../../../agent/nova/releases';

const CTX = { request_id: 'req-move', is_admin: true };
const RES = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 };
const prim = (name: string, data: object): Record<string, unknown> => ({ 'nova_object.name': name, 'nova_object.namespace': 'nova', 'nova_object.version': '1.0', 'nova_object.data': data, 'nova_object.changes': [] });

afterEach(() => nock.cleanAll());

interface World {
  c: FakeConductor;
  api: PlacementClient;
  mock: MockPlacement;
  a: HarnessHost;
  b: HarnessHost;
  peers: InProcessPeers;
  uuid: string;
}

/** nova's ComputeNode ids of the two hosts. */
const NODE_ID: Readonly<Record<string, number>> = { 'host-a': 101, 'host-b': 202 };

/** Two agents and one instance ACTIVE on host-a, built through nova mode under `release`'s conductor. */
async function world(release: NovaRelease): Promise<World> {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const c = new FakeConductor({ release });
  const cp = (host: string): NovaControlPlane => new NovaControlPlane({ conductor: c, host, myIp: host === 'host-a' ? '192.0.2.1' : '192.0.2.2', computeNodeId: () => NODE_ID[host], logger: silentLogger() });
  const a = await makeHost('host-a', api, peers, silentLogger(), cp('host-a'));
  const b = await makeHost('host-b', api, peers, silentLogger(), cp('host-b'));
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  await peers.call(a.name, 'build_and_run_instance', { instance: c.instance({ uuid, project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', flavor: prim('Flavor', FLAVOR) }) }, CTX);
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', host: 'host-a' });
  return { c, api, mock, a, b, peers, uuid };
}

/** nova's conductor: the migration takes the source allocations, the scheduler claims the destination. */
async function conductorMove(w: World, type: 'migration' | 'live-migration', taskState: string): Promise<Record<string, unknown>> {
  const mig = randomUUID();
  const gen = (await w.api.consumerAllocations(w.uuid)).consumer_generation ?? null;
  await w.api.postAllocations({
    [mig]: { allocations: { [w.a.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null },
    [w.uuid]: { allocations: { [w.b.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: gen },
  });
  Object.assign(w.c.instances.get(w.uuid) ?? {}, { task_state: taskState });
  return w.c.migration({ uuid: mig, instance_uuid: w.uuid, source_compute: 'host-a', dest_compute: null, migration_type: type, status: type === 'migration' ? 'pre-migrating' : 'accepted' });
}

/** The Migration id of an Instance row's migration_context (as nova-api reads it to route events). */
const migrationId = (r: Record<string, unknown>): unknown => ((r.migration_context as { 'nova_object.data'?: { migration_id?: unknown } } | null)?.['nova_object.data'])?.migration_id;
const row = (w: World): Record<string, unknown> => w.c.instances.get(w.uuid) ?? {};
const migRow = (w: World, m: Record<string, unknown>): Record<string, unknown> => w.c.migrations.get(String((m['nova_object.data'] as { uuid: string }).uuid)) ?? {};
const allocs = async (w: World, consumer: string): Promise<Record<string, unknown>> => Object.fromEntries(Object.entries((await w.api.consumerAllocations(consumer)).allocations).map(([rp, v]) => [rp, v.resources]));

/** The node ids nova 2023.2+ keeps beside host and node: Instance.compute_id, Migration.dest_compute_id (absent before, on Zed's objects). */
function nodeIds(w: World, release: NovaRelease, host: string, m?: Record<string, unknown>): void {
  if (release === ZED) {
    expect('compute_id' in row(w)).toBe(false);
    if (m) expect('dest_compute_id' in migRow(w, m)).toBe(false);
    return;
  }
  expect(row(w).compute_id).toBe(NODE_ID[host]);
  if (m) expect(migRow(w, m).dest_compute_id).toBe(NODE_ID['host-b']);
}

describe.each([{ release: ZED }, { release: EPOXY }])('nova $release.name', ({ release }) => {
  test('cold migration confirmed: the source hands the instance to the destination; RESIZED there, then ACTIVE; the migration consumer emptied', async () => {
    const w = await world(release);
    const mig = await conductorMove(w, 'migration', 'resize_prep');
    await w.peers.cast(w.b.name, 'prep_resize', { instance: w.c.instance(row(w)), flavor: prim('Flavor', FLAVOR), migration: mig, clean_shutdown: true }, CTX);
    await w.peers.settle();
    expect(w.peers.failures).toEqual([]);
    expect(row(w)).toMatchObject({ vm_state: 'resized', task_state: null, host: 'host-b', node: 'host-b', new_flavor: expect.anything() as unknown, old_flavor: expect.anything() as unknown });
    expect(migRow(w, mig)).toMatchObject({ status: 'finished', dest_compute: 'host-b' });
    expect(migRow(w, mig).dest_host).toBe('192.0.2.2');
    nodeIds(w, release, 'host-b', mig);
    expect(await allocs(w, w.uuid)).toEqual({ [w.b.rootUuid]: RES });
    // nova-api sends the instance's events to its migration context's hosts too (a revert's source waits for some).
    expect(migrationId(row(w))).toBe(migRow(w, mig).id);

    // nova-api: migration confirming, cast to the source.
    Object.assign(migRow(w, mig), { status: 'confirming' });
    await w.peers.cast(w.a.name, 'confirm_resize', { instance: w.c.instance(row(w)), migration: prim('Migration', migRow(w, mig)) }, CTX);
    await w.peers.settle();
    expect(row(w)).toMatchObject({ vm_state: 'active', task_state: null, host: 'host-b', old_flavor: null, new_flavor: null, migration_context: null });
    expect(migRow(w, mig).status).toBe('confirmed');
    expect(await allocs(w, String(migRow(w, mig).uuid))).toEqual({});
    expect(w.a.manager.record(w.uuid)).toBeUndefined();
    expect(w.b.manager.record(w.uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  });

  test('cold migration reverted: ACTIVE on the source again, the allocations moved back in one write', async () => {
    const w = await world(release);
    const mig = await conductorMove(w, 'migration', 'resize_prep');
    await w.peers.cast(w.b.name, 'prep_resize', { instance: w.c.instance(row(w)), flavor: prim('Flavor', FLAVOR), migration: mig, clean_shutdown: true }, CTX);
    await w.peers.settle();
    // nova-api: migration reverting, task_state resize_reverting, cast to the destination.
    Object.assign(migRow(w, mig), { status: 'reverting' });
    Object.assign(row(w), { task_state: 'resize_reverting' });
    await w.peers.cast(w.b.name, 'revert_resize', { instance: w.c.instance(row(w)), migration: prim('Migration', migRow(w, mig)) }, CTX);
    await w.peers.settle();
    expect(w.peers.failures).toEqual([]);
    expect(row(w)).toMatchObject({ vm_state: 'active', task_state: null, host: 'host-a', node: 'host-a', migration_context: null });
    nodeIds(w, release, 'host-a', mig);
    expect(migRow(w, mig).status).toBe('reverted');
    expect(await allocs(w, w.uuid)).toEqual({ [w.a.rootUuid]: RES });
    expect(await allocs(w, String(migRow(w, mig).uuid))).toEqual({});
    expect(w.b.manager.record(w.uuid)).toBeUndefined();
  });

  test("resize to a bigger flavor: at finish_resize the Instance takes the new flavor and its sizes, the old kept as old_flavor; revert gives the old ones back", async () => {
    const w = await world(release);
    const BIG = { ...FLAVOR, id: 7, name: 'm1.large', vcpus: 4, memory_mb: 4096 };
    const BIG_RES = { VCPU: 4, MEMORY_MB: 4096, DISK_GB: 11 };
    const mig = randomUUID();
    const gen = (await w.api.consumerAllocations(w.uuid)).consumer_generation ?? null;
    await w.api.postAllocations({
      [mig]: { allocations: { [w.a.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null },
      [w.uuid]: { allocations: { [w.b.rootUuid]: { resources: BIG_RES } }, project_id: 'p', user_id: 'u', consumer_generation: gen },
    });
    Object.assign(row(w), { task_state: 'resize_prep' });
    const m = w.c.migration({ uuid: mig, instance_uuid: w.uuid, source_compute: 'host-a', dest_compute: null, migration_type: 'resize', status: 'pre-migrating' });
    await w.peers.cast(w.b.name, 'prep_resize', { instance: w.c.instance(row(w)), flavor: prim('Flavor', BIG), migration: m, clean_shutdown: true }, CTX);
    await w.peers.settle();
    expect(w.peers.failures).toEqual([]);
    const flavorData = (f: unknown): unknown => (f as Record<string, unknown>)['nova_object.data'];
    expect(row(w)).toMatchObject({ vm_state: 'resized', host: 'host-b', vcpus: 4, memory_mb: 4096, instance_type_id: 7 });
    expect(flavorData(row(w).flavor)).toMatchObject({ name: 'm1.large', vcpus: 4 });
    expect(flavorData(row(w).old_flavor)).toMatchObject({ name: 'm1.small', vcpus: 2 });
    expect(await allocs(w, w.uuid)).toEqual({ [w.b.rootUuid]: BIG_RES });

    Object.assign(migRow(w, m), { status: 'reverting' });
    Object.assign(row(w), { task_state: 'resize_reverting' });
    await w.peers.cast(w.b.name, 'revert_resize', { instance: w.c.instance(row(w)), migration: prim('Migration', migRow(w, m)) }, CTX);
    await w.peers.settle();
    expect(w.peers.failures).toEqual([]);
    expect(row(w)).toMatchObject({ vm_state: 'active', task_state: null, host: 'host-a', vcpus: 2, memory_mb: 2048, old_flavor: null, new_flavor: null });
    expect(flavorData(row(w).flavor)).toMatchObject({ name: 'm1.small', vcpus: 2 });
    expect(await allocs(w, w.uuid)).toEqual({ [w.a.rootUuid]: RES });
  });

  test('live migration: checks answered, the destination takes the instance, the migration completed and its consumer emptied', async () => {
    const w = await world(release);
    const mig = await conductorMove(w, 'live-migration', 'migrating');
    const answer = await w.peers.call<Record<string, unknown>>(w.b.name, 'check_can_live_migrate_destination', { instance: w.c.instance(row(w)), block_migration: false, disk_over_commit: false, migration: mig, limits: null }, CTX);
    // What nova's conductor reads: a LibvirtLiveMigrateData of its release, with `vifs` (none here)
    // and only fields of that class (the fake driver's `source_host` is not one).
    expect(answer['nova_object.name']).toBe('LibvirtLiveMigrateData');
    expect(answer['nova_object.version']).toBe(w.c.objectVersions.LibvirtLiveMigrateData);
    expect(answer['nova_object.data']).toEqual({ block_migration: false, vifs: [] });
    Object.assign(migRow(w, mig), { dest_compute: 'host-b' });
    await w.peers.cast(w.a.name, 'live_migration', { instance: w.c.instance(row(w)), dest: 'host-b', block_migration: false, migration: prim('Migration', migRow(w, mig)), migrate_data: answer }, CTX);
    await w.peers.settle();
    expect(w.peers.failures).toEqual([]);
    expect(row(w)).toMatchObject({ vm_state: 'active', task_state: null, host: 'host-b', node: 'host-b', power_state: 1 });
    nodeIds(w, release, 'host-b', mig);
    expect(migRow(w, mig)).toMatchObject({ dest_compute: 'host-b', dest_node: 'host-b', dest_host: '192.0.2.2', status: 'completed' });
    expect(migRow(w, mig).status).toBe('completed');
    expect(await allocs(w, w.uuid)).toEqual({ [w.b.rootUuid]: RES });
    expect(await allocs(w, String(migRow(w, mig).uuid))).toEqual({});
    expect(w.c.names((x) => x.kind === 'fanout').slice(-2)).toEqual(['update_instance_info', 'delete_instance_info']);
  });
});
