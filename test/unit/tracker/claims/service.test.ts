// The claim service on a mocked Placement: what each intent writes (and does not), which error each
// refusal is, and that the in-flight book follows the writes.
import nock from 'nock';
import type { Flavor } from '../../../../model/instance';
import type { ProviderSnapshot } from '../../../../model/provider-types';
import { AllocationConflictError, ClaimMismatchError, InsufficientResourcesError, InvalidExtraSpecError } from '../../../../tracker/claims/errors';
import { ClaimService } from '../../../../tracker/claims/service';
import { NoAuth } from '../../../../tracker/placement/auth';
import { PlacementClient } from '../../../../tracker/placement/client';
import { PlacementHttp } from '../../../../tracker/placement/http';
import { PlacementView } from '../../../../tracker/sync/view';
import { MockPlacement } from '../../../helpers/mock-placement';

const ROOT = '00000000-0000-0000-0000-0000000000a0';
const GPU = '00000000-0000-0000-0000-0000000000a1';
const SOURCE = '00000000-0000-0000-0000-0000000000b0';
const VM = '00000000-0000-0000-0000-00000000c001';
const MIG = '00000000-0000-0000-0000-00000000d001';

const inv = (total: number): { total: number; reserved: number; min_unit: number; max_unit: number; step_size: number; allocation_ratio: number } => ({
  total,
  reserved: 0,
  min_unit: 1,
  max_unit: total,
  step_size: 1,
  allocation_ratio: 1,
});
const FLAVOR: Flavor = { name: 'm1.small', vcpus: 2, memory_mb: 2048, root_gb: 10, ephemeral_gb: 0, swap: 0, extra_specs: {} };
const BASE = { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 10 };

/** A host with a root (8 VCPU, 8 GiB, 100 GB) and one GPU child (2 VGPU), as the tracker last read it. */
function world(): { mock: MockPlacement; api: PlacementClient; claims: ClaimService } {
  const mock = new MockPlacement().install();
  const api = new PlacementClient(new PlacementHttp({ auth: new NoAuth(mock.base) }));
  const view = new PlacementView();
  view.applyListing([
    { uuid: ROOT, name: 'host', generation: 1, parent_provider_uuid: null, root_provider_uuid: ROOT },
    { uuid: GPU, name: 'host_gpu', generation: 1, parent_provider_uuid: ROOT, root_provider_uuid: ROOT },
  ]);
  view.setRead(ROOT, 'inventories', 1, { VCPU: inv(8), MEMORY_MB: inv(8192), DISK_GB: inv(100) });
  view.setRead(GPU, 'inventories', 1, { VGPU: inv(2) });
  view.setRead(ROOT, 'allocations', 1, {});
  view.setRead(GPU, 'allocations', 1, {});
  const snapshot = (uuid: string): ProviderSnapshot => ({
    uuid,
    name: uuid,
    parent_provider_uuid: uuid === ROOT ? null : ROOT,
    root_provider_uuid: ROOT,
    generation: 1,
    inventories: view.known(uuid, 'inventories') ?? {},
    traits: [],
    aggregates: [],
  });
  const claims = new ClaimService({ api, view, scope: { ourProviders: () => [snapshot(ROOT), snapshot(GPU)], sharingProviders: () => [], othersInTree: () => new Set<string>(), listOthersInTree: () => Promise.resolve(new Set<string>()) } });
  return { mock, api, claims };
}

const holds = (mock: MockPlacement, consumer: string): Record<string, Record<string, number>> | undefined => mock.consumers.get(consumer)?.allocations;
const put = (api: PlacementClient, consumer: string, allocs: Record<string, Record<string, number>>): Promise<void> =>
  api.putAllocations(consumer, { allocations: Object.fromEntries(Object.entries(allocs).map(([rp, resources]) => [rp, { resources }])), project_id: 'p', user_id: 'u', consumer_generation: null });
const instance = (flavor: Flavor = FLAVOR): { uuid: string; flavor: Flavor; project_id: string; user_id: string } => ({ uuid: VM, flavor, project_id: 'p', user_id: 'u' });

afterEach(() => nock.cleanAll());

