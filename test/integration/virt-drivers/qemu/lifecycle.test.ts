// The qemu driver's instance lifecycle with real QEMU (TCG, the tick guest): spawn from an image
// (a qcow2 overlay) and without one, power off (the guest ignores ACPI, so the hard path after
// shutdown_timeout runs) and on, hard and soft reboot, a crash and a clean exit noticed, destroy;
// failed spawns leave nothing behind.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InstanceExistsError, InstanceNotFoundError, InstanceStateError } from '../../../../virt-drivers/errors';
import { ImageError, VmStartError } from '../../../../virt-drivers/qemu/errors';
import { lastTick } from '../../../helpers/tick-guest';
import {
  consolePath,
  describeWithQemu,
  instanceSpec,
  processAlive,
  QemuTestBed,
  qemuPid,
  waitFor,
  waitTick,
  type TestHost,
} from '../../../helpers/qemu-hosts';

const UUID = ['11111111-1111-4111-8111-111111111111', '22222222-2222-4222-8222-222222222222', '33333333-3333-4333-8333-333333333333'] as const;

describeWithQemu('qemu driver: instance lifecycle', () => {
  let bed: QemuTestBed;
  let a: TestHost;

  beforeAll(async () => {
    bed = new QemuTestBed();
    a = bed.host('host-a');
    await a.driver.init('host-a');
  });
  afterAll(async () => {
    await a.driver.cleanupHost('host-a');
    bed.cleanup();
  });

  test('spawn from an image: a qcow2 overlay, QEMU running, the counter advancing; listed; destroy removes it all', async () => {
    const uuid = UUID[0];
    const t0 = Date.now();
    await a.driver.spawn(instanceSpec(uuid, { image: 'tick.img' }));
    const spawnMs = Date.now() - t0;
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ uuid, powerState: 'RUNNING' });
    const qmp = await a.driver.monitor({ uuid, name: '' });
    expect(await qmp.execute('query-status')).toMatchObject({ status: 'running', running: true });
    const first = await waitTick(consolePath(a, uuid), 0);
    await waitTick(consolePath(a, uuid), first + 1);
    const block = (await qmp.execute('query-block')) as Array<{ inserted?: { file: string; 'backing_file'?: string } }>;
    expect(block[0]?.inserted?.file).toBe(join(a.instancesPath, uuid, 'disk.qcow2'));
    expect(block[0]?.inserted?.backing_file).toBe(bed.image);
    expect((await a.driver.listInstances()).map((i) => i.uuid)).toEqual([uuid]);
    const pid = qemuPid(a, uuid);
    expect(processAlive(pid)).toBe(true);
    await expect(a.driver.spawn(instanceSpec(uuid, { image: 'tick.img' }))).rejects.toThrow(InstanceExistsError);

    await a.driver.destroy({ uuid, name: '' });
    expect(processAlive(pid)).toBe(false);
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);
    await expect(a.driver.getInfo({ uuid, name: '' })).rejects.toThrow(InstanceNotFoundError);
    await a.driver.destroy({ uuid, name: '' }); // idempotent
    console.log(`spawn to QMP running: ${spawnMs} ms`);
  });

  test('power off (ACPI ignored, hard after shutdown_timeout), power on, hard and soft reboot, the console output', async () => {
    const uuid = UUID[1];
    await a.driver.spawn(instanceSpec(uuid, { image: 'tick.img' }));
    await waitTick(consolePath(a, uuid), 1);
    const pid1 = qemuPid(a, uuid);
    const t0 = Date.now();
    await a.driver.powerOff({ uuid, name: '' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900); // waited shutdown_timeout = 1 s for the guest
    expect(processAlive(pid1)).toBe(false);
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'SHUTDOWN' });
    await expect(a.driver.reboot({ uuid, name: '' }, 'soft')).rejects.toThrow(InstanceStateError);

    await a.driver.powerOn({ uuid, name: '' });
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'RUNNING' });
    const pid2 = qemuPid(a, uuid);
    expect(pid2).not.toBe(pid1);
    // The console log is appended to across restarts: the guest booted again and counts from 0.
    await waitFor('a second boot in the console log', () => (readFileSync(consolePath(a, uuid), 'utf8').match(/tick 0000/g) ?? []).length === 2);
    // The driver's console output is that log as written so far (the guest keeps appending).
    const log = await a.driver.getConsoleOutput({ uuid, name: '' });
    expect(readFileSync(consolePath(a, uuid)).subarray(0, log.length).equals(log)).toBe(true);
    expect(log.toString('latin1').match(/tick 0000/g)).toHaveLength(2);

    await a.driver.reboot({ uuid, name: '' }, 'hard');
    const pid3 = qemuPid(a, uuid);
    expect(pid3).not.toBe(pid2);
    expect(processAlive(pid2)).toBe(false);
    await a.driver.reboot({ uuid, name: '' }, 'soft'); // ignored ACPI: done hard after 1 s
    expect(processAlive(pid3)).toBe(false);
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'RUNNING' });
    await a.driver.destroy({ uuid, name: '' });
  });

  test('a VM killed is CRASHED, a VM that exits cleanly is SHUTDOWN; both power on again', async () => {
    const uuid = UUID[2];
    await a.driver.spawn(instanceSpec(uuid)); // no image: no disk, SeaBIOS finds nothing to boot
    const pid = qemuPid(a, uuid) as number;
    process.kill(pid, 'SIGKILL');
    await waitFor('the VM to die', () => !processAlive(pid));
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'CRASHED' });
    await a.driver.powerOn({ uuid, name: '' });
    const pid2 = qemuPid(a, uuid) as number;
    process.kill(pid2, 'SIGTERM'); // QEMU exits cleanly on SIGTERM and removes its pidfile
    await waitFor('the VM to exit', () => !processAlive(pid2));
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'SHUTDOWN' });
    await a.driver.powerOn({ uuid, name: '' });
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'RUNNING' });
    await a.driver.destroy({ uuid, name: '' });
  });

  test('spawn without powering on creates the instance stopped', async () => {
    const uuid = UUID[0];
    await a.driver.spawn(instanceSpec(uuid, { image: 'tick.img' }), { powerOn: false });
    expect(await a.driver.getInfo({ uuid, name: '' })).toMatchObject({ powerState: 'SHUTDOWN' });
    expect(qemuPid(a, uuid)).toBeUndefined();
    expect(lastTick(consolePath(a, uuid))).toBeUndefined();
    await a.driver.destroy({ uuid, name: '' });
  });

  test('failed spawns leave nothing: an unknown image, a disk smaller than the image, QEMU refusing its command line', async () => {
    const uuid = UUID[1];
    await expect(a.driver.spawn(instanceSpec(uuid, { image: 'missing.img' }))).rejects.toThrow(ImageError);
    await expect(a.driver.spawn(instanceSpec(uuid, { image: '../etc/passwd' }))).rejects.toThrow(/not a file name under \[qemu\] images_path/);
    execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', join(bed.images, 'big.qcow2'), '2G']);
    await expect(a.driver.spawn(instanceSpec(uuid, { image: 'big.qcow2', rootGb: 1 }))).rejects.toThrow(/larger than the flavor's root disk of 1 GiB/);
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);

    const broken = bed.host('host-broken', { 'qemu.machine_type': 'no-such-machine' });
    await broken.driver.init('host-broken');
    const e = await broken.driver.spawn(instanceSpec(uuid, { image: 'tick.img' })).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(VmStartError);
    expect((e as Error).message).toMatch(/exited \(code 1\): qemu-system-x86_64: unsupported machine type/);
    expect(existsSync(join(broken.instancesPath, uuid))).toBe(false);
    expect(await broken.driver.listInstances()).toEqual([]);
  });
});
