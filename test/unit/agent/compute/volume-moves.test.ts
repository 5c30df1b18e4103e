// Volumes moving with the instance, in nova mode between two agents (in-process peers, a mocked
// Placement, one in-memory conductor and one in-memory Cinder shared by both hosts): cold
// migration confirmed and reverted, live migration done and rolled back, and a Cinder failure on
// either side. Each ends by reading Cinder's attachments (only the host that runs the guest holds
// a connected one; the others are deleted), nova's mappings and what the guest's driver was given.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '../../../../lib/logging/logger';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { CinderUnavailableError } from '../../../../agent/volume/errors';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import type { InstanceSpec } from '../../../../virt-drivers/types';
import { FakeCinder, fakeCinderClients, type FakeVolume } from '../../../helpers/fake-cinder';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, InProcessPeers, makeHost, type HarnessHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

const CTX = { request_id: 'req-vol-move', is_admin: true, auth_token: 'admin-token' };
const RES = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 1 };
const IP: Readonly<Record<string, string>> = { 'host-a': '192.0.2.1', 'host-b': '192.0.2.2' };

afterEach(() => nock.cleanAll());

/** Two agents, and an instance ACTIVE on host-a booted from volume `boot` (41, /dev/vda) with volume `data` (42, /dev/vdb). */
async function world() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const c = new FakeConductor();
  const cinder = new FakeCinder();
  const host = (name: string): Promise<HarnessHost> =>
    makeHost(name, api, peers, silentLogger(), new NovaControlPlane({ conductor: c, host: name, myIp: IP[name] ?? '', computeNodeId: () => 1, logger: silentLogger() }), {
      volumes: { cinder: fakeCinderClients(cinder), ip: IP[name] ?? '', allocateRetries: 0, allocateIntervalS: 0 },
    });
  const a = await host('host-a');
  const b = await host('host-b');
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  const boot = cinder.addVolume({ size: 1, imageRef: 'img' });
  const data = cinder.addVolume({ size: 2 });
  const mappings = [
    { id: 41, volume: boot, boot_index: 0 },
    { id: 42, volume: data, boot_index: null },
  ].map(({ id, volume, boot_index }) => {
    const row = { id, instance_uuid: uuid, source_type: 'volume', destination_type: 'volume', volume_id: volume.id, attachment_id: cinder.reserve(volume.id, uuid).id, boot_index, delete_on_termination: false, connection_info: null };
    c.bdms.set(id, { ...row });
    return c.prim('BlockDeviceMapping', row);
  });
  // image_ref '' as nova-api stores it for a server booted from a volume: no root disk is claimed, on the build or a move.
  const instance = c.instance({ uuid, project_id: 'p', user_id: 'u', image_ref: '', vm_state: 'building', task_state: 'scheduling', flavor: c.prim('Flavor', FLAVOR) });
  await peers.call(a.name, 'build_and_run_instance', { instance, block_device_mapping: c.prim('BlockDeviceMappingList', { objects: mappings }) }, CTX);
  expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  const built = attachments(cinder);
  expect(built.map((x) => x.host)).toEqual(['host-a', 'host-a']);
  // What each host's driver is handed for the guest: the destination of a move starts it from that.
  const specs: InstanceSpec[] = [];
  const finish = b.driver.finishMigration.bind(b.driver);
  b.driver.finishMigration = (spec, ...rest) => (specs.push(spec), finish(spec, ...rest));
  const pre = b.driver.preLiveMigration.bind(b.driver);
  b.driver.preLiveMigration = (spec, d) => (specs.push(spec), pre(spec, d));
  return { api, c, cinder, peers, a, b, uuid, boot, data, built, specs };
}
type World = Awaited<ReturnType<typeof world>>;

/** Cinder's attachments, one line each, the boot volume's first. */
function attachments(cinder: FakeCinder) {
  return [...cinder.attachments.values()]
    .map((x) => ({ id: x.id, volume: x.volume_id, host: x.connector?.host ?? null, ip: x.connector?.ip ?? null, mountpoint: x.connector?.mountpoint ?? null, status: x.status }))
    .sort((p, q) => (p.mountpoint ?? '').localeCompare(q.mountpoint ?? ''));
}

