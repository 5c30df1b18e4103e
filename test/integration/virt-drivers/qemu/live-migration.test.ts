// Live migration between two qemu drivers on this machine (host-a, host-b: separate
// instances_path), called in the compute manager's order. The tick guest's counter continues on
// the destination; the disk (an overlay written to while running) arrives intact through the NBD
// mirror; the source process is gone. Failures (unreachable destination, destination dying,
// abort, completion timeout, pre-checks) leave the source running.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MigrationPreCheckError } from '../../../../virt-drivers/errors';
import { LiveMigrationAbortedError, LiveMigrationError, LiveMigrationTimeoutError } from '../../../../virt-drivers/qemu/errors';
import type { InstanceSpec, LiveMigrateData } from '../../../../virt-drivers/types';
import {
  consolePath,
  describeWithQemu,
  instanceSpec,
  logged,
  processAlive,
  QemuTestBed,
  qemuPid,
  readPattern,
  waitFor,
  waitTick,
  type TestHost,
} from '../../../helpers/qemu-hosts';
import { lastTick, ticks } from '../../../helpers/tick-guest';

/** The pre-steps on both sides: destination check, source check, destination prepared. */
async function prepare(src: TestHost, dst: TestHost, spec: InstanceSpec): Promise<LiveMigrateData> {
  const d1 = await dst.driver.checkCanLiveMigrateDestination(spec, src.ref);
  const d2 = await src.driver.checkCanLiveMigrateSource(spec, d1);
  return dst.driver.preLiveMigration(spec, d2);
}

async function hmp(host: TestHost, uuid: string, command: string): Promise<string> {
  const qmp = await host.driver.monitor({ uuid, name: '' });
  return String(await qmp.execute('human-monitor-command', { 'command-line': command }));
}

async function expectStillRunning(host: TestHost, uuid: string): Promise<void> {
  expect(await host.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'RUNNING' });
  const now = lastTick(consolePath(host, uuid)) ?? 0;
  await waitTick(consolePath(host, uuid), now + 1);
}

