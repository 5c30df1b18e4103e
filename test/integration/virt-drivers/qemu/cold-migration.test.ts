// Cold migration (and resize) between two qemu drivers on this machine, in the compute manager's
// order: host-b to host-a then revert (the VM runs on host-b again, its disk intact), then a
// second run confirmed; a resize to the same host; malformed diskInfo refused.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { InstanceStateError } from '../../../../virt-drivers/errors';
import { MigrationDataError } from '../../../../virt-drivers/qemu/errors';
import type { InstanceSpec } from '../../../../virt-drivers/types';
import { consolePath, describeWithQemu, instanceSpec, migration, processAlive, QemuTestBed, qemuPid, readPattern, waitTick, type TestHost } from '../../../helpers/qemu-hosts';
import { lastTick } from '../../../helpers/tick-guest';

const GIB = 1024 * 1024 * 1024;

function virtualSize(disk: string): number {
  return (JSON.parse(execFileSync('qemu-img', ['info', '-U', '--output=json', disk], { encoding: 'utf8' })) as { 'virtual-size': number })['virtual-size'];
}

async function writePattern(host: TestHost, uuid: string, pattern: number): Promise<void> {
  const qmp = await host.driver.monitor({ uuid, name: '' });
  await qmp.execute('human-monitor-command', { 'command-line': `qemu-io drive-disk0 "write -P 0x${pattern.toString(16)} 2M 512k"` });
}

/** Stops the instance, reads the pattern off its disk, starts it again. */
async function expectPattern(host: TestHost, spec: InstanceSpec, pattern: number): Promise<void> {
  await host.driver.powerOff(spec, { timeoutSec: 0 });
  expect(readPattern(join(host.instancesPath, spec.uuid, 'disk.qcow2'), pattern, '2M', '512k')).toMatch(/read 524288\/524288 bytes/);
  await host.driver.powerOn(spec);
}

