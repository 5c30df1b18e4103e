// get_diagnostics through the method table: the driver's facts about a running instance in nova's
// Diagnostics shape; a stopped or unknown instance is refused, as nova-compute refuses it.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { InProcessPeers, instanceArgs, makeHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';

afterEach(() => nock.cleanAll());

test('a running instance: state, driver, vCPUs and memory; stopped or unknown: refused', async () => {
  const mock = new MockPlacement().install();
  const peers = new InProcessPeers();
  const a = await makeHost('host-d', new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) })), peers);
  const ctx = { request_id: 'req-diag' };
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await peers.call(a.name, 'build_and_run_instance', { instance: inst }, ctx);

  await expect(peers.call(a.name, 'get_diagnostics', { instance: { uuid } }, ctx)).resolves.toEqual({ state: 'running', driver: 'fake', num_cpus: 2, memory_details: { maximum: 2048 } });
  const rec = a.manager.record(uuid);
  if (rec) await a.driver.powerOff(rec);
  await expect(peers.call(a.name, 'get_diagnostics', { instance: { uuid } }, ctx)).rejects.toThrow(`cannot get the diagnostics of instance ${uuid} while it is power state shutdown`);
  const unknown = randomUUID();
  await expect(peers.call(a.name, 'get_diagnostics', { instance: { uuid: unknown } }, ctx)).rejects.toThrow(`instance ${unknown} could not be found on this host`);
});

test("get_instance_diagnostics: nova's Diagnostics object (libvirt's fields, the flavor's CPUs and memory, any power state)", async () => {
  const mock = new MockPlacement().install();
  const peers = new InProcessPeers();
  const a = await makeHost('host-d', new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) })), peers);
  const ctx = { request_id: 'req-diag' };
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await peers.call(a.name, 'build_and_run_instance', { instance: { ...inst, image_ref: 'img' } }, ctx);
  await peers.call(a.name, 'stop_instance', { instance: { uuid } }, ctx);
  const d = await peers.call<Record<string, unknown>>(a.name, 'get_instance_diagnostics', { instance: { uuid } }, ctx);
  expect(d).toMatchObject({ 'nova_object.name': 'Diagnostics', 'nova_object.version': '1.0' });
  const data = d['nova_object.data'] as Record<string, unknown>;
  expect(data).toMatchObject({ state: 'shutdown', driver: 'libvirt', hypervisor: 'qemu', config_drive: false, num_cpus: 2, num_nics: 0, num_disks: 1 });
  expect(data.memory_details).toMatchObject({ 'nova_object.name': 'MemoryDiagnostics', 'nova_object.data': { maximum: 2048, used: null } });
  expect((data.cpu_details as unknown[]).length).toBe(2);
  expect(typeof data.uptime).toBe('number');
});
