// nova's compute methods the agent does not implement, through the dispatcher and in nova mode:
// every instance method nova 31's rpcapi sends is served or answered; a cast puts the instance in
// ERROR with a fault naming the method at once, and the agent goes on serving; a call gets
// NotImplementedError; a cast in the middle of another operation changes nothing.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { hostMethods } from '../../../../agent/compute/adapters/host-methods';
import { computeMethods } from '../../../../agent/compute/methods';
import { registerMethods } from '../../../../agent/compute/register';
import { UNSUPPORTED_METHODS } from '../../../../agent/compute/unsupported';
import { Dispatcher, type CallInfo } from '../../../../agent/rpc/endpoint/dispatcher';
import { failureFromError } from '../../../../agent/rpc/oslo/failure';
import type { RpcRequest } from '../../../../agent/rpc/oslo/messages';
import { PlacementClient } from '../../../../tracker/placement/client';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, instanceArgs, singleHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

/** Every method of nova 31's `ComputeAPI` (compute/rpcapi.py) that names an instance or instances, and Zed's get_rdp_console. */
const NOVA_INSTANCE_METHODS = [
  'add_fixed_ip_to_instance', 'attach_interface', 'attach_volume', 'check_can_live_migrate_destination', 'check_can_live_migrate_source',
  'check_instance_shared_storage', 'confirm_resize', 'confirm_snapshot_based_resize_at_source', 'detach_interface', 'detach_volume',
  'finish_resize', 'finish_revert_resize', 'finish_snapshot_based_resize_at_dest', 'finish_revert_snapshot_based_resize_at_source',
  'get_console_output', 'get_diagnostics', 'get_instance_diagnostics', 'get_vnc_console', 'get_spice_console', 'get_mks_console',
  'get_serial_console', 'validate_console_port', 'inject_network_info', 'live_migration', 'live_migration_force_complete',
  'live_migration_abort', 'pause_instance', 'post_live_migration_at_destination', 'pre_live_migration', 'prep_resize',
  'prep_snapshot_based_resize_at_dest', 'prep_snapshot_based_resize_at_source', 'reboot_instance', 'rebuild_instance',
  'remove_fixed_ip_from_instance', 'remove_volume_connection', 'rescue_instance', 'resize_instance', 'resume_instance', 'revert_resize',
  'revert_snapshot_based_resize_at_dest', 'rollback_live_migration_at_destination', 'drop_move_claim_at_destination', 'set_admin_password',
  'swap_volume', 'reserve_block_device_name', 'backup_instance', 'snapshot_instance', 'start_instance', 'stop_instance', 'suspend_instance',
  'terminate_instance', 'unpause_instance', 'unrescue_instance', 'soft_delete_instance', 'restore_instance', 'shelve_instance',
  'shelve_offload_instance', 'unshelve_instance', 'volume_snapshot_create', 'volume_snapshot_delete', 'allow_share', 'deny_share',
  'external_instance_event', 'build_and_run_instance', 'quiesce_instance', 'unquiesce_instance', 'trigger_crash_dump', 'get_rdp_console',
];

const CTX = { request_id: 'req-unsupported' };

const req = (method: string, args: Record<string, unknown>, reply = false): RpcRequest => ({
  method,
  args,
  version: '6.0',
  namespace: null,
  uniqueId: randomUUID(),
  reply: reply ? { msgId: 'm', replyQueue: 'q' } : undefined,
  callMonitorTimeout: null,
  context: CTX,
});
const info = (r: RpcRequest): CallInfo => ({ method: r.method, version: r.version, context: r.context, args: r.args, uniqueId: r.uniqueId ?? 'local', isCall: r.reply !== undefined, signal: new AbortController().signal });

async function setup(c?: FakeConductor) {
  const { host, peers, api } = await singleHost('host-u', c);
  // As the daemon registers them: a cast naming an instance with no record here goes to the control plane.
  const dispatcher = registerMethods(new Dispatcher(), [...hostMethods({ hostUptime: async () => 'up' }), ...computeMethods(host.manager)], (u, m, ctx) =>
    host.manager.controlPlane.lost(u, m, ctx),
  );
  const run = (r: RpcRequest): Promise<unknown> => dispatcher.resolve(r).invoke(info(r));
  return { host, peers, dispatcher, run, api };
}

test("every instance method of nova 31's compute RPC API is served (working or answered with a failure)", async () => {
  const { dispatcher } = await setup();
  const uuid = randomUUID();
  const unserved = NOVA_INSTANCE_METHODS.filter((m) => {
    try {
      dispatcher.resolve(req(m, m === 'external_instance_event' ? { instances: [], events: [] } : { instance: { uuid } }));
      return false;
    } catch (e) {
      return (e as Error).name === 'NoSuchMethodError';
    }
  });
  expect(unserved).toEqual([]);
});

test('a cast of an unimplemented method: ERROR with a fault naming it within a second, task cleared; the agent keeps serving', async () => {
  const { host, run } = await setup();
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await run(req('build_and_run_instance', { instance: inst }));
  const started = Date.now();
  const err = await run(req('add_fixed_ip_to_instance', { instance: { uuid }, network_id: 'net-1' })).catch((e: unknown) => e);
  expect(Date.now() - started).toBeLessThan(1000);
  expect(failureFromError(err)).toMatchObject({ className: 'NotImplementedError', module: 'builtins', message: `compute-agent does not implement add_fixed_ip_to_instance (instance ${uuid})` });
  expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'error', task_state: null, fault: 'compute-agent does not implement add_fixed_ip_to_instance' });
  const sent = host.notifier.sent.find((n) => n.event_type === 'instance.unsupported.error');
  expect(sent).toMatchObject({ priority: 'ERROR', payload: { 'nova_object.data': { uuid, state: 'error', task_state: null, fault: { 'nova_object.data': { exception_message: 'compute-agent does not implement add_fixed_ip_to_instance' } } } } });
  // Still serving: another instance builds, and the errored one can be deleted.
  const other = instanceArgs();
  await run(req('build_and_run_instance', { instance: other }));
  expect(host.manager.record(String(other.uuid))).toMatchObject({ vm_state: 'active' });
  await run(req('terminate_instance', { instance: { uuid } }));
  expect(host.manager.record(uuid)).toBeUndefined();
});

