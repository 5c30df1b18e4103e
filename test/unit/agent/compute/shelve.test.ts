// shelve, offload and unshelve in nova mode between two agents (fake drivers, mocked Placement,
// one in-memory conductor with nova's rules, Glance's writes recorded). The test plays nova's
// part where nova plays it: the API sets the task state and makes the image; the conductor's
// scheduler claims the unshelve's host. Everything else must come from the agents: the snapshot
// in Glance, SHELVED_OFFLOADED on no host with the shelved_* system metadata, nothing left on the
// first host (guest, record, allocation), and an unshelve on the other host from that image.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { silentLogger } from '../../../../lib/logging/logger';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, InProcessPeers, makeHost, type HarnessHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';
import { RecordingGlance } from '../../../helpers/recording-glance';
import { FakeCinder, fakeCinderClients } from '../../../helpers/fake-cinder';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-shelve', is_admin: true };
const RES = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 };

async function world(shelvedOffloadTimeS = 0, now: () => number = Date.now) {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const c = new FakeConductor();
  const glance = new RecordingGlance();
  const cinder = new FakeCinder();
  const host = (name: string, id: number): Promise<HarnessHost> =>
    makeHost(name, api, peers, silentLogger(), new NovaControlPlane({ conductor: c, host: name, myIp: '192.0.2.1', computeNodeId: () => id, logger: silentLogger() }), {
      images: glance,
      shelvedOffloadTimeS,
      now,
      volumes: { cinder: fakeCinderClients(cinder), ip: '192.0.2.10', allocateRetries: 1, allocateIntervalS: 0 },
    });
  const a = await host('host-a', 1);
  const b = await host('host-b', 2);
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  await peers.call(a.name, 'build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', image_ref: 'base-image', flavor: { ...FLAVOR } }) }, CTX);
  /** nova's API: the task state set, then the cast with the Instance as it now is. */
  const cast = async (on: HarnessHost, method: string, task: string, args: Record<string, unknown> = {}): Promise<void> => {
    const row = c.instances.get(uuid)!;
    row.task_state = task;
    await peers.call(on.name, method, { instance: c.prim('Instance', row), ...args }, CTX);
  };
  return { c, api, mock, glance, cinder, peers, a, b, uuid, cast };
}

test('shelve: snapshot in Glance, SHELVED_OFFLOADED on no host with the shelved image in system_metadata; nothing left on the host', async () => {
  const { c, mock, glance, a, uuid, cast } = await world();
  c.calls.length = 0;
  await cast(a, 'shelve_instance', 'shelving', { image_id: 'shelved-1', clean_shutdown: true });
  expect(glance.calls).toEqual(['patch shelved-1', expect.stringMatching(/^upload shelved-1 \d+$/)]);
  expect(glance.data.get('shelved-1')).toMatch(/, shutdown\n$/); // copied after the power off
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'shelved_offloaded', task_state: null, power_state: 4, host: null, node: null });
  expect(c.instances.get(uuid)?.system_metadata).toMatchObject({ shelved_image_id: 'shelved-1', shelved_host: 'host-a' });
  const saves = c.calls.filter((x) => x.what === 'Instance.save').map((x) => [x.changes, x.kwargs?.expected_task_state]);
  expect(saves).toEqual([
    [['task_state'], ['shelving', 'shelving_image_pending_upload', 'shelving_image_uploading']],
    [['task_state'], ['shelving_image_pending_upload', 'shelving_image_uploading']],
    [['system_metadata', 'vm_state', 'task_state', 'power_state'], ['shelving', 'shelving_image_uploading']],
    [['power_state', 'vm_state', 'task_state'], ['shelving', 'shelving_offloading']],
    [['host', 'node', 'launched_on'], [null]],
  ]);
  expect(c.names((x) => x.what.startsWith('InstanceActionEvent') || x.kind === 'fanout')).toEqual(['InstanceActionEvent.event_start', 'delete_instance_info', 'InstanceActionEvent.event_finish_with_failure']);
  expect(a.manager.record(uuid)).toBeUndefined();
  expect(await a.driver.listInstances()).toEqual([]);
  expect(mock.consumers.has(uuid)).toBe(false);
  expect(a.manager.removals.pending()).toEqual([]);
});

