// reserve_block_device_name, attach_volume, detach_volume and the volume-extended event, through
// the real method rows, on a mocked Placement, the fake driver and an in-memory Cinder
// (test/helpers/fake-cinder.ts), as nova-api drives them: reserve (a call) makes the mapping,
// nova-api makes the attachment, attach (a cast) connects it and hot-plugs the disk, detach (a
// cast, the volume detaching) unplugs it and deletes the attachment. Failures: what was done is
// undone and the fault recorded; a guest that keeps the disk keeps it and the volume is in use again.
import nock from 'nock';
import { silentLogger } from '../../../../lib/logging/logger';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { DriverError } from '../../../../virt-drivers/errors';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { MockPlacement } from '../../../helpers/mock-placement';
import { ManualClock } from '../../../helpers/manual-clock';
import { FakeCinder, fakeCinderClients } from '../../../helpers/fake-cinder';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { InProcessPeers, instanceArgs, makeHost } from '../../../helpers/compute-harness';

const HOST = 'host-a';
const CTX = { request_id: 'req-attach', auth_token: 'user-token' };

async function setup(conductor?: FakeConductor) {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const cinder = new FakeCinder();
  const cp = conductor ? new NovaControlPlane({ conductor, host: HOST, myIp: '192.0.2.10', computeNodeId: () => 1, logger: silentLogger() }) : undefined;
  const host = await makeHost(HOST, api, peers, silentLogger(), cp, { clock: new ManualClock(), volumes: { cinder: fakeCinderClients(cinder), ip: '192.0.2.10', allocateRetries: 3, allocateIntervalS: 1 } });
  const call = (method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(HOST, method, args, CTX);
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  if (conductor) {
    // nova mode: the scheduler claimed, and nova has the Instance row.
    await api.putAllocations(uuid, { allocations: { [host.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'proj-1', user_id: 'user-1', consumer_generation: null });
    conductor.instances.set(uuid, { id: 7, uuid, vm_state: 'building', task_state: 'scheduling', host: null });
  }
  await call('build_and_run_instance', { instance: conductor ? conductor.prim('Instance', { ...inst, vm_state: 'building', task_state: 'scheduling' }) : inst });
  const disks = (): Record<string, number> => ({ ...(host.driver.hypervisor.find(uuid)?.volumes ?? {}) });
  /** nova-api's attach: reserve (a call), the attachment, then the cast. */
  const attach = async (volumeId: string): Promise<{ bdm: Record<string, unknown>; attachment: string }> => {
    const bdm = (await call('reserve_block_device_name', { instance: { uuid }, device: null, volume_id: volumeId, disk_bus: null, device_type: null, tag: null, multiattach: false })) as Record<string, unknown>;
    const attachment = cinder.reserve(volumeId, uuid).id;
    // nova-api saves the attachment in the mapping (in nova mode, the primitive's data) before it casts.
    const data = bdm['nova_object.data'] as Record<string, unknown> | undefined;
    const withAttachment = data ? { ...bdm, 'nova_object.data': { ...data, attachment_id: attachment } } : { ...bdm, attachment_id: attachment };
    await call('attach_volume', { instance: { uuid }, bdm: withAttachment });
    return { bdm, attachment };
  };
  return { cinder, host, call, uuid, disks, attach, peers };
}

afterEach(() => nock.cleanAll());

describe('attach and detach a volume', () => {
  test('reserve names the next vdX past the image’s root disk (vda); attach connects it with this host’s connector and the guest gets the disk; detach gives it back; nothing left', async () => {
    const { cinder, host, call, uuid, disks, attach } = await setup();
    const vol = cinder.addVolume({ size: 1 });
    const { bdm, attachment } = await attach(vol.id);
    expect(bdm).toMatchObject({ volume_id: vol.id, device_name: '/dev/vdb', source_type: 'volume', destination_type: 'volume', boot_index: null });
    expect(cinder.volumes.get(vol.id)?.status).toBe('in-use');
    expect(cinder.attachments.get(attachment)?.connector).toMatchObject({ host: HOST, mountpoint: '/dev/vdb' });
    expect(disks()).toEqual({ [vol.id]: 0 });
    expect(host.manager.record(uuid)?.volumes?.map((v) => [v.volume_id, v.attachment_id, v.connection_info.driver_volume_type])).toEqual([[vol.id, attachment, 'rbd']]);
    // A second reservation of the same volume is refused; another volume gets the next name.
    await expect(call('reserve_block_device_name', { instance: { uuid }, device: '/dev/vdz', volume_id: vol.id, disk_bus: null, device_type: null, tag: null, multiattach: false })).rejects.toThrow(/already attached/);
    const second = cinder.addVolume();
    expect((await attach(second.id)).bdm).toMatchObject({ device_name: '/dev/vdc' });
    // The volume-extended event reaches the guest with the volume's new size (the fake driver
    // claims no resize for the scheduler's sake; this test lends it the capability).
    Object.assign(host.driver, { capabilities: { ...host.driver.capabilities, supports_extend_volume: true } });
    vol.size = 3;
    await call('external_instance_event', { instances: [], events: [{ instance_uuid: uuid, name: 'volume-extended', status: 'completed', tag: vol.id }] });
    await new Promise((r) => setTimeout(r, 20));
    expect(disks()[vol.id]).toBe(3 * 1024 ** 3);

    cinder.beginDetaching(vol.id);
    await call('detach_volume', { instance: { uuid }, volume_id: vol.id, attachment_id: attachment });
    expect(disks()).toEqual({ [second.id]: 0 });
    expect(cinder.attachments.has(attachment)).toBe(false);
    expect(cinder.volumes.get(vol.id)?.status).toBe('available');
    expect(host.manager.record(uuid)?.block_devices?.map((b) => b.volume_id)).toEqual([second.id]);
    // Delete gives the other one back.
    await call('terminate_instance', { instance: { uuid } });
    expect(cinder.attachments.size).toBe(0);
    expect(cinder.volumes.get(second.id)?.status).toBe('available');
  });

  test('a driver that cannot attach: the attachment deleted, the mapping gone, the fault recorded; a tag or multiattach is refused at reserve', async () => {
    const { cinder, host, call, uuid, disks, attach } = await setup();
    const vol = cinder.addVolume();
    host.driver.faults.inject('attachVolume', { error: new DriverError('QMP device_add: no free slot'), times: 1 });
    await expect(attach(vol.id)).rejects.toThrow(/Volume .* could not be attached. Reason: QMP device_add: no free slot/);
    expect(cinder.attachments.size).toBe(0);
    expect(cinder.volumes.get(vol.id)?.status).toBe('available');
    expect(disks()).toEqual({});
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', block_devices: [] });
    expect(host.manager.record(uuid)?.fault).toMatch(/^volume attach failed: /);
    await expect(call('reserve_block_device_name', { instance: { uuid }, device: null, volume_id: vol.id, disk_bus: null, device_type: null, tag: 'data', multiattach: false })).rejects.toThrow(/Tagged volume attachment is not supported/);
    await expect(call('reserve_block_device_name', { instance: { uuid }, device: null, volume_id: vol.id, disk_bus: null, device_type: null, tag: null, multiattach: true })).rejects.toThrow(/multiattach/);
  });

  test('a guest that keeps the disk: the volume stays attached and in use again, the fault says so', async () => {
    const { cinder, host, call, uuid, disks, attach } = await setup();
    const vol = cinder.addVolume();
    const { attachment } = await attach(vol.id);
    host.driver.faults.inject('detachVolume', { error: new DriverError('the guest did not release disk vol0 within 20000 ms'), times: 1 });
    cinder.beginDetaching(vol.id);
    await expect(call('detach_volume', { instance: { uuid }, volume_id: vol.id, attachment_id: attachment })).rejects.toThrow(/could not be detached. Reason: the guest did not release .*; the volume stays attached/);
    expect(disks()).toEqual({ [vol.id]: 0 });
    expect(cinder.volumes.get(vol.id)?.status).toBe('in-use');
    expect(cinder.attachments.has(attachment)).toBe(true);
    expect(host.manager.record(uuid)?.volumes).toHaveLength(1);
  });

  test('nova mode: reserve creates nova’s BlockDeviceMapping row and answers it; attach saves the connection info; detach destroys the row', async () => {
    const conductor = new FakeConductor();
    const { cinder, call, uuid, attach } = await setup(conductor);
    const vol = cinder.addVolume();
    const { bdm, attachment } = await attach(vol.id);
    const id = Number((bdm['nova_object.data'] as Record<string, unknown>).id);
    expect(bdm).toMatchObject({ 'nova_object.name': 'BlockDeviceMapping' });
    expect(conductor.bdms.get(id)).toMatchObject({ instance_uuid: uuid, volume_id: vol.id, device_name: '/dev/vdb' });
    expect(JSON.parse(String(conductor.bdms.get(id)?.connection_info))).toMatchObject({ driver_volume_type: 'rbd', serial: vol.id });
    cinder.beginDetaching(vol.id);
    await call('detach_volume', { instance: { uuid }, volume_id: vol.id, attachment_id: attachment });
    expect(conductor.bdms.has(id)).toBe(false);
  });
});
