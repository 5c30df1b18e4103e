// The served method table on the dispatcher: nova's argument names per method, decoding on arrival
// (missing, unknown and malformed arguments refused before anything runs), ordering by instance,
// namespaces and versions, and the host methods beside the instance ones.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { hostMethods } from '../../../../agent/compute/adapters/host-methods';
import { computeMethods } from '../../../../agent/compute/methods';
import { UNSUPPORTED_METHODS } from '../../../../agent/compute/unsupported';
import { registerMethods } from '../../../../agent/compute/register';
import { Dispatcher, type CallInfo } from '../../../../agent/rpc/endpoint/dispatcher';
import { InvalidArgumentsError, NoSuchMethodError, NovaError, UnsupportedVersionError } from '../../../../agent/rpc/oslo/errors';
import type { RpcRequest } from '../../../../agent/rpc/oslo/messages';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { FLAVOR, InProcessPeers, instanceArgs, makeHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

afterEach(() => nock.cleanAll());

/** nova's argument names per method (nova `compute/rpcapi.py`, 6.x), and the agent's own. */
const NOVA_ARGS: Readonly<Record<string, readonly string[]>> = {
  build_and_run_instance: ['instance', 'image', 'request_spec', 'filter_properties', 'admin_password', 'injected_files', 'requested_networks', 'security_groups', 'block_device_mapping', 'node', 'limits', 'host_list', 'accel_uuids'],
  terminate_instance: ['instance', 'bdms'],
  soft_delete_instance: ['instance'],
  restore_instance: ['instance'],
  set_admin_password: ['instance', 'new_pass'],
  quiesce_instance: ['instance'],
  unquiesce_instance: ['instance', 'mapping'],
  prep_resize: ['instance', 'flavor', 'image', 'request_spec', 'filter_properties', 'node', 'migration', 'clean_shutdown', 'host_list'],
  resize_instance: ['instance', 'migration', 'image', 'flavor', 'clean_shutdown', 'request_spec'],
  // `bdms` on finish_resize, finish_revert_resize and pre_live_migration: the agent's own (nova's
  // destination reads the mappings from its database; an agent is sent them by the other host).
  finish_resize: ['instance', 'migration', 'image', 'disk_info', 'request_spec', 'bdms'],
  confirm_resize: ['instance', 'migration'],
  revert_resize: ['instance', 'migration', 'request_spec'],
  finish_revert_resize: ['instance', 'migration', 'request_spec', 'bdms'],
  check_can_live_migrate_destination: ['instance', 'block_migration', 'disk_over_commit', 'migration', 'limits'],
  check_can_live_migrate_source: ['instance', 'dest_check_data'],
  live_migration: ['instance', 'dest', 'block_migration', 'migration', 'migrate_data'],
  pre_live_migration: ['instance', 'disk', 'migrate_data', 'block_migration', 'bdms'],
  post_live_migration_at_destination: ['instance', 'block_migration'],
  rollback_live_migration_at_destination: ['instance', 'destroy_disks', 'migrate_data'],
  drop_move_claim_at_destination: ['instance', 'migration'],
  stop_instance: ['instance', 'clean_shutdown'],
  start_instance: ['instance'],
  reboot_instance: ['instance', 'block_device_info', 'reboot_type'],
  pause_instance: ['instance'],
  unpause_instance: ['instance'],
  suspend_instance: ['instance'],
  resume_instance: ['instance'],
  trigger_crash_dump: ['instance'],
  snapshot_instance: ['instance', 'image_id'],
  backup_instance: ['instance', 'image_id', 'backup_type', 'rotation'],
  shelve_instance: ['instance', 'image_id', 'clean_shutdown', 'accel_uuids'],
  shelve_offload_instance: ['instance', 'clean_shutdown', 'accel_uuids'],
  unshelve_instance: ['instance', 'image', 'filter_properties', 'node', 'request_spec', 'accel_uuids'],
  live_migration_abort: ['instance', 'migration_id'],
  rescue_instance: ['instance', 'rescue_password', 'rescue_image_ref', 'clean_shutdown'],
  check_instance_shared_storage: ['instance', 'data'],
  unrescue_instance: ['instance'],
  live_migration_force_complete: ['instance'],
  get_console_output: ['instance', 'tail_length'],
  attach_interface: ['instance', 'network_id', 'port_id', 'requested_ip', 'tag'],
  detach_interface: ['instance', 'port_id'],
  // nova/compute/rpcapi.py: reserve_block_device_name (a call), attach_volume and detach_volume (casts).
  reserve_block_device_name: ['instance', 'device', 'volume_id', 'disk_bus', 'device_type', 'tag', 'multiattach'],
  attach_volume: ['instance', 'bdm'],
  detach_volume: ['instance', 'volume_id', 'attachment_id'],
  // swap_volume (a cast from nova-api for Cinder's migration or retype); remove_volume_connection
  // (a call, the live-migration rollback; `host` routes it and is not sent, `delete_attachment` since 6.3).
  swap_volume: ['instance', 'old_volume_id', 'new_volume_id', 'new_attachment_id'],
  remove_volume_connection: ['instance', 'volume_id', 'delete_attachment'],
  rebuild_instance: ['instance', 'new_pass', 'injected_files', 'image_ref', 'orig_image_ref', 'orig_sys_metadata', 'bdms', 'recreate', 'on_shared_storage', 'preserve_ephemeral', 'migration', 'scheduled_node', 'limits', 'request_spec', 'accel_uuids', 'reimage_boot_volume', 'target_state'],
  get_diagnostics: ['instance'],
  inject_network_info: ['instance'],
  get_instance_diagnostics: ['instance'],
  // get_vnc_console / get_serial_console (calls from nova-api), validate_console_port (a call from nova's proxies).
  get_vnc_console: ['instance', 'console_type'],
  get_serial_console: ['instance', 'console_type'],
  validate_console_port: ['instance', 'port', 'console_type'],
  confirm_resize_at_destination: ['instance', 'migration'],
  list_instances: [],
  show_instance: ['instance'],
  external_instance_event: ['instances', 'events'],
};

const req = (method: string, args: Record<string, unknown>, version = '6.0', namespace: string | null = null): RpcRequest => ({
  method,
  args,
  version,
  namespace,
  uniqueId: randomUUID(),
  reply: undefined,
  callMonitorTimeout: null,
  context: { request_id: 'req-methods' },
});
const call = (r: RpcRequest): CallInfo => ({ method: r.method, version: r.version, context: r.context, args: r.args, uniqueId: r.uniqueId ?? 'local', isCall: true, signal: new AbortController().signal });
const prim = (name: string, data: object): Record<string, unknown> => ({ 'nova_object.name': name, 'nova_object.namespace': 'nova', 'nova_object.version': '1.0', 'nova_object.data': data });

async function setup() {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const host = await makeHost('host-m', api, new InProcessPeers());
  const methods = computeMethods(host.manager);
  const dispatcher = registerMethods(new Dispatcher(), [...hostMethods({ hostUptime: async () => 'up' }), ...methods]);
  const run = (r: RpcRequest): Promise<unknown> => dispatcher.resolve(r).invoke(call(r));
  return { host, methods, dispatcher, run };
}

function refusal(fn: () => unknown): InvalidArgumentsError {
  try {
    fn();
  } catch (e) {
    if (e instanceof InvalidArgumentsError) return e;
    throw e;
  }
  throw new Error('not refused');
}

test("each instance method takes exactly nova's argument names", async () => {
  const { methods } = await setup();
  const served = methods.filter((m) => !(m.name in UNSUPPORTED_METHODS));
  expect(Object.fromEntries(served.map((m) => [m.name, Object.keys(m.args).sort()]))).toEqual(
    Object.fromEntries(Object.entries(NOVA_ARGS).map(([name, args]) => [name, [...args].sort()])),
  );
  const refused = methods.filter((m) => m.name in UNSUPPORTED_METHODS);
  expect(Object.fromEntries(refused.map((m) => [m.name, Object.keys(m.args).sort()]))).toEqual(
    Object.fromEntries(Object.entries(UNSUPPORTED_METHODS).map(([name, u]) => [name, ['instance', ...u.args].sort()])),
  );
});

test("nova's compute API is served at 6.4 (2025.1), the agent's own namespace at 1.0, nova's baseapi at 1.1", async () => {
  const { dispatcher, methods } = await setup();
  expect([dispatcher.servedVersion(), dispatcher.servedVersion('compute_agent', 1), dispatcher.servedVersion('baseapi', 1)]).toEqual(['6.4', '1.0', '1.1']);
  expect(methods.filter((m) => m.namespace === 'compute_agent').map((m) => m.name)).toEqual(['confirm_resize_at_destination', 'list_instances', 'show_instance']);
  const served = methods.filter((m) => !(m.name in UNSUPPORTED_METHODS));
  expect(served.filter((m) => !m.journaled).map((m) => m.name)).toEqual(['check_can_live_migrate_source', 'quiesce_instance', 'set_admin_password', 'get_vnc_console', 'get_serial_console', 'validate_console_port', 'get_console_output', 'inject_network_info', 'get_diagnostics', 'get_instance_diagnostics', 'list_instances', 'show_instance', 'external_instance_event', 'check_instance_shared_storage', 'live_migration_abort', 'live_migration_force_complete']);
});

test('every compute method takes 6.0 to 6.4 (what Zed and 2025.1 send); 6.5 is refused as unsupported, a method nova does not send as unknown', async () => {
  const { dispatcher, run } = await setup();
  const uuid = randomUUID();
  for (const v of ['6.0', '6.1', '6.2', '6.3', '6.4']) {
    expect(dispatcher.resolve(req('terminate_instance', { instance: prim('Instance', { uuid }), bdms: null }, v)).orderingKey).toBe(uuid);
    await expect(run(req('get_host_uptime', {}, v))).resolves.toBe('up');
  }
  expect(() => dispatcher.resolve(req('terminate_instance', { instance: prim('Instance', { uuid }) }, '6.5'))).toThrow(UnsupportedVersionError);
  expect(() => dispatcher.resolve(req('get_host_uptime', {}, '7.0'))).toThrow(UnsupportedVersionError);
  // 2025.1's allow_share (6.4) is answered (with a failure, `agent/compute/unsupported.ts`); a method nova never sends is unknown.
  expect(dispatcher.resolve(req('allow_share', { instance: prim('Instance', { uuid }), share_mapping: null }, '6.4')).orderingKey).toBe(uuid);
  expect(() => dispatcher.resolve(req('refresh_instance_security_rules', { instance: prim('Instance', { uuid }) }, '6.0'))).toThrow(NoSuchMethodError);
});

test("nova's baseapi ping and get_backdoor_port are served, and get_host_uptime", async () => {
  const { run } = await setup();
  await expect(run(req('ping', { arg: { x: 1 } }, '1.1', 'baseapi'))).resolves.toEqual({ service: 'nova-compute', arg: { x: 1 } });
  await expect(run(req('get_backdoor_port', {}, '1.1', 'baseapi'))).resolves.toBeNull();
  await expect(run(req('get_host_uptime', {}))).resolves.toBe('up');
});

test('requests are ordered by the uuid of their instance, sent as a primitive or as plain JSON', async () => {
  const { dispatcher } = await setup();
  const uuid = randomUUID();
  expect(dispatcher.resolve(req('terminate_instance', { instance: prim('Instance', { uuid, host: 'host-m' }), bdms: null })).orderingKey).toBe(uuid);
  expect(dispatcher.resolve(req('show_instance', { instance: { uuid } }, '1.0', 'compute_agent')).orderingKey).toBe(uuid);
  expect(dispatcher.resolve(req('get_host_uptime', {})).orderingKey).toBeUndefined();
});

test('a missing instance or an unknown argument is refused on arrival, as Python refuses a bad call', async () => {
  const { dispatcher } = await setup();
  expect(refusal(() => dispatcher.resolve(req('terminate_instance', { bdms: [] }))).problems).toEqual(["missing required argument 'instance' (an Instance with a uuid)"]);
  expect(refusal(() => dispatcher.resolve(req('confirm_resize', { instance: { uuid: randomUUID() }, migration: {}, reservations: [] }))).problems).toContain(
    "got an unexpected keyword argument 'reservations'",
  );
});

test('a malformed argument is refused naming each wrong field and the expected form', async () => {
  const { dispatcher } = await setup();
  const e = refusal(() => dispatcher.resolve(req('prep_resize', { instance: { ...instanceArgs(), uuid: 'not-a-uuid' }, flavor: { ...FLAVOR, vcpus: 0 }, migration: prim('Migration', { uuid: randomUUID() }) })));
  expect(e.toRemoteFailure()).toMatchObject({ className: 'TypeError', module: 'builtins' });
  expect(e.problems).toEqual([
    "argument 'instance': expected an Instance (object primitive or plain object), got an object (instance.uuid: a UUID)",
    "argument 'flavor': expected a Flavor (object primitive or plain object), got an object (flavor.vcpus: an integer >= 1)",
    "argument 'migration': expected a Migration (object primitive or plain object), got a Migration object (migration.source_compute: missing)",
  ]);
});

test('optional arguments may be null; a flavor is taken from the request spec when the instance has none', async () => {
  const { host, run } = await setup();
  const inst = instanceArgs();
  delete inst.flavor;
  const uuid = String(inst.uuid);
  await run(req('build_and_run_instance', { instance: prim('Instance', inst), request_spec: prim('RequestSpec', { flavor: prim('Flavor', FLAVOR) }), host_list: null, image: {}, node: null }));
  expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', flavor: { vcpus: 2 } });
  await expect(run(req('build_and_run_instance', { instance: instanceArgs(randomUUID(), undefined), request_spec: null }))).resolves.toBeUndefined();
});

test("the flows' errors reach the caller as nova exceptions", async () => {
  const { run } = await setup();
  const gone = randomUUID();
  const notFound = await run(req('show_instance', { instance: { uuid: gone } }, '1.0', 'compute_agent')).catch((e: unknown) => e);
  expect(notFound).toBeInstanceOf(NovaError);
  expect(notFound).toMatchObject({ className: 'InstanceNotFound', code: 404 });
  const noFlavor = instanceArgs();
  delete noFlavor.flavor;
  await expect(run(req('build_and_run_instance', { instance: noFlavor }))).rejects.toMatchObject({ className: 'Invalid', code: 400, message: expect.stringContaining('no request_spec.flavor') as string });
});
