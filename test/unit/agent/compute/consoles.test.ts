// get_vnc_console, get_serial_console and validate_console_port through the method table, in nova
// mode: the driver's console endpoint, a ConsoleAuthToken authorized through the conductor with
// [consoleauth] token_ttl, nova's connect info with the proxy's URL and the token; nova's refusals
// (ConsoleTypeInvalid, ConsoleTypeUnavailable, InstanceNotReady) and the proxy's port check.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { consoleAccessUrl } from '../../../../agent/compute/console-url';
import { failureFromError } from '../../../../agent/rpc/oslo/failure';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, singleHost } from '../../../helpers/compute-harness';
import type { ConsoleSettings } from '../../../../agent/compute/consoles';

afterEach(() => nock.cleanAll());

const CTX = { request_id: 'req-console' };
const ON: ConsoleSettings = { novncBaseUrl: 'http://127.0.0.1:6080/vnc_lite.html', serialBaseUrl: 'ws://127.0.0.1:6083/', tokenTtlS: 300 };

async function running(consoles: ConsoleSettings) {
  const c = new FakeConductor();
  const { host, peers, api } = await singleHost('host-con', c, { consoles });
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [host.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  await peers.call(host.name, 'build_and_run_instance', { instance: c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, flavor: { ...FLAVOR } }) }, CTX);
  return { c, host, peers, uuid };
}

/** What the caller would see of a failure: nova's class and message. */
async function failure(p: Promise<unknown>): Promise<{ className: string; module: string; message: string }> {
  try {
    await p;
  } catch (e) {
    const f = failureFromError(e);
    return { className: f.className, module: f.module, message: f.message };
  }
  throw new Error('expected a failure');
}

test("novnc: the driver's VNC endpoint, a token nova keeps for token_ttl, the noVNC URL with the token in its path", async () => {
  const { c, host, peers, uuid } = await running(ON);
  const rec = host.manager.record(uuid);
  const endpoint = await host.driver.getConsole(rec ?? { uuid, name: '' }, 'vnc');
  const info = await peers.call<Record<string, unknown>>(host.name, 'get_vnc_console', { instance: { uuid }, console_type: 'novnc' }, CTX);
  const token = String(info.token);
  expect(info).toEqual({ token, access_url: `http://127.0.0.1:6080/vnc_lite.html?path=%3Ftoken%3D${token}`, host: endpoint.host, port: endpoint.port, internal_access_path: null });
  expect(c.consoleTokens.get(token)).toMatchObject({ console_type: 'novnc', host: endpoint.host, port: endpoint.port, instance_uuid: uuid, access_url_base: ON.novncBaseUrl, internal_access_path: null, ttl: 300 });
  // The proxy's check before it connects: this port is the console's; another is not.
  await expect(peers.call(host.name, 'validate_console_port', { instance: { uuid }, port: String(endpoint.port), console_type: 'novnc' }, CTX)).resolves.toBe(true);
  await expect(peers.call(host.name, 'validate_console_port', { instance: { uuid }, port: String(endpoint.port + 1), console_type: 'novnc' }, CTX)).resolves.toBe(false);
});

test('serial: the serial endpoint and the serial proxy URL with ?token=', async () => {
  const { c, host, peers, uuid } = await running(ON);
  const info = await peers.call<Record<string, unknown>>(host.name, 'get_serial_console', { instance: { uuid }, console_type: 'serial' }, CTX);
  const token = String(info.token);
  expect(info.access_url).toBe(`ws://127.0.0.1:6083/?token=${token}`);
  expect(c.consoleTokens.get(token)).toMatchObject({ console_type: 'serial', port: info.port });
  await expect(peers.call(host.name, 'validate_console_port', { instance: { uuid }, port: String(info.port), console_type: 'serial' }, CTX)).resolves.toBe(true);
});

