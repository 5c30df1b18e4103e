// The volume faults of attach_volume and detach_volume, each ended in one clear state, checked where
// it lives: the attachments and volume statuses of the in-memory Cinder (test/helpers/fake-cinder.ts),
// nova's BlockDeviceMapping rows and InstanceFault rows in the fake conductor, the instance record
// (volumes, block devices, fault) and the fake driver's guest disks. A volume ends either attached
// (in use, connected to this host, in the guest once) or gone everywhere; never half-made.
// "SIGKILL" is a flow frozen at a step boundary (a promise that never settles), and the restart a
// new manager over the same records, driver and Cinder running the same request again, as the
// journal's recovery replays it.
import nock from 'nock';
import { silentLogger } from '../../../../lib/logging/logger';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { VolumeReleaseTimeoutError } from '../../../../virt-drivers/qemu/errors';
import { NovaControlPlane } from '../../../../agent/nova/control-plane';
import { ComputeManager } from '../../../../agent/compute/manager';
import { computeMethods } from '../../../../agent/compute/methods';
import { bindMethod } from '../../../../agent/compute/method-table';
import type { AttachedVolume, InstanceRef } from '../../../../virt-drivers/types';
import { MockPlacement } from '../../../helpers/mock-placement';
import { ManualClock } from '../../../helpers/manual-clock';
import { FakeCinder, fakeCinderClients } from '../../../helpers/fake-cinder';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { InProcessPeers, instanceArgs, makeHost } from '../../../helpers/compute-harness';

const HOST = 'host-a';
const CTX = { request_id: 'req-volume-faults', auth_token: 'user-token' };
const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

