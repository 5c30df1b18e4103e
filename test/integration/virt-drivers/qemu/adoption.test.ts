// VMs outlive the agent: a driver dropped without stopping its VMs, and an agent process killed
// with SIGKILL, leave the VMs running; a new driver's init adopts them from their directories
// without restarting them (same pid, the counter keeps going) and can drive them. VMs that died
// while no driver ran are reported (crashed vs clean exit); a reused pid is not mistaken for a
// VM; half-fetched migrations are removed and corrupt records left alone.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readRecord, writeRecord } from '../../../../virt-drivers/qemu/instance-files';
import { consolePath, describeWithQemu, instanceSpec, processAlive, QemuTestBed, qemuPid, waitFor, waitTick, type TestHost } from '../../../helpers/qemu-hosts';
import { lastTick } from '../../../helpers/tick-guest';
import { runTsChild } from '../../../helpers/ts-child';

const U = (n: number): string => `adadadad-0000-4000-8000-${String(n).padStart(12, '0')}`;

describeWithQemu('qemu driver: adoption after an agent restart or crash', () => {
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

  test('a driver dropped without stopping its VMs: the next one adopts them as they are and drives them', async () => {
    const running = instanceSpec(U(1), { image: 'tick.img' });
    const stopped = instanceSpec(U(2), { image: 'tick.img' });
    await a.driver.spawn(running);
    await a.driver.spawn(stopped, { powerOn: false });
    const before = await waitTick(consolePath(a, running.uuid), 1);
    const pid = qemuPid(a, running.uuid);
    await a.driver.cleanupHost('host-a'); // the agent stops; its VMs do not

    const t0 = Date.now();
    const next = a.restart();
    await next.init('host-a');
    const adoptMs = Date.now() - t0;
    expect(next.recoveryReport()).toEqual([
      expect.objectContaining({ uuid: running.uuid, outcome: 'adopted', pid, runState: 'running' }),
      expect.objectContaining({ uuid: stopped.uuid, outcome: 'stopped' }),
    ]);
    expect(qemuPid(a, running.uuid)).toBe(pid);
    expect(await next.listInstances()).toEqual([
      { uuid: running.uuid, name: running.name, powerState: 'RUNNING' },
      { uuid: stopped.uuid, name: stopped.name, powerState: 'SHUTDOWN' },
    ]);
    // Not restarted: the count goes on from where it was, with no second boot in the log.
    await waitTick(consolePath(a, running.uuid), before + 1);
    expect(readFileSync(consolePath(a, running.uuid), 'utf8').match(/tick 0000/g)).toHaveLength(1);

    await next.reboot(running, 'hard');
    expect(qemuPid(a, running.uuid)).not.toBe(pid);
    await next.destroy(running);
    await next.destroy(stopped);
    console.log(`adoption of 1 running VM at init: ${adoptMs} ms`);
  });

  test('an agent process killed with SIGKILL: its VMs keep running and are adopted without a restart', async () => {
    const specs = [instanceSpec(U(3), { image: 'tick.img' }), instanceSpec(U(4))];
    const env: Record<string, string> = {
      COMPUTE_AGENT__DEFAULT__HOST: 'host-a',
      COMPUTE_AGENT__DEFAULT__STATE_PATH: join(bed.root, 'host-a', 'state'),
      COMPUTE_AGENT__DEFAULT__INSTANCES_PATH: a.instancesPath,
      COMPUTE_AGENT__QEMU__ACCEL: 'tcg',
      COMPUTE_AGENT__QEMU__IMAGES_PATH: bed.images,
    };
    await a.driver.cleanupHost('host-a');
    const agent = runTsChild(join(__dirname, '..', '..', '..', 'helpers', 'qemu-agent-child.ts'), [JSON.stringify(specs)], env);
    await agent.line('READY');
    const pids = specs.map((s) => qemuPid(a, s.uuid));
    const before = await waitTick(consolePath(a, U(3)), 0);
    agent.child.kill('SIGKILL');
    await new Promise((r) => agent.child.once('exit', r));
    expect(pids.every((p) => processAlive(p))).toBe(true);
    await waitTick(consolePath(a, U(3)), before + 1); // nobody watching, still counting

    const next = a.restart();
    await next.init('host-a');
    expect(next.recoveryReport().map((r) => [r.uuid, r.outcome, r.pid])).toEqual(specs.map((s, i) => [s.uuid, 'adopted', pids[i]]));
    for (const s of specs) expect(await next.getInfo(s)).toMatchObject({ powerState: 'RUNNING' });
    await waitTick(consolePath(a, U(3)), before + 2);
    expect(specs.map((s) => qemuPid(a, s.uuid))).toEqual(pids);
    for (const s of specs) await next.destroy(s);
    expect(pids.some((p) => processAlive(p))).toBe(false);
  });

  test('VMs that died while no driver ran are reported: killed as CRASHED, exited cleanly as SHUTDOWN', async () => {
    const killed = instanceSpec(U(5));
    const exited = instanceSpec(U(6));
    await a.driver.spawn(killed);
    await a.driver.spawn(exited);
    await a.driver.cleanupHost('host-a');
    const [pk, pe] = [qemuPid(a, killed.uuid) as number, qemuPid(a, exited.uuid) as number];
    process.kill(pk, 'SIGKILL');
    process.kill(pe, 'SIGTERM');
    await waitFor('both VMs to end', () => !processAlive(pk) && !processAlive(pe));

    const next = a.restart();
    await next.init('host-a');
    expect(next.recoveryReport()).toEqual([
      expect.objectContaining({ uuid: killed.uuid, outcome: 'died', pid: pk, detail: expect.stringMatching(/killed or crashed/) }),
      expect.objectContaining({ uuid: exited.uuid, outcome: 'died', pid: pe, detail: expect.stringMatching(/exited cleanly/) }),
    ]);
    expect(await next.getInfo(killed)).toMatchObject({ powerState: 'CRASHED' });
    expect(await next.getInfo(exited)).toMatchObject({ powerState: 'SHUTDOWN' });
    // What to do is the compute manager's call; restarting works.
    await next.powerOn(killed);
    expect(await next.getInfo(killed)).toMatchObject({ powerState: 'RUNNING' });
    // Another restart keeps reporting the clean exit as it was.
    await next.cleanupHost('host-a');
    const third = a.restart();
    await third.init('host-a');
    expect(await third.getInfo(exited)).toMatchObject({ powerState: 'SHUTDOWN' });
    expect(await third.getInfo(killed)).toMatchObject({ powerState: 'RUNNING' });
    await third.destroy(killed);
    await third.destroy(exited);
  });

  test('a reused pid is not adopted; a half-fetched migration is removed; a corrupt record is left alone', async () => {
    const spec = instanceSpec(U(7));
    await a.driver.spawn(spec);
    await a.driver.cleanupHost('host-a');
    const dir = join(a.instancesPath, spec.uuid);
    const vmPid = qemuPid(a, spec.uuid) as number;
    process.kill(vmPid, 'SIGKILL');
    await waitFor('the VM to end', () => !processAlive(vmPid));
    // The recorded pid now belongs to another process (this test runner).
    const rec = await readRecord(dir);
    await writeRecord(dir, { ...(rec as NonNullable<typeof rec>), process: { pid: process.pid, startTicks: '1', startedAt: new Date().toISOString() } });
    writeFileSync(join(dir, 'qemu.pid'), `${process.pid}\n`);
    const staging = join(a.instancesPath, `.${U(8)}.incoming`);
    mkdirSync(staging);
    const corrupt = join(a.instancesPath, U(9));
    mkdirSync(corrupt);
    writeFileSync(join(corrupt, 'instance.json'), '{"kind":"compute-agent/qemu-instance","version":1,"checksum":1,"data":{}}\n');

    const next = a.restart();
    await next.init('host-a');
    const report = Object.fromEntries(next.recoveryReport().map((r) => [r.uuid, r.outcome]));
    expect(report).toEqual({ [spec.uuid]: 'died', [U(8)]: 'removed', [U(9)]: 'unreadable' });
    expect(processAlive(process.pid)).toBe(true);
    expect(existsSync(staging)).toBe(false);
    expect(existsSync(corrupt)).toBe(true);
    expect((await next.listInstances()).map((i) => i.uuid)).toEqual([spec.uuid]);
    expect(lastTick(consolePath(a, spec.uuid))).toBeUndefined();
    await next.destroy(spec);
    await next.destroy({ uuid: U(9), name: '' });
    expect(existsSync(corrupt)).toBe(false);
  });
});
