// swap_volume and remove_volume_connection through the real method rows, on a mocked Placement,
// the fake driver and an in-memory Cinder (test/helpers/fake-cinder.ts), as nova-api and Cinder
// drive them: nova-api makes the new volume's attachment and begins detaching the old volume,
// then casts swap_volume; the guest's disk moves to the new volume, the old attachment goes, and
// a Cinder migration is completed (the new volume keeps the old id). A failure leaves the guest on
// the old disk with the old volume in use. remove_volume_connection (a live migration's rollback)
// lets the volume go from this host's guest, deleting the attachment only when asked.
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
const CTX = { request_id: 'req-swap', auth_token: 'user-token' };

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
    await api.putAllocations(uuid, { allocations: { [host.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'proj-1', user_id: 'user-1', consumer_generation: null });
    conductor.instances.set(uuid, { id: 7, uuid, vm_state: 'building', task_state: 'scheduling', host: null });
  }
  await call('build_and_run_instance', { instance: conductor ? conductor.prim('Instance', { ...inst, vm_state: 'building', task_state: 'scheduling' }) : inst });
  const disks = (): Record<string, number> => ({ ...(host.driver.hypervisor.find(uuid)?.volumes ?? {}) });
  /** nova-api's attach: reserve, the attachment, the cast. */
  const attach = async (volumeId: string): Promise<{ bdm: Record<string, unknown>; attachment: string }> => {
    const bdm = (await call('reserve_block_device_name', { instance: { uuid }, device: null, volume_id: volumeId, disk_bus: null, device_type: null, tag: null, multiattach: false })) as Record<string, unknown>;
    const attachment = cinder.reserve(volumeId, uuid).id;
    const data = bdm['nova_object.data'] as Record<string, unknown> | undefined;
    await call('attach_volume', { instance: { uuid }, bdm: data ? { ...bdm, 'nova_object.data': { ...data, attachment_id: attachment } } : { ...bdm, attachment_id: attachment } });
    return { bdm, attachment };
  };
  /** nova-api's swap: the new attachment (no connector), the old volume detaching, then the cast. */
  const swap = async (oldId: string, newId: string): Promise<string> => {
    const attachment = cinder.reserve(newId, uuid).id;
    cinder.beginDetaching(oldId);
    await call('swap_volume', { instance: { uuid }, old_volume_id: oldId, new_volume_id: newId, new_attachment_id: attachment });
    return attachment;
  };
  return { cinder, host, call, uuid, disks, attach, swap };
}

afterEach(() => nock.cleanAll());