async function setup() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const peers = new InProcessPeers();
  const cinder = new FakeCinder();
  const conductor = new FakeConductor();
  const cp = new NovaControlPlane({ conductor, host: HOST, myIp: '192.0.2.10', computeNodeId: () => 1, logger: silentLogger() });
  const host = await makeHost(HOST, api, peers, silentLogger(), cp, { clock: new ManualClock(), volumes: { cinder: fakeCinderClients(cinder), ip: '192.0.2.10', allocateRetries: 3, allocateIntervalS: 1 } });
  const call = (method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(HOST, method, args, CTX);
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await api.putAllocations(uuid, { allocations: { [host.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'proj-1', user_id: 'user-1', consumer_generation: null });
  conductor.instances.set(uuid, { id: 7, uuid, vm_state: 'building', task_state: 'scheduling', host: null });
  await call('build_and_run_instance', { instance: conductor.prim('Instance', { ...inst, vm_state: 'building', task_state: 'scheduling' }) });
  const vol = cinder.addVolume();
  /** nova-api's side of an attach: the mapping reserved (a call), the attachment made; the cast's arguments. */
  const prepare = async (): Promise<{ args: Record<string, unknown>; bdmId: number; attachment: string }> => {
    const bdm = (await call('reserve_block_device_name', { instance: { uuid }, device: null, volume_id: vol.id, disk_bus: null, device_type: null, tag: null, multiattach: false })) as Record<string, unknown>;
    const attachment = cinder.reserve(vol.id, uuid).id;
    const data = bdm['nova_object.data'] as Record<string, unknown>;
    return { args: { instance: { uuid }, bdm: { ...bdm, 'nova_object.data': { ...data, attachment_id: attachment } } }, bdmId: Number(data.id), attachment };
  };
  const state = () => ({
    attachments: [...cinder.attachments.values()].map((a) => ({ id: a.id, status: a.status, host: a.connector?.host ?? null })),
    volume: cinder.volumes.get(vol.id)?.status,
    guest: { ...(host.driver.hypervisor.find(uuid)?.volumes ?? {}) },
    recordVolumes: (host.manager.record(uuid)?.volumes ?? []).map((v) => v.attachment_id),
    recordMappings: (host.manager.record(uuid)?.block_devices ?? []).map((b) => b.volume_id),
    rows: [...conductor.bdms.values()].filter((r) => r.volume_id === vol.id).length,
  });
  /** The agent restarted: a new manager over the same records, driver and Cinder (QEMU and Cinder outlive it). */
  const restarted = () => {
    const methods = computeMethods(new ComputeManager(host.manager.deps));
    return (method: string, args: Record<string, unknown>): Promise<unknown> => {
      const row = methods.find((m) => m.name === method);
      if (!row) throw new Error(`no method ${method}`);
      return bindMethod(row, JSON.parse(JSON.stringify(args)) as Record<string, unknown>, CTX).run();
    };
  };
  return { cinder, conductor, cp, host, call, uuid, vol, prepare, state, restarted };
}

afterEach(() => nock.cleanAll());

describe('Cinder unavailable during an attach', () => {
  test('the connector update fails: nothing attached, the attachment deleted, the mapping and nova’s row gone, the fault recorded', async () => {
    const { cinder, conductor, host, call, uuid, vol, prepare, state } = await setup();
    const { args, attachment } = await prepare();
    cinder.failOn('PUT attachment');
    await expect(call('attach_volume', args)).rejects.toThrow(/could not be attached. Reason: PUT attachment .*Cinder unavailable/);
    expect(state()).toEqual({ attachments: [], volume: 'available', guest: {}, recordVolumes: [], recordMappings: [], rows: 0 });
    expect(cinder.calls).toContain(`DELETE attachment ${attachment}`);
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, fault: expect.stringMatching(/^volume attach failed: /) as unknown });
    expect(conductor.faults.length).toBeGreaterThan(0);
    expect(vol.status).toBe('available');
  });

  test('Cinder down for the whole attach: the record claims nothing, the attachment delete is owed and done in the background once Cinder is back', async () => {
    const { cinder, host, call, uuid, prepare, state } = await setup();
    const { args, attachment } = await prepare();
    cinder.down = true;
    await expect(call('attach_volume', args)).rejects.toThrow(new RegExp(`Cinder did not delete its attachment ${attachment}: the host deletes it once Cinder answers`));
    // Cinder's side is as nova-api left it (reserved, no connector); nothing here claims it, the delete is owed.
    expect(state()).toEqual({ attachments: [{ id: attachment, status: 'reserved', host: null }], volume: 'reserved', guest: {}, recordVolumes: [], recordMappings: [], rows: 0 });
    expect(host.manager.attachmentDeletes.pending()).toEqual([attachment]);
    expect(host.manager.record(uuid)?.fault).toContain(`attachment ${attachment}`);
    // Still down: the drain keeps it. Back: the next pass deletes it, and nothing is owed any more.
    expect(await host.manager.attachmentDeletes.drainOnce()).toBe(1);
    cinder.down = false;
    expect(await host.manager.attachmentDeletes.drainOnce()).toBe(0);
    expect(state()).toEqual({ attachments: [], volume: 'available', guest: {}, recordVolumes: [], recordMappings: [], rows: 0 });
  });

  test('os-complete fails after the guest got the disk: the disk taken out again, the attachment deleted, the row gone (as nova, less the disk nova forgets)', async () => {
    const { cinder, host, call, uuid, prepare, state } = await setup();
    const { args, attachment } = await prepare();
    cinder.failOn('complete attachment');
    await expect(call('attach_volume', args)).rejects.toThrow(/could not be attached. Reason: complete attachment .*Cinder unavailable/);
    expect(cinder.calls.filter((c) => c.startsWith('DELETE attachment'))).toEqual([`DELETE attachment ${attachment}`]);
    expect(state()).toEqual({ attachments: [], volume: 'available', guest: {}, recordVolumes: [], recordMappings: [], rows: 0 });
    expect(host.manager.record(uuid)?.fault).toMatch(/^volume attach failed: .*complete attachment/);
  });

  test('os-complete fails and the guest will not give the just-added disk back: nothing more undone, the record keeps the volume, the fault says so', async () => {
    const { cinder, host, call, uuid, vol, prepare, state } = await setup();
    const { args, attachment } = await prepare();
    cinder.failOn('complete attachment');
    host.driver.faults.inject('detachVolume', { error: new VolumeReleaseTimeoutError(uuid, vol.id, 'vda', 20000), times: 1 });
    await expect(call('attach_volume', args)).rejects.toThrow(/the guest kept the disk .*so nothing is undone: the volume stays attached with its attachment/);
    // Deleting the attachment of a disk the guest still writes to would free the volume for another attach.
    expect(state()).toEqual({ attachments: [{ id: attachment, status: 'attaching', host: HOST }], volume: 'attaching', guest: { [vol.id]: 0 }, recordVolumes: [attachment], recordMappings: [vol.id], rows: 1 });
    expect(cinder.calls.filter((c) => c.startsWith('DELETE attachment'))).toEqual([]);
  });
});

