// The claim service through a Placement outage (mocked Placement behind a transport that refuses
// connections or loses answers): operations finish once Placement answers, a write whose answer
// was lost is adopted rather than refused, and a 4xx still fails at once.
import nock from 'nock';
import type { Clock } from '../../../../lib/clock';
import type { Flavor } from '../../../../model/instance';
import { AllocationConflictError, PlacementOutageError } from '../../../../tracker/claims/errors';
import { ClaimService } from '../../../../tracker/claims/service';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { PlacementView } from '../../../../tracker/sync/view';
import { MockPlacement } from '../../../helpers/mock-placement';
import { OutageTransport } from '../../../helpers/outage-transport';

const HOST = '00000000-0000-0000-0000-0000000000e0';
const OTHER = '00000000-0000-0000-0000-0000000000f0';
const VM = '00000000-0000-0000-0000-00000000e001';
const MIG = '00000000-0000-0000-0000-00000000e0d1';
const FLAVOR: Flavor = { name: 'm1.tiny', vcpus: 1, memory_mb: 512, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };
const SIZE = { VCPU: 1, MEMORY_MB: 512, DISK_GB: 1 };

const instantClock = (): Clock => {
  let t = 0;
  return { now: () => t, sleep: (ms) => Promise.resolve(void (t += ms)) };
};

function world(deadlineMs = 60000): { mock: MockPlacement; transport: OutageTransport; api: PlacementClient; claims: ClaimService } {
  const mock = new MockPlacement().install();
  const transport = new OutageTransport();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base), transport, attempts: 1 }));
  const view = new PlacementView();
  view.applyListing([{ uuid: HOST, name: 'host', generation: 1, parent_provider_uuid: null, root_provider_uuid: HOST }]);
  const inv = (total: number): { total: number; reserved: number; min_unit: number; max_unit: number; step_size: number; allocation_ratio: number } => ({ total, reserved: 0, min_unit: 1, max_unit: total, step_size: 1, allocation_ratio: 1 });
  view.setRead(HOST, 'inventories', 1, { VCPU: inv(4), MEMORY_MB: inv(4096), DISK_GB: inv(40) });
  view.setRead(HOST, 'allocations', 1, {});
  const snapshot = { uuid: HOST, name: 'host', parent_provider_uuid: null, root_provider_uuid: HOST, generation: 1, inventories: view.known(HOST, 'inventories') ?? {}, traits: [], aggregates: [] };
  const claims = new ClaimService({ api, view, scope: { ourProviders: () => [snapshot], sharingProviders: () => [], othersInTree: () => new Set<string>(), listOthersInTree: () => Promise.resolve(new Set<string>()) }, retry: { deadlineMs, clock: instantClock() } });
  return { mock, transport, api, claims };
}
const inst = { uuid: VM, flavor: FLAVOR, project_id: 'p', user_id: 'u' };
const holds = (mock: MockPlacement, consumer: string): Record<string, Record<string, number>> | undefined => mock.consumers.get(consumer)?.allocations;

afterEach(() => nock.cleanAll());

test('a build claim made while Placement refuses connections is written once Placement answers', async () => {
  const { mock, transport, claims } = world();
  transport.refuse = 6;
  expect(await claims.claimForBuild(inst, { schedulerClaimed: false })).toEqual({ [HOST]: SIZE });
  expect(transport.refuse).toBe(0);
  expect(holds(mock, VM)).toEqual({ [HOST]: SIZE });
});

test('a build claim whose answer was lost is adopted on the next attempt, not refused as a conflict', async () => {
  const { mock, transport, claims } = world();
  transport.loseAnswers = 1;
  expect(await claims.claimForBuild(inst, { schedulerClaimed: false })).toEqual({ [HOST]: SIZE });
  expect(mock.writes().filter((w) => w.method === 'PUT')).toHaveLength(1);
  expect(holds(mock, VM)).toEqual({ [HOST]: SIZE });
});

test('a move swap whose answer was lost is kept on the next attempt; confirm and revert ride out refusals', async () => {
  const { mock, transport, api, claims } = world();
  await api.putAllocations(VM, { allocations: { [OTHER]: { resources: SIZE } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  transport.loseAnswers = 1;
  const claim = await claims.claimMoveDestination(VM, MIG, FLAVOR, { schedulerClaimed: false });
  expect(claim).toEqual({ dest: { [HOST]: SIZE }, source: { [OTHER]: SIZE } });
  expect(mock.writes().filter((w) => w.method === 'POST')).toHaveLength(1);
  expect(holds(mock, MIG)).toEqual({ [OTHER]: SIZE });
  transport.refuse = 3;
  await claims.revertMove(VM, MIG);
  expect(holds(mock, VM)).toEqual({ [OTHER]: SIZE });
  expect(holds(mock, MIG)).toBeUndefined();
  transport.refuse = 3;
  await claims.forceDelete(VM);
  expect(holds(mock, VM)).toBeUndefined();
});

test('a definite refusal is not retried: an existing consumer fails the claim at once', async () => {
  const { mock, api, claims } = world();
  await api.putAllocations(VM, { allocations: { [HOST]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  mock.requests.length = 0;
  await expect(claims.claimForBuild(inst, { schedulerClaimed: false })).rejects.toThrow(AllocationConflictError);
  expect(mock.writes()).toHaveLength(1);
});

test('an outage longer than the deadline fails the operation with PlacementOutageError; nothing stays in flight', async () => {
  const { mock, transport, claims } = world(5000);
  transport.refuse = 1000;
  await expect(claims.claimForBuild(inst, { schedulerClaimed: false })).rejects.toThrow(PlacementOutageError);
  expect(claims.has(VM)).toBe(false);
  expect(holds(mock, VM)).toBeUndefined();
});