describe('ClaimService: a build', () => {
  test('without a scheduler claim: one PUT with consumer_generation null, extra-spec classes on the child; in flight until a read shows it', async () => {
    const { mock, claims } = world();
    const got = await claims.claimForBuild(instance({ ...FLAVOR, extra_specs: { 'resources:VGPU': '1' } }), { schedulerClaimed: false, requestId: 'req-1' });
    expect(got).toEqual({ [ROOT]: BASE, [GPU]: { VGPU: 1 } });
    expect(mock.writes()).toHaveLength(1);
    expect(mock.writes()[0]).toMatchObject({ method: 'PUT', path: `/allocations/${VM}`, body: { consumer_generation: null, project_id: 'p', user_id: 'u' } });
    expect(holds(mock, VM)).toEqual(got);
    expect(claims.has(VM)).toBe(true);
    expect(claims.consumers()).toEqual(new Set([VM]));
    claims.reconcile(ROOT, { [VM]: BASE });
    expect(claims.has(VM)).toBe(true);
    claims.reconcile(GPU, { [VM]: { VGPU: 1 } });
    expect(claims.has(VM)).toBe(false);
  });

  test('a malformed extra spec is refused before anything is read, claimed or written', async () => {
    const { mock, claims } = world();
    const bad = instance({ ...FLAVOR, extra_specs: { 'resources:VGPU': 'one' } });
    await expect(claims.claimForBuild(bad, { schedulerClaimed: false })).rejects.toThrow(InvalidExtraSpecError);
    await expect(claims.claimForBuild(bad, { schedulerClaimed: true })).rejects.toThrow('flavor.extra_specs.resources:VGPU = "one": expected an integer >= 0');
    expect(mock.requests).toEqual([]);
    expect(claims.has(VM)).toBe(false);
  });

  test('no room here: refused locally, nothing written, nothing in flight; a claim in flight counts against the next', async () => {
    const { mock, claims } = world();
    await expect(claims.claimForBuild(instance({ ...FLAVOR, extra_specs: { 'resources:VGPU': '3' } }), { schedulerClaimed: false })).rejects.toThrow(InsufficientResourcesError);
    expect(mock.writes()).toEqual([]);
    expect(claims.has(VM)).toBe(false);
    await claims.claimForBuild(instance({ ...FLAVOR, vcpus: 7 }), { schedulerClaimed: false });
    const other = { ...instance(), uuid: '00000000-0000-0000-0000-00000000c002' };
    await expect(claims.claimForBuild(other, { schedulerClaimed: false })).rejects.toThrow(`not enough VCPU on provider ${ROOT}: 2 requested, 1 free`);
  });

  test('an existing consumer is a conflict, never overwritten; the in-flight claim is released', async () => {
    const { mock, api, claims } = world();
    await put(api, VM, { [ROOT]: { VCPU: 1 } });
    await expect(claims.claimForBuild(instance(), { schedulerClaimed: false })).rejects.toThrow(AllocationConflictError);
    expect(holds(mock, VM)).toEqual({ [ROOT]: { VCPU: 1 } });
    expect(claims.has(VM)).toBe(false);
  });

  test('a scheduler claim is verified, not written: on this host and of the flavor size, or ClaimMismatchError', async () => {
    const { mock, api, claims } = world();
    await put(api, VM, { [ROOT]: BASE });
    mock.requests.length = 0;
    expect(await claims.claimForBuild(instance(), { schedulerClaimed: true })).toEqual({ [ROOT]: BASE });
    expect(mock.writes()).toEqual([]);
    await expect(claims.claimForBuild(instance({ ...FLAVOR, vcpus: 4 }), { schedulerClaimed: true })).rejects.toThrow(/VCPU 2 claimed, 4 asked/);
    await put(api, MIG, { [SOURCE]: BASE });
    await expect(claims.claimForBuild({ ...instance(), uuid: MIG }, { schedulerClaimed: true })).rejects.toThrow(ClaimMismatchError);
    expect(claims.has(VM)).toBe(false);
  });

  test('resuming after a crash adopts a claim written before it, and claims when none was', async () => {
    const { mock, api, claims } = world();
    await put(api, VM, { [ROOT]: BASE });
    mock.requests.length = 0;
    expect(await claims.claimForBuild(instance(), { schedulerClaimed: false, resuming: true })).toEqual({ [ROOT]: BASE });
    expect(mock.writes()).toEqual([]);
    await claims.forceDelete(VM);
    expect(await claims.claimForBuild(instance(), { schedulerClaimed: false, resuming: true })).toEqual({ [ROOT]: BASE });
    expect(mock.writes().map((w) => w.method)).toEqual(['DELETE', 'PUT']);
  });
});

