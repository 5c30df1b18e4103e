/** The fake hypervisor's instances file: saves made while a write is in flight share the next write, and none resolves before its change is on disk. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as atomic from '../../../../lib/atomic-file';
import { FakeHypervisor } from '../../../../virt-drivers/fake/hypervisor';

const spec = (uuid: string): Parameters<FakeHypervisor['create']>[0] => ({ uuid, name: uuid, flavor: { name: 'f', vcpus: 1, memory_mb: 64, root_gb: 1 }, allocations: {} }) as Parameters<FakeHypervisor['create']>[0];
const onDisk = (file: string): string[] => (JSON.parse(readFileSync(file, 'utf8')) as Array<{ uuid: string }>).map((i) => i.uuid).sort();

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'fake-hv-'));
});
afterEach(() => {
  jest.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

test('a burst of saves costs one write, and each resolves with its instance on disk', async () => {
  const file = join(dir, 'instances.json');
  const hv = new FakeHypervisor(file);
  const writes = jest.spyOn(atomic, 'writeFileAtomic');
  const uuids = Array.from({ length: 50 }, (_, i) => `i-${String(i).padStart(2, '0')}`);
  await Promise.all(
    uuids.map(async (u) => {
      hv.create(spec(u), 'RUNNING');
      await hv.save();
      expect(onDisk(file)).toContain(u);
    }),
  );
  // Every save came before the first write took its snapshot: that one write covers all 50.
  expect(writes).toHaveBeenCalledTimes(1);
  expect(onDisk(file)).toEqual(uuids);
});

test('a change made after a write took its snapshot gets a write of its own', async () => {
  const file = join(dir, 'instances.json');
  const hv = new FakeHypervisor(file);
  hv.create(spec('a'), 'RUNNING');
  const first = hv.save();
  await new Promise((r) => setImmediate(r)); // the first write has started
  hv.create(spec('b'), 'RUNNING');
  const second = hv.save();
  await first;
  await second;
  expect(onDisk(file)).toEqual(['a', 'b']);
  expect(new FakeHypervisor(file).list().map((i) => i.uuid)).toEqual(['a', 'b']);
});

test('a failed write fails the saves it covered, and the next save writes again', async () => {
  const file = join(dir, 'instances.json');
  const hv = new FakeHypervisor(file);
  jest.spyOn(atomic, 'writeFileAtomic').mockRejectedValueOnce(new Error('disk full'));
  hv.create(spec('a'), 'RUNNING');
  await expect(hv.save()).rejects.toThrow('disk full');
  await hv.save();
  expect(onDisk(file)).toEqual(['a']);
});