describeWithQemu('qemu driver: cold migration', () => {
  let bed: QemuTestBed;
  let a: TestHost;
  let b: TestHost;

  beforeAll(async () => {
    bed = new QemuTestBed();
    a = bed.host('host-a');
    b = bed.host('host-b');
    await a.driver.init('host-a');
    await b.driver.init('host-b');
  });
  afterAll(async () => {
    await a.driver.cleanupHost('host-a');
    await b.driver.cleanupHost('host-b');
    bed.cleanup();
  });

  test('host-b to host-a, reverted: back on host-b with its disk intact; then again, confirmed', async () => {
    const uuid = 'c0c0c0c0-0000-4000-8000-000000000001';
    const small = instanceSpec(uuid, { image: 'tick.img', rootGb: 1 });
    const resized = instanceSpec(uuid, { image: 'tick.img', rootGb: 2, memoryMb: 48 });
    await b.driver.spawn(small);
    await waitTick(consolePath(b, uuid), 0);
    await writePattern(b, uuid, 0x5a);
    const bPid = qemuPid(b, uuid);

    // Run 1: migrate (with a resize), then revert.
    const m1 = migration('d0d0d0d0-0000-4000-8000-000000000001', b, a);
    const t0 = Date.now();
    const disk = await b.driver.migrateDiskAndPowerOff(small, m1, resized.flavor);
    const offMs = Date.now() - t0;
    expect(processAlive(bPid)).toBe(false);
    expect(existsSync(join(b.instancesPath, `${uuid}_resize`, 'disk.qcow2'))).toBe(true);
    expect(await b.driver.getInfo(small)).toMatchObject({ powerState: 'SHUTDOWN' });
    expect(JSON.parse(disk.diskInfo)).toMatchObject({ version: 1, driver: 'qemu', instance: uuid, migration: m1.uuid, source: { host: 'host-b', dir: join(b.instancesPath, `${uuid}_resize`) } });
    const t1 = Date.now();
    await a.driver.finishMigration(resized, m1, disk);
    const finishMs = Date.now() - t1;
    expect(await a.driver.getInfo(resized)).toMatchObject({ powerState: 'RUNNING' });
    await waitTick(consolePath(a, uuid), 1); // booted from the copied disk
    expect(virtualSize(join(a.instancesPath, uuid, 'disk.qcow2'))).toBe(2 * GIB);
    const qmp = await a.driver.monitor(resized);
    expect(((await qmp.execute('query-memory-size-summary')) as { 'base-memory': number })['base-memory']).toBe(48 * 1024 * 1024);
    await writePattern(a, uuid, 0x77); // what host-a writes is lost by the revert

    await a.driver.destroy(resized);
    await b.driver.finishRevertMigration(small, m1);
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);
    expect(existsSync(join(b.instancesPath, `${uuid}_resize`))).toBe(false);
    expect(await b.driver.getInfo(small)).toMatchObject({ powerState: 'RUNNING' });
    await waitTick(consolePath(b, uuid), (lastTick(consolePath(b, uuid)) ?? 0) + 1);
    expect(virtualSize(join(b.instancesPath, uuid, 'disk.qcow2'))).toBe(1 * GIB);
    await expectPattern(b, small, 0x5a);
    await b.driver.finishRevertMigration(small, m1); // idempotent

    // Run 2: migrate, then confirm.
    const m2 = migration('d0d0d0d0-0000-4000-8000-000000000002', b, a);
    const disk2 = await b.driver.migrateDiskAndPowerOff(small, m2, small.flavor);
    await a.driver.finishMigration(small, m2, disk2);
    await b.driver.confirmMigration(small, m2);
    await b.driver.confirmMigration(small, m2); // idempotent
    expect(existsSync(join(b.instancesPath, `${uuid}_resize`))).toBe(false);
    expect(await b.driver.listInstances()).toEqual([]);
    expect(await a.driver.getInfo(small)).toMatchObject({ powerState: 'RUNNING' });
    await waitTick(consolePath(a, uuid), 0);
    await expectPattern(a, small, 0x5a);
    await a.driver.destroy(small);
    console.log(`cold migration: power off + hand-over ${offMs} ms (shutdown_timeout 1 s, the guest ignores ACPI), fetch + start on the destination ${finishMs} ms`);
  });

  test('a resize to the same host, reverted then confirmed', async () => {
    const uuid = 'c0c0c0c0-0000-4000-8000-000000000002';
    const spec = instanceSpec(uuid, { image: 'tick.img' });
    const bigger = instanceSpec(uuid, { image: 'tick.img', rootGb: 3 });
    await a.driver.spawn(spec);
    const m1 = migration('d0d0d0d0-0000-4000-8000-000000000003', a, a);
    const disk = await a.driver.migrateDiskAndPowerOff(spec, m1, bigger.flavor);
    await a.driver.finishMigration(bigger, m1, disk);
    expect(virtualSize(join(a.instancesPath, uuid, 'disk.qcow2'))).toBe(3 * GIB);
    expect((await a.driver.listInstances()).map((i) => [i.uuid, i.powerState])).toEqual([[uuid, 'RUNNING']]);
    await expect(a.driver.finishRevertMigration(spec, m1)).rejects.toThrow(InstanceStateError); // destroy the new one first
    await a.driver.destroy(bigger);
    await a.driver.finishRevertMigration(spec, m1);
    expect(virtualSize(join(a.instancesPath, uuid, 'disk.qcow2'))).toBe(1 * GIB);

    const m2 = migration('d0d0d0d0-0000-4000-8000-000000000004', a, a);
    const disk2 = await a.driver.migrateDiskAndPowerOff(spec, m2, bigger.flavor);
    await a.driver.finishMigration(bigger, m2, disk2);
    await a.driver.confirmMigration(spec, m2);
    expect(existsSync(join(a.instancesPath, `${uuid}_resize`))).toBe(false);
    expect(await a.driver.getInfo(bigger)).toMatchObject({ powerState: 'RUNNING' });
    await a.driver.destroy(bigger);
  });

  test('malformed or mismatched diskInfo is refused, naming the field; a disk does not shrink', async () => {
    const uuid = 'c0c0c0c0-0000-4000-8000-000000000003';
    const spec = instanceSpec(uuid, { image: 'tick.img', rootGb: 2 });
    const m = migration('d0d0d0d0-0000-4000-8000-000000000005', b, a);
    await expect(a.driver.finishMigration(spec, m, { diskInfo: 'not json' })).rejects.toThrow(MigrationDataError);
    await b.driver.spawn(spec);
    await expect(b.driver.migrateDiskAndPowerOff(spec, m, instanceSpec(uuid, { rootGb: 1 }).flavor)).rejects.toThrow(/cannot resize its disk down from 2.0 GiB to 1 GiB/);
    const disk = await b.driver.migrateDiskAndPowerOff(spec, m, spec.flavor);
    const other = migration('d0d0d0d0-0000-4000-8000-000000000006', b, a);
    await expect(a.driver.finishMigration(spec, other, disk)).rejects.toThrow(/diskInfo.migration: expected d0d0d0d0-0000-4000-8000-000000000006/);
    const tampered = { diskInfo: JSON.stringify({ ...JSON.parse(disk.diskInfo), files: ['../../etc/passwd'] }) };
    await expect(a.driver.finishMigration(spec, m, tampered)).rejects.toThrow(/diskInfo.files/);
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);
    await b.driver.finishRevertMigration(spec, m, { powerOn: false });
    expect(await b.driver.getInfo(spec)).toMatchObject({ powerState: 'SHUTDOWN' });
    await b.driver.destroy(spec);
  });
});
