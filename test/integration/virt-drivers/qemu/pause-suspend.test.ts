// Pause, suspend, the crash-dump NMI and snapshots with real QEMU (TCG, the tick guest): a paused
// guest stops counting and goes on from the same count; a suspended guest has no process and its
// state on disk, survives a restart of the driver, and resumes counting from where it was (no
// second boot); a hard reboot of a suspended guest boots afresh and drops the state; an NMI
// reaches a running guest; a snapshot of a running guest (it runs on) and of a stopped one is a
// standalone qcow2 that boots; a snapshot the agent died in leaves no copy job or file once the
// driver starts again; an unshelved disk is rebased onto the instance's own image with its data
// kept; a rescued guest boots from the rescue image with its own disk
// second, and unrescued boots from its own disk again, the rescue disk gone.
import { execFileSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { InstanceStateError } from '../../../../virt-drivers/errors';
import { lastTick } from '../../../helpers/tick-guest';
import { consolePath, describeWithQemu, instanceSpec, processAlive, QemuTestBed, qemuPid, readPattern, waitFor, waitTick, type TestHost } from '../../../helpers/qemu-hosts';

const U = (n: number): string => `5a5a5a5a-0000-4000-8000-${String(n).padStart(12, '0')}`;
const boots = (path: string): number => readFileSync(path, 'utf8').match(/tick 0000/g)?.length ?? 0;

describeWithQemu('qemu driver: pause, suspend, crash dump', () => {
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

  test('pause stops the count where it is; unpause goes on from there in the same process', async () => {
    const spec = instanceSpec(U(1), { image: 'tick.img' });
    const log = consolePath(a, spec.uuid);
    await a.driver.spawn(spec);
    await waitTick(log, 1);
    const pid = qemuPid(a, spec.uuid);
    await a.driver.pause(spec);
    expect(await a.driver.getInfo(spec)).toMatchObject({ powerState: 'PAUSED' });
    const at = lastTick(log) ?? -1;
    await new Promise((r) => setTimeout(r, 1500));
    expect(lastTick(log)).toBe(at);
    await expect(a.driver.triggerCrashDump(spec)).rejects.toThrow(InstanceStateError);
    await a.driver.unpause(spec);
    expect(await a.driver.getInfo(spec)).toMatchObject({ powerState: 'RUNNING' });
    await waitTick(log, at + 1);
    expect(qemuPid(a, spec.uuid)).toBe(pid);
    await a.driver.triggerCrashDump(spec); // the tick guest has no NMI handler: it runs on
    await waitTick(log, at + 2);
    await a.driver.destroy(spec);
  });

  test('suspend: no process, the state on disk; a restarted driver finds it SUSPENDED and resumes it counting on', async () => {
    const spec = instanceSpec(U(2), { image: 'tick.img', memoryMb: 64 });
    const log = consolePath(a, spec.uuid);
    const state = join(a.instancesPath, spec.uuid, 'suspend.state');
    await a.driver.spawn(spec);
    await waitTick(log, 2);
    const pid = qemuPid(a, spec.uuid);
    const t0 = Date.now();
    await a.driver.suspend(spec);
    const suspendMs = Date.now() - t0;
    const at = lastTick(log) ?? -1;
    expect(processAlive(pid)).toBe(false);
    expect(existsSync(state)).toBe(true);
    expect(await a.driver.getInfo(spec)).toMatchObject({ powerState: 'SUSPENDED' });
    await a.driver.suspend(spec); // idempotent
    await expect(a.driver.unpause(spec)).rejects.toThrow(InstanceStateError);

    await a.driver.cleanupHost('host-a');
    const next = a.restart();
    await next.init('host-a');
    expect(await next.getInfo(spec)).toMatchObject({ powerState: 'SUSPENDED' });
    const t1 = Date.now();
    await next.resume(spec);
    const resumeMs = Date.now() - t1;
    expect(await next.getInfo(spec)).toMatchObject({ powerState: 'RUNNING' });
    expect(existsSync(state)).toBe(false);
    const after = await waitTick(log, at + 1);
    expect(after).toBeGreaterThan(at);
    expect(boots(log)).toBe(1); // resumed, not booted again
    await next.resume(spec); // idempotent

    // A hard reboot of a suspended guest boots afresh and drops the saved state.
    await next.suspend(spec);
    await next.reboot(spec, 'hard');
    expect(existsSync(state)).toBe(false);
    await waitFor('a second boot', () => boots(log) === 2);
    await next.destroy(spec);
    console.log(`suspend of a 64 MiB guest: ${suspendMs} ms; resume: ${resumeMs} ms`);
  });

  test('snapshot: of a running guest (it counts on) and of a stopped one, a qcow2 with no backing file that boots; the driver keeps no copy', async () => {
    const spec = instanceSpec(U(3), { image: 'tick.img' });
    const log = consolePath(a, spec.uuid);
    await a.driver.spawn(spec);
    await waitTick(log, 1);
    const taken: Array<{ path: string; bytes: number; format: string }> = [];
    const take = async (n: number): Promise<void> =>
      a.driver.snapshot(spec, async (image) => {
        const path = join(bed.images, `snap-${n}.qcow2`);
        await pipeline(image.data, createWriteStream(path));
        taken.push({ path, bytes: image.bytes, format: image.diskFormat });
      });
    const t0 = Date.now();
    await take(1);
    const liveMs = Date.now() - t0;
    const at = lastTick(log) ?? -1;
    await waitTick(log, at + 1); // ran on through the copy
    await a.driver.powerOff(spec, { timeoutSec: 0 });
    await take(2);
    expect(readdirSync(join(a.instancesPath, 'snapshots'))).toEqual([]);
    for (const [i, t] of taken.entries()) {
      const info = JSON.parse(execFileSync('qemu-img', ['info', '--output=json', t.path], { encoding: 'utf8' })) as { format: string; 'backing-filename'?: string; 'virtual-size': number };
      expect(info).toMatchObject({ format: 'qcow2', 'virtual-size': 1024 ** 3 });
      expect(info['backing-filename']).toBeUndefined();
      expect(t.format).toBe('qcow2');
      const boot = instanceSpec(U(10 + i), { image: `snap-${i + 1}.qcow2` });
      await a.driver.spawn(boot);
      await waitTick(consolePath(a, boot.uuid), 1);
      await a.driver.destroy(boot);
    }
    await a.driver.destroy(spec);
    console.log(`live snapshot of the tick guest: ${liveMs} ms, ${taken[0]?.bytes ?? 0} bytes`);
  });

  test('a snapshot the agent died in (its copy job still running in QEMU, the copy on disk): the restarted driver cancels the job and removes the copy; the guest counts on and snapshots again', async () => {
    const spec = instanceSpec(U(5), { image: 'tick.img' });
    const log = consolePath(a, spec.uuid);
    await a.driver.spawn(spec);
    await waitTick(log, 1);
    // What the driver's own copy looks like mid-way: a target node on a file in snapshots/ and a
    // backup job named as the driver names them, slowed to a crawl so it is still running.
    const copy = join(a.instancesPath, 'snapshots', `${spec.uuid}-dead0000.qcow2`);
    mkdirSync(join(a.instancesPath, 'snapshots'), { recursive: true });
    execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', copy, String(1024 ** 3)]);
    const qmp = await a.driver.monitor(spec);
    await qmp.execute('blockdev-add', { driver: 'qcow2', 'node-name': 'snapshot-dead0000-target', file: { driver: 'file', filename: copy } });
    await qmp.execute('blockdev-backup', { 'job-id': 'snapshot-dead0000', device: 'drive-disk0', target: 'snapshot-dead0000-target', sync: 'full', speed: 1024, 'auto-dismiss': false });
    expect(((await qmp.execute('query-jobs')) as Array<{ id: string; status: string }>).map((j) => j.id)).toEqual(['snapshot-dead0000']);

    await a.driver.cleanupHost('host-a');
    const next = a.restart();
    await next.init('host-a');
    const after = await next.monitor(spec);
    expect(await after.execute('query-jobs')).toEqual([]);
    const nodes = (await after.execute('query-named-block-nodes')) as Array<{ 'node-name': string }>;
    expect(nodes.map((n) => n['node-name']).filter((n) => n.startsWith('snapshot-'))).toEqual([]);
    expect(readdirSync(join(a.instancesPath, 'snapshots'))).toEqual([]);
    const at = lastTick(log) ?? -1;
    await waitTick(log, at + 1);
    let bytes = 0;
    await next.snapshot(spec, async (image) => {
      bytes = image.bytes;
      image.data.resume();
      await new Promise((r) => image.data.on('end', r));
    });
    expect(bytes).toBeGreaterThan(0);
    await next.destroy(spec);
    await next.cleanupHost('host-a');
  });

  test('an unshelve’s spawn (rebase_image_ref): the disk made from the shelved snapshot is put on the instance’s own image, its data kept; the guest boots from it', async () => {
    // The "shelved snapshot": the image flattened, with a block the guest wrote (a pattern at 512 MiB).
    const shelved = join(bed.images, 'shelved-6.qcow2');
    execFileSync('qemu-img', ['convert', '-q', '-f', 'raw', '-O', 'qcow2', bed.image, shelved]);
    execFileSync('qemu-img', ['resize', '-q', '-f', 'qcow2', shelved, String(1024 ** 3)]);
    execFileSync('qemu-io', ['-f', 'qcow2', '-c', 'write -P 0xab 512M 64k', shelved]);
    const spec = { ...instanceSpec(U(6), { image: 'shelved-6.qcow2' }), rebase_image_ref: 'tick.img' };
    await a.driver.spawn(spec);
    await waitTick(consolePath(a, spec.uuid), 1);
    await a.driver.powerOff(spec, { timeoutSec: 0 });
    const disk = join(a.instancesPath, spec.uuid, 'disk.qcow2');
    const info = JSON.parse(execFileSync('qemu-img', ['info', '--output=json', disk], { encoding: 'utf8' })) as { 'backing-filename'?: string };
    expect(info['backing-filename']).toBe(bed.image);
    expect(readPattern(disk, 0xab, '512M', '64k')).toMatch(/read 65536\/65536 bytes/);
    expect(execFileSync('qemu-img', ['compare', '-q', disk, shelved], { encoding: 'utf8' })).toBe(''); // identical content
    await a.driver.destroy(spec);
  });

  test('rescue: booted from the rescue image, its own disk attached second; unrescue: its own disk again, the rescue disk gone', async () => {
    const spec = instanceSpec(U(4), { image: 'tick.img' });
    const log = consolePath(a, spec.uuid);
    const dir = join(a.instancesPath, spec.uuid);
    await a.driver.spawn(spec);
    await waitTick(log, 1);
    const files = async (): Promise<string[]> => {
      const block = (await (await a.driver.monitor(spec)).execute('query-block')) as Array<{ device: string; inserted?: { file: string } }>;
      return block.filter((b) => b.inserted).map((b) => `${b.device}=${b.inserted?.file ?? ''}`);
    };
    await a.driver.rescue(spec, 'tick.img', false);
    expect(await a.driver.getInfo(spec)).toMatchObject({ powerState: 'RUNNING' });
    expect(await files()).toEqual([`drive-rescue0=${join(dir, 'disk.rescue')}`, `drive-disk0=${join(dir, 'disk.qcow2')}`]);
    await waitFor('the rescue system boots', () => boots(log) === 2);
    await a.driver.rescue(spec, 'tick.img', false); // idempotent
    await a.driver.unrescue(spec);
    expect(await files()).toEqual([`drive-disk0=${join(dir, 'disk.qcow2')}`]);
    expect(existsSync(join(dir, 'disk.rescue'))).toBe(false);
    await waitFor('its own system boots again', () => boots(log) === 3);
    await a.driver.destroy(spec);
  });
});
