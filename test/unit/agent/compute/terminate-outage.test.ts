// A terminate while Placement refuses connections completes locally (guest destroyed, record gone,
// control plane told); its allocation removal stays recorded, counts as in flight for the audit,
// and is done in the background once Placement answers.
import nock from 'nock';
import { ALLOCATION_REMOVAL } from '../../../../agent/compute/removals';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { instanceArgs, InProcessPeers, makeHost } from '../../../helpers/compute-harness';
import { MockPlacement } from '../../../helpers/mock-placement';
import { OutageTransport } from '../../../helpers/outage-transport';

afterEach(() => nock.cleanAll());

test('terminate during an outage: done locally at once, the allocation removed once Placement is back', async () => {
  const mock = new MockPlacement().install();
  const transport = new OutageTransport();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base), transport, attempts: 1 }));
  const peers = new InProcessPeers();
  const host = await makeHost('host-t', api, peers);
  const inst = instanceArgs();
  const uuid = String(inst.uuid);
  await peers.call(host.name, 'build_and_run_instance', { instance: inst }, { request_id: 'req-b' });
  expect(mock.consumers.has(uuid)).toBe(true);

  // Refused on the terminate's own try; the drain's first pass (about 1 s later) gets through.
  transport.refuse = 1;
  await peers.call(host.name, 'terminate_instance', { instance: { uuid } }, { request_id: 'req-t' });
  expect(host.manager.record(uuid)).toBeUndefined();
  expect(await host.driver.listInstances()).toEqual([]);
  expect(host.notifier.sent.map((n) => n.event_type)).toContain('instance.delete.end');
  expect(host.store.get(ALLOCATION_REMOVAL, uuid)).toMatchObject({ consumer: uuid, instance: uuid });
  expect(host.manager.inFlight().has(uuid)).toBe(true);
  expect(mock.consumers.has(uuid)).toBe(true);

  await host.manager.removals.settle();
  expect(mock.consumers.has(uuid)).toBe(false);
  expect(host.manager.removals.pending()).toEqual([]);
  expect(host.manager.inFlight().has(uuid)).toBe(false);
}, 15000);