/** nova's mapping rows 41 and 42: attachment id and connection info (parsed). */
function bdmRows(w: World) {
  return [41, 42].map((id) => {
    const row = w.c.bdms.get(id) ?? {};
    return { attachment_id: row.attachment_id, connection_info: typeof row.connection_info === 'string' ? (JSON.parse(row.connection_info) as unknown) : null };
  });
}

/** Forgets the connection info in nova's rows, so that a test sees which host writes it next. */
function clearConnectionInfo(w: World): void {
  for (const row of w.c.bdms.values()) row.connection_info = null;
}

/** Everything ends in one state: each volume has one attachment, connected to `host` and attached, the ids nova's rows and the host's record hold. */
function connectedOnlyTo(w: World, host: HarnessHost, vols: FakeVolume[] = [w.boot, w.data]) {
  const now = attachments(w.cinder);
  expect(now).toEqual([
    { id: expect.any(String) as string, volume: vols[0]?.id, host: host.name, ip: IP[host.name], mountpoint: '/dev/vda', status: 'attached' },
    { id: expect.any(String) as string, volume: vols[1]?.id, host: host.name, ip: IP[host.name], mountpoint: '/dev/vdb', status: 'attached' },
  ]);
  for (const v of vols) expect(w.cinder.volumes.get(v.id)?.status).toBe('in-use');
  const ids = now.map((x) => x.id);
  const rec = host.manager.record(w.uuid);
  expect(rec?.block_devices?.map((d) => d.attachment_id)).toEqual(ids);
  expect(rec?.volumes?.map((v) => [v.volume_id, v.attachment_id, v.device_name])).toEqual([
    [vols[0]?.id, ids[0], '/dev/vda'],
    [vols[1]?.id, ids[1], '/dev/vdb'],
  ]);
  expect(rec?.volumes?.map((v) => v.connection_info)).toEqual(vols.map((v) => expect.objectContaining({ driver_volume_type: 'rbd', serial: v.id }) as unknown));
  expect(bdmRows(w)).toEqual(ids.map((id, k) => ({ attachment_id: id, connection_info: rec?.volumes?.[k]?.connection_info })));
  return ids;
}

/** nova's conductor before prep_resize / check_can_live_migrate_destination: the migration takes the source allocations, the scheduler claims host-b. */
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

const row = (w: World): Record<string, unknown> => w.c.instances.get(w.uuid) ?? {};
const migRow = (w: World, m: Record<string, unknown>): Record<string, unknown> => w.c.migrations.get(String((m['nova_object.data'] as { uuid: string }).uuid)) ?? {};

async function coldMigrated(w: World): Promise<Record<string, unknown>> {
  const mig = await conductorMove(w, 'migration', 'resize_prep');
  await w.peers.cast(w.b.name, 'prep_resize', { instance: w.c.instance(row(w)), flavor: w.c.prim('Flavor', FLAVOR), migration: mig, clean_shutdown: true }, CTX);
  await w.peers.settle();
  expect(w.peers.failures).toEqual([]);
  return mig;
}

async function liveMigrate(w: World): Promise<void> {
  const mig = await conductorMove(w, 'live-migration', 'migrating');
  const answer = await w.peers.call<Record<string, unknown>>(w.b.name, 'check_can_live_migrate_destination', { instance: w.c.instance(row(w)), block_migration: false, disk_over_commit: false, migration: mig, limits: null }, CTX);
  Object.assign(migRow(w, mig), { dest_compute: 'host-b' });
  await w.peers.cast(w.a.name, 'live_migration', { instance: w.c.instance(row(w)), dest: 'host-b', block_migration: false, migration: w.c.prim('Migration', migRow(w, mig)), migrate_data: answer }, CTX);
  await w.peers.settle();
  expect(w.peers.failures).toEqual([]);
}

