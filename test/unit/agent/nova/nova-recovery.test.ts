// Start-up recovery in nova mode: a task state that no journaled request is left to finish is reset
// in nova too (nova's init_host), not only in the agent's record.
import nock from 'nock';
import { randomUUID } from 'node:crypto';
import { bindMethod } from '../../../../agent/compute/method-table';
import { computeMethods } from '../../../../agent/compute/methods';
import { recover } from '../../../../agent/compute/recovery';
import { FakeConductor } from '../../../helpers/fake-conductor';
import { FLAVOR, singleHost } from '../../../helpers/compute-harness';

afterEach(() => nock.cleanAll());

test("a task no request is left to finish is cleared in nova's Instance as in the record", async () => {
  const c = new FakeConductor();
  const { host, api } = await singleHost('host-n', c);
  const methods = computeMethods(host.manager);
  const build = methods.find((m) => m.name === 'build_and_run_instance');
  if (!build) throw new Error('no build_and_run_instance row');
  const uuid = randomUUID();
  await api.putAllocations(uuid, { allocations: { [host.rootUuid]: { resources: { VCPU: 2, MEMORY_MB: 2048, DISK_GB: 11 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
  const instance = c.instance({ uuid, display_name: 'vm', project_id: 'p', user_id: 'u', vm_state: 'building', task_state: 'scheduling', host: null, flavor: { ...FLAVOR } });
  await bindMethod(build, { instance }, { request_id: 'req-build' }).run();
  // As a stop that crashed after its record was saved and its journal entry was completed.
  const rec = host.manager.context.require(uuid);
  rec.task_state = 'powering-off';
  await host.manager.context.save(rec);
  const row = c.instances.get(uuid);
  if (!row) throw new Error('nova has no Instance');
  row.task_state = 'powering-off';
  c.calls.length = 0;

  const report = await recover(host.manager.context, { pending: () => [], complete: () => Promise.resolve() }, methods);
  expect(report.replayed).toBe(0);
  expect(host.manager.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(c.instances.get(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
  expect(c.calls.filter((x) => x.kind === 'object').map((x) => [x.what, x.changes])).toEqual([['Instance.save', ['task_state']]]);
});
