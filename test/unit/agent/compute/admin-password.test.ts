// set_admin_password in nova mode (fake driver, whose guest agent answers when the image asked for
// one; mocked Placement; the in-memory conductor), through the dispatcher as nova's call arrives.
// The test plays nova-api: it sets updating_password, then calls. The agent must set the password
// of the image's admin account, clear nova's task whatever happens, and answer as nova-compute
// does: InstanceAgentNotEnabled for an image without an agent, InstancePasswordSetFailed for a
// guest that is not running or an agent that fails, never echoing the password.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { computeMethods } from '../../../../agent/compute/methods';
import { registerMethods } from '../../../../agent/compute/register';
import { Dispatcher } from '../../../../agent/rpc/endpoint/dispatcher';
import { failureFromError } from '../../../../agent/rpc/oslo/failure';
import type { RpcRequest } from '../../../../agent/rpc/oslo/messages';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, singleHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-password' };
const PASSWORD = 'Tr0ub4dor&3-not-logged';

async function world(image: Record<string, unknown> | undefined, systemMetadata: Record<string, string> = {}) {
  const c = new FakeConductor();
  const { host, api } = await singleHost('host-p', c);
  const dispatcher = registerMethods(new Dispatcher(), computeMethods(host.manager));
  const run = (method: string, args: Record<string, unknown>, call = false): Promise<unknown> => {
    const r: RpcRequest = { method, args, version: '6.0', namespace: null, uniqueId: randomUUID(), reply: call ? { msgId: 'm', replyQueue: 'q' } : undefined, callMonitorTimeout: null, context: CTX };
    return dispatcher.resolve(r).invoke({ method, version: r.version, context: CTX, args, uniqueId: r.uniqueId ?? 'local', isCall: call, signal: new AbortController().signal });
  };
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [host.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  const inst = c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, flavor: { ...FLAVOR }, system_metadata: systemMetadata });
  await run('build_and_run_instance', { instance: inst, ...(image ? { image } : {}) });
  /** nova's API: updating_password set, then the call with the Instance as it now is. */
  const setPassword = (): Promise<unknown> => {
    const row = c.instances.get(uuid)!;
    row.task_state = 'updating_password';
    return run('set_admin_password', { instance: c.prim('Instance', row), new_pass: PASSWORD }, true);
  };
  return { c, host, uuid, run, setPassword };
}

test("an image with hw_qemu_guest_agent and os_admin_user: that account's password set in the guest; nova's task cleared, an action event", async () => {
  const { c, host, uuid, setPassword } = await world({ id: 'img', properties: { hw_qemu_guest_agent: 'yes', os_admin_user: 'cloud' } });
  expect(host.manager.record(uuid)?.image_meta).toEqual({ hw_qemu_guest_agent: true, os_admin_user: 'cloud' });
  c.calls.length = 0;
  await setPassword();
  expect(host.driver.hypervisor.find(uuid)?.passwords).toEqual({ cloud: PASSWORD });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(c.calls.filter((x) => x.what === 'Instance.save').map((x) => [x.changes, x.kwargs?.expected_task_state])).toEqual([[['task_state'], ['updating_password']]]);
  const evs = c.calls.filter((x) => x.what.startsWith('InstanceActionEvent')).map((x) => `${x.what.split('.')[1]}:${String(x.args?.[1])}`);
  expect(evs).toEqual(['event_start:compute_set_admin_password', 'event_finish_with_failure:compute_set_admin_password']);
  expect(c.faults).toEqual([]);
});

test("nova's system metadata alone (image_hw_qemu_guest_agent, no image argument) is enough; root by default", async () => {
  const { host, uuid, setPassword } = await world(undefined, { image_hw_qemu_guest_agent: 'True' });
  await setPassword();
  expect(host.driver.hypervisor.find(uuid)?.passwords).toEqual({ root: PASSWORD });
});

test('an image without a guest agent: InstanceAgentNotEnabled (nova-api: 409), the task cleared, the fault recorded', async () => {
  const { c, uuid, setPassword } = await world({ id: 'img', properties: { hw_qemu_guest_agent: 'no' } });
  const err = await setPassword().catch((e: unknown) => e);
  expect(failureFromError(err)).toMatchObject({ className: 'InstanceAgentNotEnabled', module: 'nova.exception' });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(c.faults.map((f) => f.message)).toEqual([expect.stringMatching(/has no guest agent: its image does not set hw_qemu_guest_agent=yes/)]);
});

test('a guest that is not running, or an agent that fails: InstancePasswordSetFailed, the task cleared, the password in no message', async () => {
  const { c, host, uuid, run, setPassword } = await world({ id: 'img', properties: { hw_qemu_guest_agent: true } });
  host.driver.faults.inject('setAdminPassword', { error: new Error('the guest agent of instance x is not answering'), times: 1 });
  const failed = await setPassword().catch((e: unknown) => e);
  expect(failureFromError(failed)).toMatchObject({ className: 'InstancePasswordSetFailed', module: 'nova.exception', message: `Failed to set admin password on ${uuid} because error setting admin password` });
  expect(c.instances.get(uuid)).toMatchObject({ task_state: null });
  expect(c.faults.at(-1)?.message).toMatch(/not answering/);

  c.instances.get(uuid)!.task_state = 'powering-off';
  await run('stop_instance', { instance: c.prim('Instance', c.instances.get(uuid)!), clean_shutdown: false });
  const stopped = await setPassword().catch((e: unknown) => e);
  expect(failureFromError(stopped)).toMatchObject({ className: 'InstancePasswordSetFailed', message: `Failed to set admin password on ${uuid} because instance ${uuid} is not running` });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'stopped', task_state: null });
  expect(host.driver.hypervisor.find(uuid)?.passwords).toBeUndefined();
  expect(JSON.stringify([c.faults, c.calls])).not.toContain(PASSWORD);
});