describe('swap_volume', () => {
  test('a swap between two volumes: the guest’s disk moves to the new volume, connected with this host’s connector; the old attachment is deleted; the mapping keeps the new volume', async () => {
    const { cinder, host, uuid, disks, attach, swap } = await setup();
    const a = cinder.addVolume({ size: 1 });
    const b = cinder.addVolume({ size: 2 });
    const { attachment: oldAttachment } = await attach(a.id);
    // The new volume is bigger: a driver that can resize a disk in a running guest grows it (the fake claims no resize; lent here).
    Object.assign(host.driver, { capabilities: { ...host.driver.capabilities, supports_extend_volume: true } });
    const newAttachment = await swap(a.id, b.id);
    expect(disks()).toEqual({ [b.id]: 2 * 1024 ** 3 });
    expect(cinder.attachments.has(oldAttachment)).toBe(false);
    expect(cinder.volumes.get(a.id)?.status).toBe('available');
    expect(cinder.volumes.get(b.id)?.status).toBe('in-use');
    expect(cinder.attachments.get(newAttachment)).toMatchObject({ status: 'attached', connector: { host: HOST, mountpoint: '/dev/vdb' } });
    expect(cinder.calls.some((x) => x.startsWith('migrate completion'))).toBe(false);
    const rec = host.manager.record(uuid);
    expect(rec?.volumes?.map((v) => [v.volume_id, v.attachment_id, v.device_name, (v.connection_info as { serial?: string }).serial])).toEqual([[b.id, newAttachment, '/dev/vdb', b.id]]);
    expect(rec?.block_devices?.map((x) => [x.volume_id, x.attachment_id, x.volume_size])).toEqual([[b.id, newAttachment, 2]]);
    expect(rec?.fault).toBeUndefined();
    // A replay of the cast (the journal after a crash) finds the swap done.
    await expect(host.manager.volumeSwap.swap(uuid, { old_volume_id: a.id, new_volume_id: b.id, new_attachment_id: newAttachment }, CTX)).resolves.toBeUndefined();
    expect(disks()).toEqual({ [b.id]: 2 * 1024 ** 3 });
    // Detach then finds the disk by the volume the mapping keeps.
    cinder.beginDetaching(b.id);
    await host.manager.volumeAttach.detach(uuid, b.id, newAttachment, CTX);
    expect(disks()).toEqual({});
    expect(cinder.attachments.size).toBe(0);
  });

  test('Cinder’s migration: completed with Cinder, which keeps the old id for the new volume; the mapping and the disk keep the old id', async () => {
    const { cinder, host, uuid, disks, attach, swap } = await setup();
    const a = cinder.addVolume({ size: 1 });
    const b = cinder.addVolume({ size: 1 });
    await attach(a.id);
    a.migration_status = 'migrating';
    const newAttachment = await swap(a.id, b.id);
    expect(cinder.calls).toContain(`migrate completion ${a.id} ${b.id} error=false`);
    expect(cinder.volumes.has(b.id)).toBe(false);
    expect(cinder.volumes.get(a.id)).toMatchObject({ status: 'in-use', migration_status: 'success' });
    expect(cinder.attachments.get(newAttachment)?.volume_id).toBe(a.id);
    expect(disks()).toEqual({ [a.id]: 0 });
    const v = host.manager.record(uuid)?.volumes?.[0];
    expect([v?.volume_id, v?.attachment_id, (v?.connection_info as { serial?: string } | undefined)?.serial]).toEqual([a.id, newAttachment, a.id]);
    expect(host.manager.record(uuid)?.block_devices?.map((x) => [x.volume_id, x.attachment_id])).toEqual([[a.id, newAttachment]]);
  });

  test('the driver fails: the guest keeps the old disk, the old volume is in use again, the new attachment deleted, Cinder’s migration told it failed, the fault recorded', async () => {
    const { cinder, host, uuid, disks, attach, swap } = await setup();
    const a = cinder.addVolume();
    const b = cinder.addVolume();
    const { attachment: oldAttachment } = await attach(a.id);
    a.migration_status = 'migrating';
    host.driver.faults.inject('swapVolume', { error: new DriverError('blockdev-mirror: job failed'), times: 1 });
    await expect(swap(a.id, b.id)).rejects.toThrow(`Volume ${a.id} could not be swapped for ${b.id}. Reason: blockdev-mirror: job failed`);
    expect(disks()).toEqual({ [a.id]: 0 });
    expect(cinder.volumes.get(a.id)).toMatchObject({ status: 'in-use', migration_status: 'error' });
    expect(cinder.volumes.get(b.id)?.status).toBe('available');
    expect([...cinder.attachments.keys()]).toEqual([oldAttachment]);
    expect(cinder.calls).toContain(`migrate completion ${a.id} ${b.id} error=true`);
    const rec = host.manager.record(uuid);
    expect(rec?.volumes?.map((v) => [v.volume_id, v.attachment_id])).toEqual([[a.id, oldAttachment]]);
    expect(rec?.fault).toMatch(/^volume swap failed: /);
  });

  test('a volume the instance does not have is refused with the fault recorded, Cinder untouched', async () => {
    const { cinder, host, uuid, call } = await setup();
    const b = cinder.addVolume();
    const attachment = cinder.reserve(b.id, uuid).id;
    const before = cinder.calls.length;
    await expect(call('swap_volume', { instance: { uuid }, old_volume_id: '5a7a8837-7346-47aa-aefc-825ad9627268', new_volume_id: b.id, new_attachment_id: attachment })).rejects.toThrow(/is not attached to instance/);
    expect(cinder.calls.length).toBe(before);
    expect(host.manager.record(uuid)?.fault).toMatch(/^volume swap failed: /);
  });

  test('nova mode: the BlockDeviceMapping row is saved with the new volume, attachment and connection info', async () => {
    const conductor = new FakeConductor();
    const { cinder, attach, swap } = await setup(conductor);
    const a = cinder.addVolume();
    const b = cinder.addVolume();
    const { bdm } = await attach(a.id);
    const id = Number((bdm['nova_object.data'] as Record<string, unknown>).id);
    const newAttachment = await swap(a.id, b.id);
    expect(conductor.bdms.get(id)).toMatchObject({ volume_id: b.id, attachment_id: newAttachment });
    expect(JSON.parse(String(conductor.bdms.get(id)?.connection_info))).toMatchObject({ driver_volume_type: 'rbd', serial: b.id });
  });
});