describe('cold migration', () => {
  test('the source swaps each attachment for one with no connector; the destination connects those and gives them to the guest; confirm keeps them; delete there gives them back', async () => {
    const w = await world();
    clearConnectionInfo(w);
    const mig = await coldMigrated(w);
    expect(w.b.manager.record(w.uuid)).toMatchObject({ vm_state: 'resized', task_state: null });
    const ids = connectedOnlyTo(w, w.b);
    // The built attachments are deleted; the ones host-b connected are those host-a made without a connector.
    expect(ids.some((id) => w.built.some((x) => x.id === id))).toBe(false);
    expect(w.a.manager.record(w.uuid)?.block_devices?.map((d) => d.attachment_id)).toEqual(ids);
    expect(w.a.manager.record(w.uuid)?.volumes).toEqual([]);
    expect(w.cinder.calls.filter((x) => x.startsWith('POST attachment'))).toHaveLength(2);
    // The guest on host-b was started with host-b's connections, the boot volume first.
    expect(w.specs).toHaveLength(1);
    expect(w.specs[0]?.volumes?.map((v) => [v.volume_id, v.device_name, v.boot_index])).toEqual([
      [w.boot.id, '/dev/vda', 0],
      [w.data.id, '/dev/vdb', null],
    ]);
    expect(w.specs[0]?.volumes?.map((v) => v.connection_info)).toEqual(w.b.manager.record(w.uuid)?.volumes?.map((v) => v.connection_info));

    Object.assign(migRow(w, mig), { status: 'confirming' });
    await w.peers.cast(w.a.name, 'confirm_resize', { instance: w.c.instance(row(w)), migration: w.c.prim('Migration', migRow(w, mig)) }, CTX);
    await w.peers.settle();
    expect(w.peers.failures).toEqual([]);
    expect(w.a.manager.record(w.uuid)).toBeUndefined();
    expect(connectedOnlyTo(w, w.b)).toEqual(ids);
    await w.peers.call(w.b.name, 'terminate_instance', { instance: { uuid: w.uuid } }, CTX);
    expect(w.cinder.attachments.size).toBe(0);
    expect(w.cinder.volumes.get(w.data.id)?.status).toBe('available');
  });

  test('revert: the destination swaps them again and the source connects the new ones before its guest starts', async () => {
    const w = await world();
    const mig = await coldMigrated(w);
    const atDest = attachments(w.cinder).map((x) => x.id);
    clearConnectionInfo(w);
    Object.assign(migRow(w, mig), { status: 'reverting' });
    Object.assign(row(w), { task_state: 'resize_reverting' });
    await w.peers.cast(w.b.name, 'revert_resize', { instance: w.c.instance(row(w)), migration: w.c.prim('Migration', migRow(w, mig)) }, CTX);
    await w.peers.settle();
    expect(w.peers.failures).toEqual([]);
    expect(w.b.manager.record(w.uuid)).toBeUndefined();
    expect(w.a.manager.record(w.uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    const ids = connectedOnlyTo(w, w.a);
    expect(ids.some((id) => atDest.includes(id) || w.built.some((x) => x.id === id))).toBe(false);
    expect(w.cinder.calls.filter((x) => x.startsWith('POST attachment'))).toHaveLength(4); // two by each host
  });

  test("Cinder failing at the source after the power off fails the move there; the source's attachments are taken back", async () => {
    const w = await world();
    const firstBuilt = w.built[0]?.id ?? '';
    const del = w.cinder.deleteAttachment.bind(w.cinder);
    let refused = 0;
    w.cinder.deleteAttachment = (id) => (id === firstBuilt && refused++ === 0 ? Promise.reject(new CinderUnavailableError(`DELETE /v3/attachments/${id}`, 'connection reset')) : del(id));
    const mig = await coldMigrated(w);
    expect(refused).toBe(1);
    expect(migRow(w, mig).status).toBe('error');
    expect(w.a.manager.record(w.uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(w.a.manager.record(w.uuid)?.migration).toBeUndefined();
    expect(w.b.manager.record(w.uuid)).toBeUndefined();
    expect(row(w)).toMatchObject({ vm_state: 'active', task_state: null, host: 'host-a' });
    // The boot volume's replacement was deleted and its attachment kept; the data volume was not reached.
    expect(connectedOnlyTo(w, w.a)).toEqual(w.built.map((x) => x.id));
    expect(w.specs).toEqual([]);
  });

  test('Cinder failing at the destination: ERROR there with a fault naming the volume; the guest not started', async () => {
    const w = await world();
    const update = w.cinder.updateAttachment.bind(w.cinder);
    w.cinder.updateAttachment = (id, connector) => (connector.host === 'host-b' ? Promise.reject(new CinderUnavailableError(`PUT /v3/attachments/${id}`, 'connection refused')) : update(id, connector));
    await coldMigrated(w);
    const rec = w.b.manager.record(w.uuid);
    expect(rec).toMatchObject({ vm_state: 'error', task_state: null });
    expect(rec?.fault).toMatch(new RegExp(`^finish_migration failed: volume ${w.boot.id} could not be connected to host-b: PUT /v3/attachments/.*connection refused`));
    expect(w.specs).toEqual([]);
    // No host is connected: the attachments are the source's connector-less ones.
    expect(attachments(w.cinder).map((x) => [x.host, x.status])).toEqual([
      [null, 'reserved'],
      [null, 'reserved'],
    ]);
  });
});

describe('live migration', () => {
  test('the destination attaches with its own connector while the source keeps its attachments; after the move only the new ones remain, in nova’s mappings', async () => {
    const w = await world();
    let duringPre: ReturnType<typeof attachments> = [];
    const pre = w.b.driver.preLiveMigration.bind(w.b.driver);
    w.b.driver.preLiveMigration = (spec, d) => ((duringPre = attachments(w.cinder)), pre(spec, d));
    clearConnectionInfo(w);
    await liveMigrate(w);
    expect(duringPre).toHaveLength(4);
    expect(duringPre.filter((x) => x.host === 'host-b').map((x) => x.status)).toEqual(['attaching', 'attaching']);
    expect(w.a.manager.record(w.uuid)).toBeUndefined();
    expect(w.b.manager.record(w.uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(row(w)).toMatchObject({ host: 'host-b', task_state: null });
    const ids = connectedOnlyTo(w, w.b);
    expect(ids).toEqual(duringPre.filter((x) => x.host === 'host-b').map((x) => x.id));
    expect(w.specs[0]?.volumes?.map((v) => [v.volume_id, v.device_name, v.boot_index])).toEqual([
      [w.boot.id, '/dev/vda', 0],
      [w.data.id, '/dev/vdb', null],
    ]);
    expect(w.specs[0]?.volumes?.map((v) => v.connection_info)).toEqual(w.b.manager.record(w.uuid)?.volumes?.map((v) => v.connection_info));
  });

  test('rollback: the destination deletes the attachments it made; the source, its records and nova’s mappings keep theirs', async () => {
    const w = await world();
    const before = bdmRows(w);
    w.a.driver.faults.inject('liveMigration', { error: 'migration stream broke', times: 1 });
    await liveMigrate(w);
    expect(w.specs).toHaveLength(1);
    expect(w.b.manager.record(w.uuid)).toBeUndefined();
    expect(w.a.manager.record(w.uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(connectedOnlyTo(w, w.a)).toEqual(w.built.map((x) => x.id));
    expect(bdmRows(w)).toEqual(before);
  });

  test('pre_live_migration asked again (the source retrying after a restart) makes no second attachment; the rollback deletes the one made', async () => {
    const w = await world();
    const mig = await conductorMove(w, 'live-migration', 'migrating');
    const answer = await w.peers.call(w.b.name, 'check_can_live_migrate_destination', { instance: w.c.instance(row(w)), migration: mig }, CTX);
    const bdms = w.a.manager.record(w.uuid)?.block_devices;
    const args = { instance: { uuid: w.uuid }, migrate_data: answer, bdms };
    await w.peers.call(w.b.name, 'pre_live_migration', args, CTX);
    await w.peers.call(w.b.name, 'pre_live_migration', args, CTX);
    expect(w.cinder.calls.filter((x) => x.startsWith('POST attachment'))).toHaveLength(2);
    expect(attachments(w.cinder).filter((x) => x.host === 'host-b')).toHaveLength(2);
    expect(w.b.manager.record(w.uuid)?.migration?.old_attachment_ids).toEqual({ [w.boot.id]: w.built[0]?.id, [w.data.id]: w.built[1]?.id });
    await w.peers.call(w.b.name, 'rollback_live_migration_at_destination', { instance: { uuid: w.uuid }, migrate_data: {} }, CTX);
    expect(attachments(w.cinder).map((x) => x.id)).toEqual(w.built.map((x) => x.id));
  });
});