describe('a detach the guest never acknowledges', () => {
  test('the volume stays attached everywhere and in use again; the fault says so', async () => {
    const { cinder, conductor, host, call, uuid, vol, prepare, state } = await setup();
    const { args, attachment } = await prepare();
    await call('attach_volume', args);
    host.driver.faults.inject('detachVolume', { error: new VolumeReleaseTimeoutError(uuid, vol.id, 'vda', 20000), times: 1 });
    cinder.beginDetaching(vol.id);
    await expect(call('detach_volume', { instance: { uuid }, volume_id: vol.id, attachment_id: attachment })).rejects.toThrow(/could not be detached. Reason: .*the volume stays attached/);
    expect(state()).toEqual({ attachments: [{ id: attachment, status: 'attached', host: HOST }], volume: 'in-use', guest: { [vol.id]: 0 }, recordVolumes: [attachment], recordMappings: [vol.id], rows: 1 });
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, fault: expect.stringMatching(/^volume detach failed: /) as unknown });
    expect(conductor.faults.length).toBeGreaterThan(0);
  });
});

describe('Cinder unavailable during a detach, after the guest gave the disk back', () => {
  test('the detach completes on this host and in nova; the attachment delete is owed, done once Cinder answers, and survives a restart', async () => {
    const { cinder, host, call, uuid, vol, prepare, state } = await setup();
    const { args, attachment } = await prepare();
    await call('attach_volume', args);
    cinder.beginDetaching(vol.id);
    cinder.failOn('DELETE attachment', 100);
    await call('detach_volume', { instance: { uuid }, volume_id: vol.id, attachment_id: attachment });
    expect(state()).toEqual({ attachments: [{ id: attachment, status: 'attached', host: HOST }], volume: 'detaching', guest: {}, recordVolumes: [], recordMappings: [], rows: 0 });
    expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(host.manager.record(uuid)?.fault).toBeUndefined();
    expect(host.manager.attachmentDeletes.pending()).toEqual([attachment]);

    // The agent restarts while Cinder is still down: the owed delete is in the journal's store, and
    // the new manager's drain finishes it once Cinder answers.
    await host.manager.attachmentDeletes.stop();
    const after = new ComputeManager(host.manager.deps);
    expect(after.attachmentDeletes.pending()).toEqual([attachment]);
    cinder.failOn('DELETE attachment', 0);
    expect(await after.attachmentDeletes.drainOnce()).toBe(0);
    expect(cinder.calls.filter((c) => c === `DELETE attachment ${attachment}`).length).toBeGreaterThanOrEqual(2);
    expect(state()).toEqual({ attachments: [], volume: 'available', guest: {}, recordVolumes: [], recordMappings: [], rows: 0 });
  });
});