describe('remove_volume_connection', () => {
  test('the guest lets the volume go; the attachment stays unless delete_attachment; repeated calls and unknown volumes or instances are fine', async () => {
    const { cinder, host, uuid, disks, attach, call } = await setup();
    const a = cinder.addVolume();
    const b = cinder.addVolume();
    const { attachment: aAttachment } = await attach(a.id);
    const { attachment: bAttachment } = await attach(b.id);
    await call('remove_volume_connection', { instance: { uuid }, volume_id: a.id, delete_attachment: false });
    expect(disks()).toEqual({ [b.id]: 0 });
    expect(cinder.attachments.has(aAttachment)).toBe(true);
    expect(host.manager.record(uuid)?.volumes?.map((v) => v.volume_id)).toEqual([b.id]);
    // nova keeps the mapping (the rollback restores its attachment).
    expect(host.manager.record(uuid)?.block_devices?.map((x) => x.volume_id)).toEqual([a.id, b.id]);
    await call('remove_volume_connection', { instance: { uuid }, volume_id: a.id, delete_attachment: false });
    // Older callers (before 6.3) send no delete_attachment: nothing deleted.
    await call('remove_volume_connection', { instance: { uuid }, volume_id: b.id });
    expect(disks()).toEqual({});
    expect(cinder.attachments.has(bAttachment)).toBe(true);
    await call('remove_volume_connection', { instance: { uuid }, volume_id: a.id, delete_attachment: true });
    expect(cinder.attachments.has(aAttachment)).toBe(false);
    await expect(call('remove_volume_connection', { instance: { uuid }, volume_id: '5a7a8837-7346-47aa-aefc-825ad9627268', delete_attachment: true })).resolves.toBeFalsy();
    await expect(call('remove_volume_connection', { instance: { uuid: '70e8113b-d0c1-4a1d-bab4-014a9d4b444a' }, volume_id: a.id, delete_attachment: true })).resolves.toBeFalsy();
  });

  test('a guest that keeps the disk: the call fails, the volume stays connected and its attachment kept', async () => {
    const { cinder, host, uuid, disks, attach, call } = await setup();
    const a = cinder.addVolume();
    const { attachment } = await attach(a.id);
    host.driver.faults.inject('detachVolume', { error: new DriverError('the guest did not release the disk within 20000 ms'), times: 1 });
    await expect(call('remove_volume_connection', { instance: { uuid }, volume_id: a.id, delete_attachment: true })).rejects.toThrow(/could not be detached. Reason: the guest did not release/);
    expect(disks()).toEqual({ [a.id]: 0 });
    expect(cinder.attachments.has(attachment)).toBe(true);
    expect(host.manager.record(uuid)?.volumes).toHaveLength(1);
  });
});