test('unshelve on the host the scheduler picked: claim verified, spawned from the shelved image, ACTIVE there, shelved keys gone, image deleted', async () => {
  const { c, api, glance, a, b, uuid, cast } = await world();
  await cast(a, 'shelve_instance', 'shelving', { image_id: 'shelved-2' });
  await api.putAllocations(uuid, { allocations: { [b.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  c.calls.length = 0;
  await cast(b, 'unshelve_instance', 'unshelving', { image: { id: 'shelved-2', name: 'vm-shelved' }, filter_properties: {}, node: 'host-b', request_spec: null });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1, host: 'host-b', node: 'host-b' });
  expect(Object.keys(c.instances.get(uuid)?.system_metadata as object)).not.toContain('shelved_image_id');
  expect(b.manager.record(uuid)).toMatchObject({ vm_state: 'active', image_ref: 'base-image' });
  expect(b.driver.hypervisor.find(uuid)?.powerState).toBe('RUNNING');
  expect(glance.calls.at(-1)).toBe('delete shelved-2');
  expect(c.names((x) => x.what.startsWith('InstanceActionEvent') || x.kind === 'fanout')).toEqual(['InstanceActionEvent.event_start', 'update_instance_info', 'InstanceActionEvent.event_finish_with_failure']);
});

test('a shelve whose upload fails: the image deleted, the task cleared with the fault, the guest running again on its host', async () => {
  const { c, glance, a, uuid, cast } = await world();
  glance.failUpload = new Error('Glance is full');
  await cast(a, 'shelve_instance', 'shelving', { image_id: 'shelved-3' });
  expect(glance.calls.at(-1)).toBe('delete shelved-3');
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, host: 'host-a' });
  expect(c.faults.map((f) => f.message)).toEqual(['shelve failed: Glance is full']);
  expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('RUNNING');
});

