// Builds and deletes with volumes, through the real method rows, on a mocked Placement and an
// in-memory Cinder (test/helpers/fake-cinder.ts): the block_device_mapping step (a volume made
// from an image and waited for, nova-api's reserved volume connected with this host's connector,
// nova's form of the connection info given to the driver, boot volume first), the user's token
// used for Cinder, what a failed build and a delete give back, and nova's BDM rows saved.
import nock from 'nock';
import { silentLogger } from '../../../../lib/logging/logger';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { MockPlacement } from '../../../helpers/mock-placement';
import { ManualClock } from '../../../helpers/manual-clock';
import { FakeCinder, fakeCinderClients } from '../../../helpers/fake-cinder';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { InProcessPeers, instanceArgs, makeHost } from '../../../helpers/compute-harness';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import type { InstanceSpec } from '../../../../virt-drivers/types';

const HOST = 'host-a';
const CTX = { request_id: 'req-vol', auth_token: 'user-token' };
const IMAGE = '0b3d6a58-5c2e-4d51-9f8e-1f7c2a9b4e60';

async function setup(o: { cinder?: boolean; retries?: number; conductor?: FakeConductor } = {}) {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const cinder = new FakeCinder();
  const clock = new ManualClock();
  const tokens: Array<string | null> = [];
  const volumes = o.cinder === false ? {} : { volumes: { cinder: fakeCinderClients(cinder, tokens), ip: '192.0.2.10', allocateRetries: o.retries ?? 5, allocateIntervalS: 3 } };
  const cp = o.conductor ? new NovaControlPlane({ conductor: o.conductor, host: HOST, myIp: '192.0.2.10', computeNodeId: () => 1, logger: silentLogger() }) : undefined;
  const host = await makeHost(HOST, api, peers, silentLogger(), cp, { clock, ...volumes });
  const spawned: InstanceSpec[] = [];
  const spawn = host.driver.spawn.bind(host.driver);
  host.driver.spawn = (spec, opts) => {
    spawned.push(spec);
    return spawn(spec, opts);
  };
  const call = (method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(HOST, method, args, CTX);
  return { cinder, clock, host, call, spawned, tokens, api };
}

/** Runs `p` while advancing the clock past every sleep of the volume waits. */
async function withTime<T>(clock: ManualClock, p: Promise<T>): Promise<T> {
  let done = false;
  void p.finally(() => (done = true)).catch(() => undefined);
  while (!done) {
    await new Promise((r) => setTimeout(r, 2));
    if (clock.sleeping > 0) clock.advance(3000);
  }
  return p;
}

const imageVolume = { source_type: 'image', destination_type: 'volume', boot_index: 0, image_id: IMAGE, volume_size: 2, delete_on_termination: true };

afterEach(() => nock.cleanAll());

describe('build with volumes', () => {
  test('boots from a volume made from an image and gets nova-api’s reserved data volume: both connected with this host’s connector, boot volume first, in-use; delete gives both back', async () => {
    const { cinder, clock, host, call, spawned, tokens } = await setup();
    const data = cinder.addVolume({ size: 1 });
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    const reserved = cinder.reserve(data.id, uuid);
    const bdms = [
      { source_type: 'volume', destination_type: 'volume', boot_index: null, volume_id: data.id, attachment_id: reserved.id, delete_on_termination: false },
      imageVolume,
    ];
    await withTime(clock, call('build_and_run_instance', { instance: inst, block_device_mapping: bdms }));
    const rec = host.manager.record(uuid);
    expect(rec).toMatchObject({ vm_state: 'active', task_state: null });
    const made = [...cinder.volumes.values()].find((v) => v.imageRef === IMAGE);
    expect(made).toMatchObject({ size: 2, status: 'in-use' });
    expect(cinder.volumes.get(data.id)?.status).toBe('in-use');
    // One attachment per volume (nova-api's reused), each with this host's connector and its device.
    const atts = [...cinder.attachments.values()];
    expect(atts).toHaveLength(2);
    expect(atts.find((a) => a.volume_id === data.id)?.id).toBe(reserved.id);
    for (const a of atts) expect(a.connector).toMatchObject({ host: HOST, ip: '192.0.2.10', multipath: false, do_local_attach: false, platform: 'x86_64', os_type: 'linux' });
    expect(atts.map((a) => [a.volume_id, a.connector?.mountpoint]).sort()).toEqual([[data.id, '/dev/vdb'], [made?.id, '/dev/vda']].sort());
    // The driver got nova's form of the connection info, the boot volume first.
    expect(spawned).toHaveLength(1);
    const vols = spawned[0]?.volumes ?? [];
    expect(vols.map((v) => [v.volume_id, v.device_name, v.boot_index])).toEqual([
      [made?.id, '/dev/vda', 0],
      [data.id, '/dev/vdb', null],
    ]);
    expect(vols[0]?.connection_info).toMatchObject({ driver_volume_type: 'rbd', serial: made?.id, data: { name: `volumes/volume-${made?.id ?? ''}`, auth_username: 'cinder', hosts: ['127.0.0.1'] } });
    expect(spawned[0]?.image_ref).toBeUndefined();
    // Cinder was asked with the user's token.
    expect(new Set(tokens)).toEqual(new Set(['user-token']));

    await call('terminate_instance', { instance: { uuid } });
    expect(host.manager.record(uuid)).toBeUndefined();
    expect(cinder.attachments.size).toBe(0);
    expect(cinder.volumes.has(made?.id ?? '')).toBe(false); // delete_on_termination
    expect(cinder.volumes.get(data.id)?.status).toBe('available');
  });

  test('deleted while Cinder is down: the instance goes at once; its attachments, then its delete_on_termination volume, go once Cinder is back', async () => {
    const { cinder, clock, host, call } = await setup();
    const data = cinder.addVolume({ size: 1 });
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    const reserved = cinder.reserve(data.id, uuid);
    const bdms = [{ source_type: 'volume', destination_type: 'volume', boot_index: null, volume_id: data.id, attachment_id: reserved.id, delete_on_termination: false }, imageVolume];
    await withTime(clock, call('build_and_run_instance', { instance: inst, block_device_mapping: bdms }));
    const made = [...cinder.volumes.values()].find((v) => v.imageRef === IMAGE);
    cinder.down = true;
    await call('terminate_instance', { instance: { uuid } });
    expect(host.manager.record(uuid)).toBeUndefined();
    expect(host.manager.attachmentDeletes.items().map(([, o]) => [o.volume_id, o.delete_volume ?? false]).sort()).toEqual([[data.id, false], [made?.id, true]].sort());
    cinder.down = false;
    expect(await host.manager.attachmentDeletes.drainOnce()).toBe(0);
    expect(cinder.attachments.size).toBe(0);
    expect(cinder.volumes.has(made?.id ?? '')).toBe(false);
    expect(cinder.volumes.get(data.id)?.status).toBe('available');
  });

  test('a volume Cinder puts in error fails the build with a fault naming it; the attachments go back and the delete_on_termination volume is deleted; no guest', async () => {
    const { cinder, clock, host, call } = await setup();
    const keep = cinder.addVolume();
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    const reserved = cinder.reserve(keep.id, uuid);
    cinder.settleTo = 'error';
    const bdms = [{ source_type: 'volume', destination_type: 'volume', boot_index: 1, volume_id: keep.id, attachment_id: reserved.id }, imageVolume];
    await withTime(clock, call('build_and_run_instance', { instance: inst, block_device_mapping: bdms }));
    const rec = host.manager.record(uuid);
    const failed = [...cinder.volumes.values()].find((v) => v.imageRef === IMAGE);
    expect(rec).toMatchObject({ vm_state: 'error', task_state: null });
    expect(rec?.fault).toMatch(/^volume failed: volume [0-9a-f-]{36}: Cinder put the volume in error/);
    expect(await host.driver.listInstances()).toEqual([]);
    expect(failed).toBeUndefined(); // created, failed, deleted (delete_on_termination)
    expect(cinder.attachments.size).toBe(0);
    expect(cinder.volumes.get(keep.id)?.status).toBe('available');
  });

  test('a volume that stays creating past block_device_allocate_retries fails the build and says which option to raise', async () => {
    const { cinder, clock, host, call } = await setup({ retries: 2 });
    cinder.creatingLooks = 100;
    const inst = instanceArgs();
    await withTime(clock, call('build_and_run_instance', { instance: inst, block_device_mapping: [imageVolume] }));
    expect(host.manager.record(String(inst.uuid))?.fault).toMatch(/still creating after 3 looks 3 s apart \(\[DEFAULT\] block_device_allocate_retries\)/);
    expect(cinder.calls.filter((c) => c.startsWith('GET volume'))).toHaveLength(3 + 1); // three looks, one before the delete
  });

  test('Cinder unreachable: the build fails with the request named', async () => {
    const a = await setup();
    a.cinder.down = true;
    const inst = instanceArgs();
    await withTime(a.clock, a.call('build_and_run_instance', { instance: inst, block_device_mapping: [imageVolume] }));
    expect(a.host.manager.record(String(inst.uuid))?.fault).toMatch(/^volume failed: volume from image .*POST volume.*connection refused/);
  });

  test('without Cinder configured, the fault says what to set', async () => {
    const b = await setup({ cinder: false });
    const other = instanceArgs();
    await b.call('build_and_run_instance', { instance: other, block_device_mapping: [imageVolume] });
    expect(b.host.manager.record(String(other.uuid))?.fault).toMatch(/this host has no Cinder: set \[placement\] keystone credentials .* or \[cinder\] endpoint_override/);
  });

  test('a malformed mapping is refused before anything is made, naming the field', async () => {
    const { cinder, call } = await setup();
    await expect(call('build_and_run_instance', { instance: instanceArgs(), block_device_mapping: [{ source_type: 'image', destination_type: 'volume', boot_index: 0, image_id: IMAGE }] })).rejects.toThrow(
      /block_device_mapping.*0\.volume_size.*missing \(the GiB of the volume the host creates\)/,
    );
    await expect(call('build_and_run_instance', { instance: instanceArgs(), block_device_mapping: [{ source_type: 'floppy', destination_type: 'volume' }] })).rejects.toThrow(/source_type.*one of image, volume, blank, snapshot/);
    expect(cinder.calls).toEqual([]);
  });

  test('nova mode: the created volume, the attachment and the connection info are saved in nova’s BlockDeviceMapping row; the task goes through block_device_mapping', async () => {
    const conductor = new FakeConductor();
    const { clock, call, host, api } = await setup({ conductor });
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    // The scheduler's claim of a server booted from a volume: no DISK_GB for the root disk (FLAVOR: root 10, ephemeral 0, swap 512 MiB: 1 GiB).
    await api.putAllocations(uuid, { allocations: { [host.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 1 } } }, project_id: 'proj-1', user_id: 'user-1', consumer_generation: null });
    conductor.instances.set(uuid, { id: 7, uuid, vm_state: 'building', task_state: 'scheduling', host: null });
    conductor.bdms.set(41, { id: 41, instance_uuid: uuid, source_type: 'image', destination_type: 'volume', volume_id: null, attachment_id: null, connection_info: null });
    const bdm = conductor.prim('BlockDeviceMapping', { id: 41, instance_uuid: uuid, ...imageVolume });
    await withTime(clock, call('build_and_run_instance', { instance: conductor.prim('Instance', { ...inst, vm_state: 'building', task_state: 'scheduling' }), block_device_mapping: conductor.prim('BlockDeviceMappingList', { objects: [bdm] }) }));
    const row = conductor.bdms.get(41);
    expect(row?.volume_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(row?.attachment_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(row?.device_name).toBe('/dev/vda');
    expect(JSON.parse(String(row?.connection_info))).toMatchObject({ driver_volume_type: 'rbd', serial: row?.volume_id, data: { auth_username: 'cinder' } });
    const tasks = conductor.calls.filter((x) => x.what === 'Instance.save' && (x.changes ?? []).includes('task_state')).map((x) => x.data?.task_state);
    expect(tasks).toContain('block_device_mapping');
    expect(conductor.instances.get(uuid)).toMatchObject({ vm_state: 'active' });
  });
});