describe('the agent killed mid-attach, the request replayed', () => {
  test('killed after the guest got the disk, before the record was saved: one attachment, in use, the disk once', async () => {
    const { cinder, host, call, vol, prepare, state, restarted } = await setup();
    const { args, attachment } = await prepare();
    const attachVolume = host.driver.attachVolume.bind(host.driver);
    let attachedOnce = false;
    host.driver.attachVolume = async (i: InstanceRef, v: AttachedVolume): Promise<void> => {
      await attachVolume(i, v);
      if (!attachedOnce) {
        attachedOnce = true;
        await never<void>();
      }
    };
    void call('attach_volume', args);
    for (let i = 0; i < 100 && !attachedOnce; i++) await new Promise((r) => setImmediate(r));
    expect(attachedOnce).toBe(true);
    expect(state()).toMatchObject({ volume: 'attaching', guest: { [vol.id]: 0 }, recordVolumes: [] });

    await restarted()('attach_volume', args);
    expect(state()).toEqual({ attachments: [{ id: attachment, status: 'attached', host: HOST }], volume: 'in-use', guest: { [vol.id]: 0 }, recordVolumes: [attachment], recordMappings: [vol.id], rows: 1 });
    expect(cinder.calls.filter((c) => c.startsWith('POST attachment'))).toEqual([]);
  });

  test('killed after the record was saved, before os-complete: the replay completes it and saves nova’s row', async () => {
    const { cinder, conductor, call, vol, prepare, state, restarted } = await setup();
    const { args, attachment, bdmId } = await prepare();
    const complete = cinder.completeAttachment.bind(cinder);
    let frozen = false;
    cinder.completeAttachment = (id: string): Promise<void> => {
      if (frozen) return complete(id);
      frozen = true;
      return never<void>();
    };
    void call('attach_volume', args);
    for (let i = 0; i < 100 && !frozen; i++) await new Promise((r) => setImmediate(r));
    expect(state()).toMatchObject({ volume: 'attaching', recordVolumes: [attachment] });
    // Until now nova's row may lack what a restart must redo; clear it to prove the replay writes it.
    const row = conductor.bdms.get(bdmId);
    if (row) delete row.connection_info;

    await restarted()('attach_volume', args);
    expect(state()).toEqual({ attachments: [{ id: attachment, status: 'attached', host: HOST }], volume: 'in-use', guest: { [vol.id]: 0 }, recordVolumes: [attachment], recordMappings: [vol.id], rows: 1 });
    expect(JSON.parse(String(conductor.bdms.get(bdmId)?.connection_info))).toMatchObject({ driver_volume_type: 'rbd', serial: vol.id });
    expect(cinder.calls.filter((c) => c.startsWith('PUT attachment'))).toHaveLength(1);
  });
});

describe('the agent killed mid-detach, the request replayed', () => {
  test('killed after the guest gave the disk back, before the record was saved: the replay finishes the detach', async () => {
    const { cinder, host, call, uuid, vol, prepare, state, restarted } = await setup();
    const { args, attachment } = await prepare();
    await call('attach_volume', args);
    cinder.beginDetaching(vol.id);
    const detachVolume = host.driver.detachVolume.bind(host.driver);
    let detachedOnce = false;
    host.driver.detachVolume = async (i: InstanceRef, id: string): Promise<void> => {
      await detachVolume(i, id);
      if (!detachedOnce) {
        detachedOnce = true;
        await never<void>();
      }
    };
    const detach = { instance: { uuid }, volume_id: vol.id, attachment_id: attachment };
    void call('detach_volume', detach);
    for (let i = 0; i < 100 && !detachedOnce; i++) await new Promise((r) => setImmediate(r));
    expect(state()).toMatchObject({ guest: {}, recordVolumes: [attachment], volume: 'detaching' });

    await restarted()('detach_volume', detach);
    expect(state()).toEqual({ attachments: [], volume: 'available', guest: {}, recordVolumes: [], recordMappings: [], rows: 0 });
    expect(host.manager.record(uuid)?.fault ?? null).toBeNull();
  });

  test('killed after nova’s row was destroyed, before the record dropped the mapping: the replay ends clean, no fault', async () => {
    const { cinder, cp, host, call, uuid, vol, prepare, state, restarted } = await setup();
    const { args, attachment } = await prepare();
    await call('attach_volume', args);
    cinder.beginDetaching(vol.id);
    const destroy = cp.destroyBlockDevice.bind(cp);
    let destroyedOnce = false;
    cp.destroyBlockDevice = async (...a: Parameters<typeof destroy>): Promise<void> => {
      await destroy(...a);
      if (!destroyedOnce) {
        destroyedOnce = true;
        await never<void>();
      }
    };
    const detach = { instance: { uuid }, volume_id: vol.id, attachment_id: attachment };
    void call('detach_volume', detach);
    for (let i = 0; i < 100 && !destroyedOnce; i++) await new Promise((r) => setImmediate(r));
    expect(state()).toMatchObject({ attachments: [], rows: 0, recordMappings: [vol.id] });

    await restarted()('detach_volume', detach);
    expect(state()).toEqual({ attachments: [], volume: 'available', guest: {}, recordVolumes: [], recordMappings: [], rows: 0 });
    expect(host.manager.record(uuid)?.fault ?? null).toBeNull();
  });
});
