// The volume steps of a cold move taken again after they stopped half-way (Cinder failed, or the
// agent died and the journaled request came again): `VolumeMoves` on an in-memory Cinder, with the
// record saved as the journal would save it. A repeat goes on from what the record holds: no
// second attachment for a volume already handed off, no second connect of a volume connected.
import { silentLogger } from '../../../../lib/logging/logger';
import { NotifierControlPlane, type BlockDeviceChange, type ControlPlane } from '../../../../agent/compute/control-plane';
import { MemoryNotifier } from '../../../../agent/compute/ports';
import { VolumeMoveError, VolumeMoves } from '../../../../agent/compute/volume-moves';
import { CinderUnavailableError } from '../../../../agent/volume/errors';
import type { BlockDevice } from '../../../../model/block-device';
import type { InstanceRecord } from '../../../../model/instance';
import { FakeCinder, fakeCinderClients } from '../../../helpers/fake-cinder';

const UUID = '6f1c2b9e-0d7a-4f55-9a43-5a7e8e2c1d01';
const CTX = { request_id: 'req-resume' };
const CONNECTOR = { platform: 'x86_64', os_type: 'linux', ip: '192.0.2.2', host: 'host-b', multipath: false, enforce_multipath: true, do_local_attach: false };

/** A standalone control plane that keeps what it is told of nova's mapping rows. */
function recordingControlPlane(): { controlPlane: ControlPlane; rows: Map<number, BlockDeviceChange> } {
  const rows = new Map<number, BlockDeviceChange>();
  const controlPlane: ControlPlane = new NotifierControlPlane(new MemoryNotifier(), 'host-a', () => undefined);
  controlPlane.blockDevice = (_uuid, bdmId, change) => {
    rows.set(bdmId, { ...rows.get(bdmId), ...change });
    return Promise.resolve();
  };
  return { controlPlane, rows };
}

/** A record with two volumes connected on the host giving the instance up, its move recorded. */
async function setup() {
  const cinder = new FakeCinder();
  const { controlPlane, rows } = recordingControlPlane();
  const saved: InstanceRecord[] = [];
  const c = { host: 'host-a', log: silentLogger(), controlPlane, save: (r: InstanceRecord) => (saved.push(JSON.parse(JSON.stringify(r)) as InstanceRecord), Promise.resolve(r)) };
  const moves = new VolumeMoves(c, { cinder: fakeCinderClients(cinder), connector: CONNECTOR });
  const devices: BlockDevice[] = [];
  for (const [k, device] of ['/dev/vda', '/dev/vdb'].entries()) {
    const v = cinder.addVolume();
    const a = await cinder.createAttachment(v.id, UUID, { ...CONNECTOR, host: 'host-a', mountpoint: device });
    await cinder.completeAttachment(a.id);
    devices.push({ id: 50 + k, source_type: 'volume', destination_type: 'volume', boot_index: k === 0 ? 0 : null, device_name: device, delete_on_termination: false, volume_id: v.id, volume_size: null, image_id: null, snapshot_id: null, attachment_id: a.id, volume_type: null });
  }
  cinder.calls.length = 0;
  const rec = {
    uuid: UUID,
    migration: { uuid: 'mig-1', type: 'migration', status: 'migrating', source_compute: 'host-a', dest_compute: 'host-b', role: 'source' },
    block_devices: devices,
    volumes: [],
  } as unknown as InstanceRecord;
  return { cinder, rows, moves, rec, saved, old: devices.map((d) => d.attachment_id ?? '') };
}

const count = (cinder: FakeCinder, prefix: string): number => cinder.calls.filter((x) => x.startsWith(prefix)).length;

test('a hand-off that stopped at the second volume goes on from the record: one connector-less attachment per volume, the old ones deleted', async () => {
  const { cinder, rows, moves, rec, saved, old } = await setup();
  const del = cinder.deleteAttachment.bind(cinder);
  cinder.deleteAttachment = (id) => (id === old[1] ? Promise.reject(new CinderUnavailableError(`DELETE /v3/attachments/${id}`, 'connection reset')) : del(id));
  const err = await moves.disconnect(rec, CTX).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(VolumeMoveError);
  expect((err as VolumeMoveError).volumeId).toBe(rec.block_devices?.[1]?.volume_id);
  expect((err as VolumeMoveError).message).toMatch(/could not have its attachment .* on host-a deleted: DELETE .*connection reset/);
  expect((err as VolumeMoveError).cause).toBeInstanceOf(CinderUnavailableError);
  // The new attachment was journaled before the old one was asked to go.
  const made = rec.block_devices?.[1]?.attachment_id;
  expect(saved.some((r) => r.block_devices?.[1]?.attachment_id === made && r.migration?.old_attachment_ids?.[rec.block_devices?.[1]?.volume_id ?? ''] === old[1])).toBe(true);

  cinder.deleteAttachment = del; // the request again, Cinder back
  await moves.disconnect(rec, CTX);
  expect(count(cinder, 'POST attachment')).toBe(2);
  const now = rec.block_devices?.map((d) => d.attachment_id) ?? [];
  expect([...cinder.attachments.values()].map((a) => [a.id, a.connector, a.status]).sort()).toEqual(now.map((id) => [id, null, 'reserved']).sort());
  expect([...rows.entries()]).toEqual([
    [50, { attachment_id: now[0] }],
    [51, { attachment_id: now[1] }],
  ]);
  expect(rec.volumes).toEqual([]);
});

test('a connect that stopped at the second volume goes on from the record: each attachment connected once, then completed', async () => {
  const { cinder, rows, moves, rec } = await setup();
  await moves.disconnect(rec, CTX);
  const [first, second] = rec.block_devices?.map((d) => d.attachment_id ?? '') ?? [];
  const update = cinder.updateAttachment.bind(cinder);
  let refused = 0;
  cinder.updateAttachment = (id, connector) => (id === second && refused++ === 0 ? Promise.reject(new CinderUnavailableError(`PUT /v3/attachments/${id}`, 'timed out')) : update(id, connector));
  cinder.calls.length = 0;
  await expect(moves.connect(rec, CTX)).rejects.toThrow(new RegExp(`volume .* could not be connected to host-a: PUT /v3/attachments/${second}`));
  expect(rec.volumes?.map((v) => v.attachment_id)).toEqual([first]);
  await moves.connect(rec, CTX);
  // The first volume is not connected again; the second was asked twice (refused once before it reached the fake's log).
  expect(refused).toBe(2);
  expect(cinder.calls.filter((x) => x.startsWith('PUT attachment'))).toEqual([`PUT attachment ${first}`, `PUT attachment ${second}`]);
  expect(count(cinder, 'complete attachment')).toBe(2);
  expect([...cinder.attachments.values()].map((a) => [a.connector?.host, a.status])).toEqual([
    ['host-b', 'attached'],
    ['host-b', 'attached'],
  ]);
  expect(rec.volumes?.map((v) => [v.device_name, v.boot_index, v.attachment_id])).toEqual([
    ['/dev/vda', 0, first],
    ['/dev/vdb', null, second],
  ]);
  expect(rows.get(51)?.attachment_id).toBe(second);
  expect(JSON.parse(rows.get(51)?.connection_info ?? '{}')).toEqual(rec.volumes?.[1]?.connection_info);
  expect(rec.volumes?.[1]?.connection_info).toMatchObject({ driver_volume_type: 'rbd', serial: rec.block_devices?.[1]?.volume_id });
});
