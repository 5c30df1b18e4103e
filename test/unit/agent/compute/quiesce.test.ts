// quiesce_instance and unquiesce_instance (a volume-backed server's snapshot) through the method
// table on the fake driver, whose guest agent answers when the image asked for one: the freeze,
// the thaw only once Cinder has taken the volume snapshots (polled as nova polls them), nova's
// exceptions for a guest without an agent or one that fails, and a thaw that never waits forever
// on a Cinder that cannot say.
import nock from 'nock';
import type { Clock } from '../../../../lib/clock';
import type { CinderApi } from '../../../../agent/volume/cinder-api';
import { failureFromError } from '../../../../agent/rpc/oslo/failure';
import { instanceArgs, singleHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-quiesce' };

/** Cinder's snapshots: each says `creating` for `polls` reads, then `available`. */
function snapshots(polls: Record<string, number>): { cinder: CinderApi; reads: string[] } {
  const reads: string[] = [];
  const cinder = {
    getSnapshot: (id: string) => {
      reads.push(id);
      const left = polls[id];
      if (left === undefined) return Promise.reject(new Error(`no snapshot ${id}`));
      polls[id] = left - 1;
      return Promise.resolve({ id, status: left > 0 ? 'creating' : 'available' });
    },
  } as unknown as CinderApi;
  return { cinder, reads };
}

async function setup(cinder: CinderApi, withAgent = true) {
  let now = 0;
  const clock: Clock = { now: () => now, sleep: (ms: number) => Promise.resolve(void (now += ms)) };
  const { host, peers } = await singleHost('host-q', undefined, { clock, volumes: { cinder: { configured: true, forRequest: () => cinder }, ip: '192.0.2.10', allocateRetries: 1, allocateIntervalS: 0 } });
  const call = (method: string, args: Record<string, unknown>): Promise<unknown> => peers.call(host.name, method, args, CTX);
  const inst = instanceArgs();
  await call('build_and_run_instance', { instance: inst, image: { id: 'img', properties: withAgent ? { hw_qemu_guest_agent: 'yes' } : {} } });
  const uuid = String(inst.uuid);
  const console = (): string[] => host.driver.hypervisor.find(uuid)?.console ?? [];
  return { host, call, uuid, console, elapsed: () => now };
}

test('quiesce freezes; unquiesce thaws once every snapshot of the mapping is taken, polling each every half second', async () => {
  const { cinder, reads } = snapshots({ 'snap-1': 2, 'snap-2': 0 });
  const { call, uuid, console, elapsed } = await setup(cinder);
  await call('quiesce_instance', { instance: { uuid } });
  expect(console().at(-1)).toMatch(/filesystems frozen$/);
  const mapping = [{ source_type: 'snapshot', snapshot_id: 'snap-1' }, { source_type: 'image', snapshot_id: null }, { source_type: 'snapshot', snapshot_id: 'snap-2' }];
  await call('unquiesce_instance', { instance: { uuid }, mapping });
  expect(reads).toEqual(['snap-1', 'snap-1', 'snap-1', 'snap-2']);
  expect(elapsed()).toBe(1000);
  expect(console().at(-1)).toMatch(/filesystems thawed$/);
});

test('a snapshot Cinder cannot show, or one still creating after the wait: the guest is thawed anyway', async () => {
  const { cinder } = snapshots({ 'snap-slow': 1e9 });
  const { call, uuid, console, elapsed } = await setup(cinder);
  await call('quiesce_instance', { instance: { uuid } });
  await call('unquiesce_instance', { instance: { uuid }, mapping: [{ source_type: 'snapshot', snapshot_id: 'gone' }] });
  expect(console().at(-1)).toMatch(/filesystems thawed$/);
  await call('quiesce_instance', { instance: { uuid } });
  await call('unquiesce_instance', { instance: { uuid }, mapping: [{ source_type: 'snapshot', snapshot_id: 'snap-slow' }] });
  expect(elapsed()).toBeGreaterThanOrEqual(600_000);
  expect(console().at(-1)).toMatch(/filesystems thawed$/);
});

test("no guest agent: QemuGuestAgentNotEnabled (nova's API then snapshots unquiesced)", async () => {
  const none = await setup(snapshots({}).cinder, false);
  const err = await none.call('quiesce_instance', { instance: { uuid: none.uuid } }).catch((e: unknown) => e);
  expect(failureFromError(err)).toMatchObject({ className: 'QemuGuestAgentNotEnabled', module: 'nova.exception' });
});

test("an agent that fails: InstanceQuiesceFailed (nova's API answers 409), the server left as it was", async () => {
  const failing = await setup(snapshots({}).cinder);
  failing.host.driver.faults.inject('quiesce', { error: new Error('the guest agent is not answering'), times: 1 });
  const failed = await failing.call('quiesce_instance', { instance: { uuid: failing.uuid } }).catch((e: unknown) => e);
  expect(failureFromError(failed)).toMatchObject({ className: 'InstanceQuiesceFailed', module: 'nova.exception', message: expect.stringContaining('not answering') });
  expect(failing.host.manager.record(failing.uuid)).toMatchObject({ vm_state: 'active', task_state: null });
});