describeWithQemu('qemu driver: live migration', () => {
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

  test('host-a to host-b: the counter continues, the disk arrives, the source is gone', async () => {
    const uuid = 'a1a1a1a1-0000-4000-8000-000000000001';
    const spec = instanceSpec(uuid, { image: 'tick.img' });
    await a.driver.spawn(spec);
    await hmp(a, uuid, 'qemu-io drive-disk0 "write -P 0x5a 1M 256k"');
    await waitTick(consolePath(a, uuid), 1);
    const sourcePid = qemuPid(a, uuid);

    const data = await prepare(a, b, spec);
    expect(data).toMatchObject({ driver: 'qemu', dest_host: 'host-b', dest_accel: 'tcg', is_shared_instance_path: false, block_migration: true, source_host: 'host-a' });
    expect(data.migrate_uri).toMatch(/^tcp:127\.0\.0\.1:\d+$/);
    expect(await b.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'PAUSED' });
    const t0 = Date.now();
    await a.driver.liveMigration(spec, b.ref, data);
    const liveMs = Date.now() - t0;
    const sourceText = readFileSync(consolePath(a, uuid), 'utf8');
    await a.driver.postLiveMigration(spec, data);
    await b.driver.postLiveMigrationAtDestination(spec, data);

    expect(processAlive(sourcePid)).toBe(false);
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);
    expect(await a.driver.listInstances()).toEqual([]);
    expect(await b.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'RUNNING' });
    const last = ticks(sourceText).at(-1) as number;
    await waitTick(consolePath(b, uuid), last + 2);
    const destText = readFileSync(consolePath(b, uuid), 'utf8');
    expect(ticks(destText)[0]).toBeGreaterThan(last);
    expect(ticks(destText)[0]).toBeLessThanOrEqual(last + 2);
    // Joined, the two logs are one unbroken count from 0: the CPU state moved, nothing restarted.
    const all = ticks(sourceText + destText);
    expect(all).toEqual(all.map((_, i) => i));
    // What the guest's disk held on host-a is on host-b's overlay (read with QEMU stopped).
    await b.driver.powerOff(spec, { timeoutSec: 0 });
    expect(readPattern(join(b.instancesPath, uuid, 'disk.qcow2'), 0x5a, '1M', '256k')).toMatch(/read 262144\/262144 bytes/);
    await b.driver.powerOn(spec);
    const done = logged(a, 'live migration completed')[0];
    expect(done).toMatchObject({ instance: uuid, dest: 'host-b' });
    console.log(`live migration (boot-sector guest, 32 MiB, TCG, 1 GiB overlay with 256 KiB written): ${liveMs} ms wall; QEMU total ${String(done?.totalTimeMs)} ms, downtime ${String(done?.downtimeMs)} ms, RAM sent ${String(done?.ramTransferred)} B`);

    // And back again, without a disk this time being special: the same instance returns to host-a.
    const back = await prepare(b, a, spec);
    await b.driver.liveMigration(spec, a.ref, back);
    await b.driver.postLiveMigration(spec, back);
    await a.driver.postLiveMigrationAtDestination(spec, back);
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'RUNNING' });
    expect(await b.driver.listInstances()).toEqual([]);
    await a.driver.destroy(spec);
  });

  test('an unreachable destination fails cleanly, with and without a disk; the source keeps running', async () => {
    for (const image of [undefined, 'tick.img']) {
      const uuid = image ? 'a1a1a1a1-0000-4000-8000-000000000003' : 'a1a1a1a1-0000-4000-8000-000000000002';
      const spec = instanceSpec(uuid, image ? { image } : {});
      await a.driver.spawn(spec);
      const d1 = await b.driver.checkCanLiveMigrateDestination(spec, a.ref);
      const d2 = await a.driver.checkCanLiveMigrateSource(spec, d1);
      const unreachable = { ...d2, migrate_uri: 'tcp:127.0.0.1:1', nbd_host: image ? '127.0.0.1' : null, nbd_port: image ? 1 : null, nbd_export: image ? 'drive-disk0' : null };
      const e = await a.driver.liveMigration(spec, b.ref, unreachable).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(LiveMigrationError);
      expect((e as Error).message).toMatch(/refused/i);
      expect((e as Error).message).toMatch(/still runs here/);
      await b.driver.rollbackLiveMigrationAtDestination(spec, unreachable);
      expect(await a.driver.getInfo(spec)).toMatchObject({ powerState: 'RUNNING' });
      if (image) await expectStillRunning(a, uuid);
      await a.driver.destroy(spec);
    }
  });

  test('the destination dying mid-way fails the migration; rollback removes its leftovers', async () => {
    const uuid = 'a1a1a1a1-0000-4000-8000-000000000004';
    const spec = instanceSpec(uuid, { image: 'tick.img' });
    await a.driver.spawn(spec);
    const data = await prepare(a, b, spec);
    process.kill(qemuPid(b, uuid) as number, 'SIGKILL');
    await expect(a.driver.liveMigration(spec, b.ref, data)).rejects.toThrow(LiveMigrationError);
    await b.driver.rollbackLiveMigrationAtDestination(spec, data);
    expect(existsSync(join(b.instancesPath, uuid))).toBe(false);
    await expectStillRunning(a, uuid);
    await a.driver.destroy(spec);
  });

  test('abort, and the completion timeout, cancel the migration and leave the source running', async () => {
    // 1 MiB/s and 8 MiB written to the disk: the disk copy alone takes about 8 s.
    const slow = bed.host('host-slow', { 'qemu.live_migration_bandwidth': '1', 'qemu.live_migration_completion_timeout': '1' });
    await slow.driver.init('host-slow');
    try {
      for (const mode of ['abort', 'timeout'] as const) {
        const uuid = mode === 'abort' ? 'a1a1a1a1-0000-4000-8000-000000000005' : 'a1a1a1a1-0000-4000-8000-000000000006';
        const spec = instanceSpec(uuid, { image: 'tick.img' });
        await slow.driver.spawn(spec);
        await waitTick(consolePath(slow, uuid), 0);
        await hmp(slow, uuid, 'qemu-io drive-disk0 "write -P 0x33 1M 8M"'); // past the boot sector's 1 MiB
        const data = await prepare(slow, b, spec);
        const t0 = Date.now();
        const running = slow.driver.liveMigration(spec, b.ref, data);
        if (mode === 'abort') {
          await new Promise((r) => setTimeout(r, 300));
          await slow.driver.liveMigrationAbort(spec);
        }
        await expect(running).rejects.toThrow(mode === 'abort' ? LiveMigrationAbortedError : LiveMigrationTimeoutError);
        // The completion timeout is 1 s per GiB, at least 2 GiB counted.
        if (mode === 'timeout') expect(Date.now() - t0).toBeGreaterThanOrEqual(2000);
        await b.driver.rollbackLiveMigrationAtDestination(spec, data);
        expect(existsSync(join(b.instancesPath, uuid))).toBe(false);
        const qmp = await slow.driver.monitor(spec);
        await waitFor('the disk copy job to go', async () => ((await qmp.execute('query-block-jobs')) as unknown[]).length === 0);
        await expectStillRunning(slow, uuid);
        expect(logged(slow, 'live migration progress').length).toBeGreaterThan(0);
        await slow.driver.destroy(spec);
      }
    } finally {
      await slow.driver.cleanupHost('host-slow');
    }
  });

  test('pre-checks refuse a shared instances_path, another accelerator, an older QEMU, an instance already there', async () => {
    const uuid = 'a1a1a1a1-0000-4000-8000-000000000007';
    const spec = instanceSpec(uuid);
    const shared = bed.host('host-shared', { 'DEFAULT.instances_path': a.instancesPath });
    await shared.driver.init('host-shared');
    await a.driver.spawn(spec);
    const viaShared = await shared.driver.checkCanLiveMigrateDestination(spec, a.ref);
    await expect(a.driver.checkCanLiveMigrateSource(spec, viaShared)).rejects.toThrow(/is shared with host-shared/);

    const d1 = await b.driver.checkCanLiveMigrateDestination(spec, a.ref);
    await expect(a.driver.checkCanLiveMigrateSource(spec, { ...d1, dest_accel: 'kvm' })).rejects.toThrow(/runs on tcg here, but host-b uses kvm/);
    await expect(a.driver.checkCanLiveMigrateSource(spec, { ...d1, dest_qemu_version: '2.12.0' })).rejects.toThrow(MigrationPreCheckError);
    await expect(a.driver.checkCanLiveMigrateDestination(spec, b.ref)).rejects.toThrow(/already on host host-a/);
    await a.driver.destroy(spec);
  });
});
