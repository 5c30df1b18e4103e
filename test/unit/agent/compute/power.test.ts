// stop, start, reboot, the console and the power-state sync on the fake driver, through the
// method table: the states each step leaves, what a driver failure leaves (task cleared, fault
// recorded; a reboot failing with the guest down: ERROR), and in nova mode the saves nova-compute
// makes (expected task states, action events, faults).
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { tailConsole } from '../../../../agent/compute/power';
import { PlacementClient } from '../../../../tracker/placement/client';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, instanceArgs, singleHost, type HarnessHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-power' };

async function setup(c?: FakeConductor) {
  const { host: a, api, peers } = await singleHost('host-p', c);
  const call = <T = unknown>(method: string, args: Record<string, unknown>): Promise<T> => peers.call<T>(a.name, method, args, CTX);
  return { a, api, call };
}

async function running(a: HarnessHost, call: (m: string, args: Record<string, unknown>) => Promise<unknown>): Promise<string> {
  const inst = instanceArgs();
  await call('build_and_run_instance', { instance: inst });
  expect(a.manager.record(String(inst.uuid))).toMatchObject({ vm_state: 'active' });
  return String(inst.uuid);
}

const events = (a: HarnessHost, uuid: string): string[] =>
  a.notifier.sent.filter((n) => (n.payload['nova_object.data'] as { uuid: string }).uuid === uuid).map((n) => n.event_type);

describe('standalone, fake driver', () => {
  test('stop, start, soft and hard reboot: the states nova shows, the guest as the driver has it, a notification per step', async () => {
    const { a, call } = await setup();
    const uuid = await running(a, call);
    const ref = { instance: { uuid } };
    await call('stop_instance', { ...ref, clean_shutdown: true });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'stopped', task_state: null, power_state: 4 });
    expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('SHUTDOWN');
    await call('start_instance', ref);
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    expect(a.driver.hypervisor.find(uuid)?.powerState).toBe('RUNNING');
    await call('reboot_instance', { ...ref, reboot_type: 'SOFT', block_device_info: null });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    // A hard reboot starts a stopped server (nova's API allows it from STOPPED).
    await call('stop_instance', { ...ref, clean_shutdown: false });
    await call('reboot_instance', { ...ref, reboot_type: 'HARD' });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    expect(events(a, uuid).slice(2)).toEqual([
      'instance.power_off.start', 'instance.power_off.end', 'instance.power_on.start', 'instance.power_on.end', 'instance.reboot.start', 'instance.reboot.end',
      'instance.power_off.start', 'instance.power_off.end', 'instance.reboot_hard.start', 'instance.reboot.end',
    ]);
    const log = await call<string>('get_console_output', { instance: { uuid }, tail_length: null });
    expect(log.split('\n').filter(Boolean).map((l) => l.replace(/^fake guest \S+: /, ''))).toEqual(['booted', 'powered off', 'booted', 'soft reboot', 'booted', 'powered off', 'hard reboot', 'booted']);
    // As nova counts: the log ends with a newline, so the last of the lines split off is empty.
    await expect(call('get_console_output', { instance: { uuid }, tail_length: '3' })).resolves.toMatch(/^fake guest \S+: hard reboot\nfake guest \S+: booted\n$/);
  });

  test('start of an ACTIVE server is refused by state; a driver failure clears the task and records the fault', async () => {
    const { a, call } = await setup();
    const uuid = await running(a, call);
    await expect(call('start_instance', { instance: { uuid } })).rejects.toThrow(`cannot start instance ${uuid} while it is active`);
    a.driver.faults.inject('powerOff', { error: new Error('guest stuck'), times: 1 });
    await call('stop_instance', { instance: { uuid } });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1, fault: 'stop failed: guest stuck' });
    expect(a.notifier.sent.at(-1)).toMatchObject({ event_type: 'instance.power_off.revert', priority: 'ERROR' });
  });

  test('a reboot that fails with the guest running leaves it ACTIVE with the fault; with the guest down, ERROR', async () => {
    const { a, call } = await setup();
    const uuid = await running(a, call);
    a.driver.faults.inject('reboot', { error: new Error('qmp timeout'), times: 1 });
    await call('reboot_instance', { instance: { uuid }, reboot_type: 'SOFT' });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, fault: 'reboot failed: qmp timeout' });
    await call('stop_instance', { instance: { uuid } });
    a.driver.faults.inject('reboot', { error: new Error('no such disk'), times: 1 });
    await call('reboot_instance', { instance: { uuid }, reboot_type: 'HARD' });
    expect(a.manager.record(uuid)).toMatchObject({ vm_state: 'error', task_state: null, power_state: 4, fault: 'reboot failed: no such disk' });
  });

  test('power-state sync: a crashed guest of an ACTIVE server is stopped; a running guest of a STOPPED one powered off; busy or vanished ones left', async () => {
    const { a, call } = await setup();
    const [crashed, restarted, busy, vanished] = [await running(a, call), await running(a, call), await running(a, call), await running(a, call)];
    await call('stop_instance', { instance: { uuid: restarted } });
    a.driver.hypervisor.find(crashed)!.powerState = 'CRASHED';
    a.driver.hypervisor.find(restarted)!.powerState = 'RUNNING';
    a.driver.hypervisor.find(busy)!.powerState = 'SHUTDOWN';
    const rec = a.manager.record(busy)!;
    rec.task_state = 'powering-off';
    await a.manager.context.save(rec);
    a.driver.hypervisor.delete(vanished);
    const result = await a.manager.power.syncPowerStates(CTX);
    expect(result).toEqual({ stopped: [crashed], forcedOff: [restarted], updated: [] });
    expect(a.manager.record(crashed)).toMatchObject({ vm_state: 'stopped', task_state: null, power_state: 4 });
    expect(a.driver.hypervisor.find(restarted)?.powerState).toBe('SHUTDOWN');
    expect(a.manager.record(busy)).toMatchObject({ vm_state: 'active', task_state: 'powering-off' });
    expect(a.manager.record(vanished)).toMatchObject({ vm_state: 'active', power_state: 1 });
    expect(events(a, crashed).at(-1)).toBe('instance.power_sync.stopped');
    // A second pass finds nothing to do.
    await expect(a.manager.power.syncPowerStates(CTX)).resolves.toEqual({ stopped: [], forcedOff: [], updated: [] });
  });
});