test("refusals as nova-compute's: a wrong type is ConsoleTypeInvalid, a kind switched off ConsoleTypeUnavailable, a stopped guest InstanceNotReady; no token is made", async () => {
  const { c, host, peers, uuid } = await running({ ...ON, serialBaseUrl: null });
  await expect(failure(peers.call(host.name, 'get_vnc_console', { instance: { uuid }, console_type: 'xvpvnc' }, CTX))).resolves.toMatchObject({ className: 'ConsoleTypeInvalid', module: 'nova.exception' });
  await expect(failure(peers.call(host.name, 'get_serial_console', { instance: { uuid }, console_type: 'serial' }, CTX))).resolves.toEqual({
    className: 'ConsoleTypeUnavailable',
    module: 'nova.exception',
    message: 'Unavailable console type serial: [serial_console] enabled is false on this host',
  });
  await peers.call(host.name, 'stop_instance', { instance: { uuid } }, CTX);
  const notReady = await failure(peers.call(host.name, 'get_vnc_console', { instance: { uuid }, console_type: 'novnc' }, CTX));
  expect(notReady).toMatchObject({ className: 'InstanceNotReady', module: 'nova.exception' });
  expect(notReady.message).toContain(`Instance ${uuid} is not ready`);
  // A stopped guest's console is no longer valid for the proxy.
  await expect(peers.call(host.name, 'validate_console_port', { instance: { uuid }, port: '5900', console_type: 'novnc' }, CTX)).resolves.toBe(false);
  expect(c.consoleTokens.size).toBe(0);
  const unknown = randomUUID();
  await expect(failure(peers.call(host.name, 'get_vnc_console', { instance: { uuid: unknown }, console_type: 'novnc' }, CTX))).resolves.toMatchObject({ className: expect.stringMatching(/^InstanceNotFound/) });
});

test("the instance's tokens are deleted from nova when it is deleted, as nova-compute deletes them", async () => {
  const { c, host, peers, uuid } = await running(ON);
  await peers.call(host.name, 'get_vnc_console', { instance: { uuid }, console_type: 'novnc' }, CTX);
  await peers.call(host.name, 'get_serial_console', { instance: { uuid }, console_type: 'serial' }, CTX);
  expect(c.consoleTokens.size).toBe(2);
  await peers.call(host.name, 'terminate_instance', { instance: { uuid } }, CTX);
  expect(c.consoleTokens.size).toBe(0);
  expect(c.names((k) => k.kind === 'class')).toContain('ConsoleAuthToken.clean_console_auths_for_instance');
});

test('an agent without console settings refuses both kinds as unavailable', async () => {
  const c = new FakeConductor();
  const { host, peers } = await singleHost('host-con', c);
  const uuid = randomUUID();
  await expect(failure(peers.call(host.name, 'get_vnc_console', { instance: { uuid }, console_type: 'novnc' }, CTX))).resolves.toMatchObject({ className: 'ConsoleTypeUnavailable' });
});

test("validate_console_port's port must be a port: a bad one is refused naming the argument", async () => {
  const { host, peers, uuid } = await running(ON);
  await expect(peers.call(host.name, 'validate_console_port', { instance: { uuid }, port: 'eighty', console_type: 'novnc' }, CTX)).rejects.toThrow(/port.*a port number or its decimal string/);
});

describe("the access URL: nova's ConsoleAuthToken.access_url", () => {
  test('novnc: the token goes into the path parameter, after any path the base names', () => {
    expect(consoleAccessUrl('novnc', 'http://h:6080/vnc_lite.html', 't1')).toBe('http://h:6080/vnc_lite.html?path=%3Ftoken%3Dt1');
    expect(consoleAccessUrl('novnc', 'http://h:6080/vnc_lite.html?path=websockify', 't1')).toBe('http://h:6080/vnc_lite.html?path=websockify%3Ftoken%3Dt1');
  });
  test('serial: ?token=', () => {
    expect(consoleAccessUrl('serial', 'ws://h:6083/', 't2')).toBe('ws://h:6083/?token=t2');
  });
});