test('an unshelve whose spawn fails: SHELVED_OFFLOADED on no host again with the fault, nothing left on the host', async () => {
  const { c, api, mock, a, b, uuid, cast } = await world();
  await cast(a, 'shelve_instance', 'shelving', { image_id: 'shelved-4' });
  await api.putAllocations(uuid, { allocations: { [b.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  b.driver.faults.inject('spawn', { error: new Error('no room'), times: 1 });
  await cast(b, 'unshelve_instance', 'unshelving', { image: { id: 'shelved-4' } });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'shelved_offloaded', task_state: null, host: null });
  expect(c.faults.at(-1)?.message).toMatch(/unshelve failed: .*no room/);
  expect(b.manager.record(uuid)).toBeUndefined();
  expect(mock.consumers.has(uuid)).toBe(false);
});

test('volumes: shelved, each disconnected but kept reserved (a new attachment without a connector, the old deleted, nova’s row moved to it); one attached while offloaded; unshelved, both connected on the new host past the root disk', async () => {
  const { c, api, cinder, peers, a, b, uuid, cast } = await world();
  // Attached while the server ran on host-a: nova-api's row and attachment, then the cast.
  const first = cinder.addVolume({ status: 'available' });
  const att1 = cinder.reserve(first.id, uuid);
  c.bdms.set(501, { id: 501, instance_uuid: uuid, source_type: 'volume', destination_type: 'volume', volume_id: first.id, attachment_id: att1.id, device_name: '/dev/vdb', boot_index: null, delete_on_termination: false });
  const row = c.instances.get(uuid)!;
  await peers.call(a.name, 'attach_volume', { instance: c.prim('Instance', row), bdm: c.prim('BlockDeviceMapping', c.bdms.get(501)!) }, CTX);
  expect(Object.keys(a.driver.hypervisor.find(uuid)?.volumes ?? {})).toEqual([first.id]);

  await cast(a, 'shelve_instance', 'shelving', { image_id: 'shelved-5' });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'shelved_offloaded', host: null });
  const reserved1 = c.bdms.get(501)?.attachment_id as string;
  expect(reserved1).not.toBe(att1.id);
  expect(cinder.attachments.has(att1.id)).toBe(false);
  expect(cinder.attachments.get(reserved1)).toMatchObject({ volume_id: first.id, instance: uuid, connector: null });
  expect(cinder.volumes.get(first.id)?.status).toBe('reserved');

  // Attached while offloaded: nova-api alone makes the row (no device name) and a reservation.
  const second = cinder.addVolume({ status: 'available' });
  const att2 = cinder.reserve(second.id, uuid);
  c.bdms.set(502, { id: 502, instance_uuid: uuid, source_type: 'volume', destination_type: 'volume', volume_id: second.id, attachment_id: att2.id, device_name: null, boot_index: null, delete_on_termination: false });

  await api.putAllocations(uuid, { allocations: { [b.rootUuid]: { resources: RES } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  await cast(b, 'unshelve_instance', 'unshelving', { image: { id: 'shelved-5' } });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, host: 'host-b' });
  expect(Object.keys(b.driver.hypervisor.find(uuid)?.volumes ?? {}).sort()).toEqual([first.id, second.id].sort());
  expect(b.manager.record(uuid)?.volumes?.map((v) => [v.volume_id, v.device_name])).toEqual([
    [first.id, '/dev/vdb'],
    [second.id, '/dev/vdc'],
  ]);
  for (const [id, vol, att] of [[501, first.id, reserved1], [502, second.id, att2.id]] as const) {
    expect(cinder.attachments.get(att)).toMatchObject({ volume_id: vol, connector: expect.objectContaining({ host: 'host-b' }) });
    expect(cinder.volumes.get(vol)?.status).toBe('in-use');
    expect(JSON.parse(String(c.bdms.get(id)?.connection_info))).toMatchObject({ driver_volume_type: 'rbd', serial: vol });
  }
  expect(c.bdms.get(502)?.device_name).toBe('/dev/vdc');
});

test('shelved_offload_time > 0: SHELVED and kept on the host (powered off, allocation kept); unshelved by start_instance with the image deleted; shelved again, offloaded by the periodic pass once the time is up', async () => {
  let skew = 0;
  const { c, mock, glance, a, uuid, cast } = await world(3600, () => Date.now() + skew);
  await cast(a, 'shelve_instance', 'shelving', { image_id: 'shelved-6' });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'shelved', task_state: null, power_state: 4, host: 'host-a' });
  expect(c.instances.get(uuid)?.system_metadata).toMatchObject({ shelved_image_id: 'shelved-6', shelved_host: 'host-a' });
  expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('SHUTDOWN');
  expect(mock.consumers.has(uuid)).toBe(true);
  expect(await a.manager.shelving.offloadExpired(CTX)).toBe(0); // not yet due

  // nova's conductor unshelves a SHELVED server by casting start_instance (task powering-on).
  await cast(a, 'start_instance', 'powering-on');
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1, host: 'host-a' });
  expect(Object.keys(c.instances.get(uuid)?.system_metadata as object)).not.toContain('shelved_image_id');
  expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('RUNNING');
  expect(glance.calls.at(-1)).toBe('delete shelved-6');

  await cast(a, 'shelve_instance', 'shelving', { image_id: 'shelved-7' });
  expect(await a.manager.shelving.offloadExpired(CTX)).toBe(0);
  skew = 3601_000; // an hour and a second later
  c.calls.length = 0;
  expect(await a.manager.shelving.offloadExpired(CTX)).toBe(1);
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'shelved_offloaded', task_state: null, host: null });
  expect(c.calls.filter((x) => x.what === 'Instance.save').map((x) => x.kwargs?.expected_task_state)[0]).toEqual([null, 'shelving_offloading']);
  expect(a.manager.record(uuid)).toBeUndefined();
  expect(await a.driver.listInstances()).toEqual([]);
  expect(mock.consumers.has(uuid)).toBe(false);
});
