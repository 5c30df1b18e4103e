// snapshot_instance and backup_instance on the fake driver, with Glance's writes recorded: the
// image filled as nova's libvirt driver fills it (formats, properties, then the data), the task
// states in order and nova's expected ones, a failure that deletes the image and records the
// fault, backups rotated down to `rotation`, and a host without Glance refusing clearly.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import type { GlanceImageWrites } from '../../../../virt-drivers/glance/api';
import { RecordingGlance } from '../../../helpers/recording-glance';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, instanceArgs, singleHost, type HarnessHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-snapshot' };

async function setup(glance: GlanceImageWrites | undefined, c?: FakeConductor) {
  const { host: a, api, peers } = await singleHost('host-i', c, glance ? { images: glance } : {});
  const call = <T = unknown>(method: string, args: Record<string, unknown>): Promise<T> => peers.call<T>(a.name, method, args, CTX);
  return { a, api, call };
}

async function running(a: HarnessHost, call: (m: string, args: Record<string, unknown>) => Promise<unknown>): Promise<string> {
  const inst = instanceArgs();
  await call('build_and_run_instance', { instance: inst });
  return String(inst.uuid);
}

describe('standalone, fake driver', () => {
  test("snapshot: the image gets nova's formats and properties, then the disk's data; the task is cleared", async () => {
    const glance = new RecordingGlance();
    const { a, call } = await setup(glance);
    const uuid = await running(a, call);
    const image = randomUUID();
    await call('snapshot_instance', { instance: { uuid }, image_id: image });
    expect(glance.calls).toEqual([`patch ${image}`, `upload ${image} ${glance.data.get(image)?.length ?? -1}`]);
    expect(glance.patches.get(image)).toEqual([
      { op: 'replace', path: '/disk_format', value: 'raw' },
      { op: 'replace', path: '/container_format', value: 'bare' },
      { op: 'add', path: '/image_location', value: 'snapshot' },
      { op: 'add', path: '/image_state', value: 'available' },
      { op: 'add', path: '/owner_id', value: a.manager.record(uuid)?.project_id },
    ]);
    expect(glance.data.get(image)).toMatch(/^fake disk of .*, running\n$/);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    const events = a.notifier.sent.map((n) => n.event_type).filter((e) => e.startsWith('instance.snapshot'));
    expect(events).toEqual(['instance.snapshot.start', 'instance.snapshot.end']);
  });

  test('quiesce: a guest whose image has a guest agent is copied quiesced; os_require_quiesce without one fails the snapshot (image deleted, fault)', async () => {
    const glance = new RecordingGlance();
    const { a, call } = await setup(glance);
    const agent = instanceArgs();
    await call('build_and_run_instance', { instance: agent, image: { id: 'img', properties: { hw_qemu_guest_agent: 'yes', os_require_quiesce: 'yes' } } });
    const first = randomUUID();
    await call('snapshot_instance', { instance: { uuid: agent.uuid }, image_id: first });
    expect(glance.data.get(first)).toMatch(/, running, quiesced\n$/);

    const none = instanceArgs();
    await call('build_and_run_instance', { instance: none, image: { id: 'img', properties: { os_require_quiesce: 'true' } } });
    const second = randomUUID();
    await call('snapshot_instance', { instance: { uuid: none.uuid }, image_id: second });
    expect(glance.calls.at(-1)).toBe(`delete ${second}`);
    expect(a.manager.record(String(none.uuid))).toMatchObject({ vm_state: 'active', task_state: null, fault: expect.stringMatching(/os_require_quiesce is set and the guest cannot be quiesced/) });
  });

  test('a failed upload clears the task, records the fault and deletes the image', async () => {
    const glance = new RecordingGlance();
    glance.failUpload = new Error('Glance went away');
    const { a, call } = await setup(glance);
    const uuid = await running(a, call);
    const image = randomUUID();
    await call('snapshot_instance', { instance: { uuid }, image_id: image });
    expect(glance.calls.at(-1)).toBe(`delete ${image}`);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, fault: 'snapshot failed: Glance went away' });
  });

  test('backup: a snapshot, then the oldest backups of its type beyond the rotation deleted', async () => {
    const glance = new RecordingGlance();
    const { a, call } = await setup(glance);
    const uuid = await running(a, call);
    glance.listed = ['b3', 'b2', 'b1'].map((id, i) => ({ id, status: 'active', createdAt: `2026-11-2${8 - i}T00:00:00Z` }));
    await call('backup_instance', { instance: { uuid }, image_id: 'b3', backup_type: 'daily', rotation: 1 });
    expect(glance.calls).toEqual([
      'patch b3',
      expect.stringMatching(/^upload b3 \d+$/),
      `list instance_uuid=${uuid}&image_type=backup&backup_type=daily&sort_key=created_at&sort_dir=desc`,
      'delete b2',
      'delete b1',
    ]);
    expect(a.manager.record(uuid)).toMatchObject({ task_state: null });
  });

  test('bad arguments are refused naming the field; a host without Glance fails the snapshot with what to set', async () => {
    const { a, call } = await setup(undefined);
    const uuid = await running(a, call);
    await expect(call('backup_instance', { instance: { uuid }, image_id: 'x', backup_type: 'daily', rotation: -1 })).rejects.toThrow(/rotation.*an integer >= 0/);
    await expect(call('snapshot_instance', { instance: { uuid }, image_id: 'not/an/id' })).rejects.toThrow(/image_id/);
    await call('snapshot_instance', { instance: { uuid }, image_id: randomUUID() });
    expect(a.manager.record(uuid)?.fault).toMatch(/Glance is not configured on this host: set \[glance\] endpoint_override/);
  });
});

describe('nova mode', () => {
  test("snapshot: nova's task states image_snapshot, image_pending_upload, image_uploading, none, each with the task nova expects", async () => {
    const c = new FakeConductor();
    const glance = new RecordingGlance();
    const { a, api, call } = await setup(glance, c);
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await call('build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, flavor: { ...FLAVOR } }) });
    const row = c.instances.get(uuid)!;
    row.task_state = 'image_snapshot_pending';
    c.calls.length = 0;
    await call('snapshot_instance', { instance: c.prim('Instance', row), image_id: randomUUID() });
    const saves = c.calls.filter((x) => x.what === 'Instance.save').map((x) => [x.changes, x.kwargs?.expected_task_state]);
    expect(saves).toEqual([
      [['task_state'], ['image_snapshot_pending', 'image_snapshot', 'image_backup', 'image_pending_upload', 'image_uploading']],
      [['power_state'], undefined],
      [['task_state'], ['image_snapshot', 'image_backup', 'image_pending_upload', 'image_uploading']],
      [['task_state'], ['image_pending_upload', 'image_uploading']],
      [['task_state'], 'image_uploading'],
    ]);
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    const evs = c.calls.filter((x) => x.what.startsWith('InstanceActionEvent')).map((x) => `${x.what.split('.')[1]}:${String(x.args?.[1])}`);
    expect(evs).toEqual(['event_start:compute_snapshot_instance', 'event_finish_with_failure:compute_snapshot_instance']);
  });
});
