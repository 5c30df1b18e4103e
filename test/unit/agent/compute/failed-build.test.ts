// The end of a failed build: where the control plane takes failed builds back, the record is
// dropped, and an allocation removal that did not go through is owed first; elsewhere the record
// stays in ERROR for a delete.
import { endFailedBuild } from '../../../../agent/compute/flow-steps';
import type { InstanceRecord } from '../../../../model/instance';

function fakes(releasesFailedBuilds: boolean): { calls: string[]; c: Parameters<typeof endFailedBuild>[0] } {
  const calls: string[] = [];
  const c = {
    controlPlane: { releasesFailedBuilds },
    removals: {
      add: (uuid: string, consumers: readonly string[]) => {
        calls.push(`owe ${uuid} ${consumers.join(',')}`);
        return Promise.resolve();
      },
    },
    forget: (uuid: string) => {
      calls.push(`forget ${uuid}`);
      return Promise.resolve();
    },
  } as unknown as Parameters<typeof endFailedBuild>[0];
  return { calls, c };
}

const rec = { uuid: 'i-1', vm_state: 'error' } as InstanceRecord;

test('taken back, allocations freed: the record is dropped and nothing is owed', async () => {
  const { calls, c } = fakes(true);
  await endFailedBuild(c, rec, true);
  expect(calls).toEqual(['forget i-1']);
});

test('taken back, the allocation removal failed: the removal is owed before the record goes', async () => {
  const { calls, c } = fakes(true);
  await endFailedBuild(c, rec, false);
  expect(calls).toEqual(['owe i-1 i-1', 'forget i-1']);
});

test('not taken back (standalone): the record stays, in ERROR, for a delete', async () => {
  const { calls, c } = fakes(false);
  await endFailedBuild(c, rec, false);
  expect(calls).toEqual([]);
});