test("console tail: nova's _tail_log lines, ASCII with other bytes replaced", () => {
  const log = Buffer.concat([Buffer.from('one\ntwo\nth'), Buffer.from([0xc3, 0xa9]), Buffer.from('ree\n')]);
  expect(tailConsole(log, null)).toBe('one\ntwo\nth\ufffd\ufffdree\n');
  expect(tailConsole(log, 2)).toBe('th\ufffd\ufffdree\n');
  expect(tailConsole(log, 0)).toBe('');
  expect(tailConsole(log, 10)).toBe('one\ntwo\nth\ufffd\ufffdree\n');
});

describe('nova mode', () => {
  async function built(c: FakeConductor, a: HarnessHost, api: PlacementClient, call: (m: string, args: Record<string, unknown>) => Promise<unknown>): Promise<string> {
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [a.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await call('build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, flavor: { ...FLAVOR } }) });
    return uuid;
  }
  /** nova's API sets the task state, then casts with the Instance as it now is. */
  const api = (c: FakeConductor, uuid: string, task: string): Record<string, unknown> => {
    const row = c.instances.get(uuid)!;
    row.task_state = task;
    return c.prim('Instance', row);
  };

  test("stop, start, reboot: nova's saves with the expected task states, and an action event per method", async () => {
    const c = new FakeConductor();
    const { a, api: placement, call } = await setup(c);
    const uuid = await built(c, a, placement, call);
    c.calls.length = 0;
    await call('stop_instance', { instance: api(c, uuid, 'powering-off'), clean_shutdown: true });
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'stopped', task_state: null, power_state: 4 });
    await call('start_instance', { instance: api(c, uuid, 'powering-on') });
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    await call('reboot_instance', { instance: api(c, uuid, 'rebooting'), reboot_type: 'SOFT', block_device_info: null });
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    const saves = c.calls.filter((x) => x.what === 'Instance.save').map((x) => [x.changes, x.kwargs?.expected_task_state]);
    expect(saves).toEqual([
      [['power_state', 'vm_state', 'task_state'], ['powering-off', null]],
      [['power_state', 'vm_state', 'task_state'], 'powering-on'],
      [['task_state'], ['rebooting', 'reboot_pending', 'reboot_started', 'rebooting_hard', 'reboot_pending_hard', 'reboot_started_hard']],
      [['power_state', 'vm_state', 'task_state'], undefined],
    ]);
    const evs = c.calls.filter((x) => x.what.startsWith('InstanceActionEvent')).map((x) => `${x.what.split('.')[1]}:${String(x.args?.[1])}`);
    expect(evs).toEqual([
      'event_start:compute_stop_instance', 'event_finish_with_failure:compute_stop_instance',
      'event_start:compute_start_instance', 'event_finish_with_failure:compute_start_instance',
      'event_start:compute_reboot_instance', 'event_finish_with_failure:compute_reboot_instance',
    ]);
    expect(c.faults).toEqual([]);
  });

  test("a failed stop: nova's task cleared, the fault created, the action finished with it; the power sync stops a crashed guest in nova", async () => {
    const c = new FakeConductor();
    const { a, api: placement, call } = await setup(c);
    const uuid = await built(c, a, placement, call);
    a.driver.faults.inject('powerOff', { error: new Error('guest stuck'), times: 1 });
    await call('stop_instance', { instance: api(c, uuid, 'powering-off') });
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(c.faults.map((f) => f.message)).toEqual(['stop failed: guest stuck']);
    const finish = c.calls.find((x) => x.what === 'InstanceActionEvent.event_finish_with_failure' && x.args?.[1] === 'compute_stop_instance');
    expect(finish?.kwargs?.exc_val).toBe('stop failed: guest stuck');
    // nova records the action as an Error only with a traceback (none: 'Success').
    expect(finish?.kwargs?.exc_tb).toBe('compute-agent: stop failed: guest stuck\n');

    a.driver.hypervisor.find(uuid)!.powerState = 'CRASHED';
    await a.manager.power.syncPowerStates(CTX);
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'stopped', task_state: null, power_state: 4 });
  });
});