test('each unimplemented cast about an instance puts it in ERROR with a fault naming that method', async () => {
  const { host, run } = await setup();
  const casts = Object.entries(UNSUPPORTED_METHODS).filter(([, u]) => u.kind === 'error');
  expect(casts.length).toBeGreaterThan(3);
  for (const [name] of casts) {
    const inst = instanceArgs();
    const uuid = String(inst.uuid);
    await run(req('build_and_run_instance', { instance: inst }));
    await expect(run(req(name, { instance: { uuid } }))).rejects.toMatchObject({ method: name, instance: uuid });
    expect([name, host.manager.record(uuid)]).toEqual([name, expect.objectContaining({ vm_state: 'error', task_state: null, fault: `compute-agent does not implement ${name}` })]);
  }
});

test("a call gets NotImplementedError and leaves the instance as it was; a side cast (a volume snapshot's) is only logged", async () => {
  const { host, run } = await setup();
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await run(req('build_and_run_instance', { instance: inst }));
  await expect(run(req('get_spice_console', { instance: { uuid }, console_type: 'spice-html5' }, true))).rejects.toMatchObject({ method: 'get_spice_console' });
  await expect(run(req('volume_snapshot_delete', { instance: { uuid }, volume_id: randomUUID(), snapshot_id: randomUUID(), delete_info: {} }))).rejects.toMatchObject({ method: 'volume_snapshot_delete' });
  expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(host.manager.record(uuid)?.fault).toBeUndefined();
  await expect(run(req('external_instance_event', { instances: [{ uuid }], events: [{ instance_uuid: uuid, name: 'network-vif-plugged', tag: randomUUID(), status: 'completed' }] }))).resolves.toBeUndefined();
});

test('a cast for an instance this host does not have is refused as not found, changing nothing', async () => {
  const { run } = await setup();
  const uuid = randomUUID();
  await expect(run(req('suspend_instance', { instance: { uuid } }))).rejects.toMatchObject({ className: 'InstanceNotFound' });
});

describe('nova mode', () => {
  async function built(c: FakeConductor, run: (r: RpcRequest) => Promise<unknown>, api: PlacementClient, root: string): Promise<string> {
    const uuid = randomUUID();
    await api.putAllocations(uuid, { allocations: { [root]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    await run(req('build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, flavor: { ...FLAVOR } }) }));
    return uuid;
  }

  test("a cast: nova's Instance goes to ERROR with its task state cleared, and an InstanceFault names the method", async () => {
    const c = new FakeConductor();
    const { host, run, api } = await setup(c);
    const uuid = await built(c, run, api, host.rootUuid);
    const row = c.instances.get(uuid)!;
    c.calls.length = 0;
    await expect(run(req('add_fixed_ip_to_instance', { instance: c.prim('Instance', row), network_id: 'net-1' }))).rejects.toMatchObject({ method: 'add_fixed_ip_to_instance' });
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'error', task_state: null });
    expect(c.faults).toEqual([expect.objectContaining({ instance_uuid: uuid, host: 'host-u', code: 500, message: 'compute-agent does not implement add_fixed_ip_to_instance' })]);
    // The fault first, so a reader who sees ERROR also sees why (nova-compute's order).
    expect(c.names((x) => x.kind === 'object')).toEqual(['InstanceFault.create', 'Instance.save']);
  });

  test('a cast naming an instance nova places here but this host has no record of: ERROR with a fault, task state cleared', async () => {
    const c = new FakeConductor();
    const { run } = await setup(c);
    const uuid = randomUUID();
    c.instance({ id: 41, uuid, host: 'host-u', node: 'host-u', vm_state: 'active', task_state: 'powering-off' });
    await expect(run(req('stop_instance', { instance: { uuid }, clean_shutdown: true }))).rejects.toMatchObject({ className: 'InstanceNotFound' });
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'error', task_state: null });
    expect(c.faults).toEqual([expect.objectContaining({ instance_uuid: uuid, host: 'host-u', message: `stop_instance not done: instance ${uuid} is not on compute-agent host host-u` })]);
    // Unimplemented methods take the same way for an instance with no record.
    c.instances.get(uuid)!.task_state = 'pausing';
    await expect(run(req('allow_share', { instance: { uuid }, share_mapping: {} }))).rejects.toMatchObject({ className: 'InstanceNotFound' });
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'error', task_state: null });
    expect(c.faults).toHaveLength(2);
  });

  test('a cast naming an instance nova places on another host (it crossed a move) changes nothing in nova; a call is only refused', async () => {
    const c = new FakeConductor();
    const { run } = await setup(c);
    const uuid = randomUUID();
    c.instance({ id: 42, uuid, host: 'host-other', node: 'host-other', vm_state: 'active', task_state: 'powering-on' });
    await expect(run(req('start_instance', { instance: { uuid } }))).rejects.toMatchObject({ className: 'InstanceNotFound' });
    await expect(run(req('get_console_output', { instance: { uuid }, tail_length: 10 }, true))).rejects.toMatchObject({ className: 'InstanceNotFound' });
    expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: 'powering-on' });
    expect(c.faults).toEqual([]);
    expect(c.names((x) => x.kind === 'object')).toEqual([]);
  });
});