describe('ClaimService: a move', () => {
  test('the destination claim swaps in one POST; revert puts the source back; confirm empties the migration', async () => {
    const { mock, api, claims } = world();
    await put(api, VM, { [SOURCE]: BASE });
    mock.requests.length = 0;
    const claim = await claims.claimMoveDestination(VM, MIG, FLAVOR, { schedulerClaimed: false, requestId: 'req-m' });
    expect(claim).toEqual({ dest: { [ROOT]: BASE }, source: { [SOURCE]: BASE } });
    expect(mock.writes().map((w) => `${w.method} ${w.path}`)).toEqual(['POST /allocations']);
    expect(holds(mock, MIG)).toEqual({ [SOURCE]: BASE });
    expect(holds(mock, VM)).toEqual({ [ROOT]: BASE });
    expect(claims.has(VM)).toBe(true);

    await claims.revertMove(VM, MIG);
    expect(holds(mock, VM)).toEqual({ [SOURCE]: BASE });
    expect(holds(mock, MIG)).toBeUndefined();
    mock.requests.length = 0;
    await claims.revertMove(VM, MIG);
    expect(mock.writes()).toEqual([]);
    claims.release(VM);
    expect(claims.has(VM)).toBe(false);

    await claims.claimMoveDestination(VM, MIG, FLAVOR, { schedulerClaimed: false });
    await claims.confirmMove(MIG, 'req-c');
    expect(holds(mock, MIG)).toBeUndefined();
    expect(holds(mock, VM)).toEqual({ [ROOT]: BASE });
  });

  test('a replay finds the swap done and keeps it; an instance holding nothing cannot move', async () => {
    const { mock, api, claims } = world();
    await put(api, VM, { [SOURCE]: BASE });
    await claims.claimMoveDestination(VM, MIG, FLAVOR, { schedulerClaimed: false });
    mock.requests.length = 0;
    expect(await claims.claimMoveDestination(VM, MIG, FLAVOR, { schedulerClaimed: false, resuming: true })).toEqual({ dest: { [ROOT]: BASE }, source: { [SOURCE]: BASE } });
    expect(mock.writes()).toEqual([]);
    await expect(claims.claimMoveDestination('00000000-0000-0000-0000-00000000c009', MIG, FLAVOR, { schedulerClaimed: false })).rejects.toThrow(/holds no allocations to move/);
  });

  test('with a scheduler claim the destination verifies what the instance holds and writes nothing', async () => {
    const { mock, api, claims } = world();
    await put(api, VM, { [ROOT]: BASE });
    mock.requests.length = 0;
    expect(await claims.claimMoveDestination(VM, MIG, FLAVOR, { schedulerClaimed: true })).toEqual({ dest: { [ROOT]: BASE } });
    expect(mock.writes()).toEqual([]);
    await expect(claims.claimMoveDestination(VM, MIG, { ...FLAVOR, extra_specs: { 'resources:VGPU': '1' } }, { schedulerClaimed: true })).rejects.toThrow(ClaimMismatchError);
  });
});

describe('ClaimService: release, delete, restore, read', () => {
  test('force delete ignores generations; restore writes back with consumer_generation null; read flattens', async () => {
    const { mock, api, claims } = world();
    await put(api, VM, { [ROOT]: BASE });
    expect(await claims.read(VM)).toEqual({ [ROOT]: BASE });
    await claims.forceDelete(VM, 'req-d');
    expect(await claims.read(VM)).toEqual({});
    await claims.restore(VM, { [ROOT]: BASE }, 'p', 'u');
    expect(holds(mock, VM)).toEqual({ [ROOT]: BASE });
    expect(mock.writes().at(-1)).toMatchObject({ method: 'PUT', body: { consumer_generation: null } });
    await expect(claims.restore(VM, { [ROOT]: BASE }, 'p', 'u')).rejects.toThrow(AllocationConflictError);
    expect(claims.has(VM)).toBe(false);
  });
});
