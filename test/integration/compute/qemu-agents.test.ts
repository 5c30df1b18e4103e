// End to end with real VMs: two agents with compute_driver = qemu on one machine, the real Placement and
// RabbitMQ, a tiny guest printing a counter on its serial port. A spawn cast starts a real VM with
// its allocation; live migration a -> b continues the counter and moves the allocation in one
// write; a live migration whose destination agent is gone fails cleanly and the source keeps
// running; cold migration b -> a reverted, then confirmed; an agent killed with SIGKILL adopts its
// running VM on restart without restarting it.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { Daemon } from '../../../agent/daemon';
import { agentSpec, rootOf, startDaemon, startProcess, type AgentSpec } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { deleteTree, placementClient } from '../../helpers/placement';
import { describeWithQemu, reapLeftovers } from '../../helpers/qemu-hosts';
import { lastTick, writeTickImage } from '../../helpers/tick-guest';
import { pidRunning } from '../../helpers/process';

jest.setTimeout(300000);
const BIN = join(__dirname, '..', '..', '..', 'dist', 'agent', 'cli', 'main.js');
const api = placementClient();
const FLAVOR = { name: 'tiny', vcpus: 1, memory_mb: 32, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };

/** An agent spec switched to the qemu driver (TCG, tiny timeouts), sharing one images dir. */
function qemuAgent(name: string, exchange: string, images: string): AgentSpec {
  const spec = agentSpec(name, exchange);
  const instances = join(spec.dir, 'instances');
  mkdirSync(instances);
  const conf = readFileSync(spec.file, 'utf8')
    .replace('compute_driver = fake\n', `compute_driver = qemu\ninstances_path = ${instances}\nrpc_response_timeout = 10\n`)
    .concat(`[qemu]\naccel = tcg\nimages_path = ${images}\nshutdown_timeout = 1\nwait_soft_reboot_seconds = 1\ndestroy_timeout = 5\n`);
  writeFileSync(spec.file, conf, { mode: 0o600 });
  return spec;
}

const console_ = (spec: AgentSpec, uuid: string): string => join(spec.dir, 'instances', uuid, 'console.log');
const pidOf = (spec: AgentSpec, uuid: string): number | undefined => {
  const f = join(spec.dir, 'instances', uuid, 'qemu.pid');
  return existsSync(f) ? Number(readFileSync(f, 'utf8').trim()) : undefined;
};
const alive = pidRunning;

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 60000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await Promise.resolve(ok()).catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const holders = async (consumer: string): Promise<string[]> => Object.keys((await api.consumerAllocations(consumer)).allocations);

describeWithQemu('two agents with the qemu driver', () => {
  const exchange = `test-qemu-${randomUUID().slice(0, 8)}`;
  const images = join(tmpdir(), `ca-images-${exchange}`);
  let a: AgentSpec;
  let b: AgentSpec;
  let da: Daemon | undefined;
  let db: Daemon | undefined;
  const cp = new ControlPlane(exchange);

  beforeAll(async () => {
    mkdirSync(images, { recursive: true });
    writeTickImage(join(images, 'tick.img'));
    a = qemuAgent(`qa-${exchange.slice(-8)}`, exchange, images);
    b = qemuAgent(`qb-${exchange.slice(-8)}`, exchange, images);
    await cp.start();
    da = await startDaemon(a);
    db = await startDaemon(b);
  });

  afterAll(async () => {
    await da?.stop('test end');
    await db?.stop('test end');
    await cp.close();
    for (const s of [a, b]) {
      reapLeftovers(s.dir);
      if (existsSync(join(s.dir, 'state', 'compute_id'))) await deleteTree(api, rootOf(s)).catch(() => undefined);
    }
  });

  const instance = (uuid: string): Record<string, unknown> => ({ uuid, display_name: `vm-${uuid.slice(0, 6)}`, project_id: 'p', user_id: 'u', flavor: FLAVOR, image_ref: 'tick.img' });

  test('spawn, live migration a -> b, a failed live migration, cold migration reverted then confirmed', async () => {
    const uuid = randomUUID();
    await cp.cast(a.host, 'build_and_run_instance', { instance: instance(uuid) });
    await cp.waitFor('instance.create.end', [uuid], 60000);
    await until('the counter runs on a', () => (lastTick(console_(a, uuid)) ?? -1) >= 2);
    expect(await holders(uuid)).toEqual([rootOf(a)]);
    const pidA = pidOf(a, uuid);
    expect(alive(pidA)).toBe(true);

    // Live a -> b: the counter continues, the source process is gone, the allocation moved.
    const live = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: a.host, dest_compute: b.host };
    const data = await cp.call<Record<string, unknown>>(b.host, 'check_can_live_migrate_destination', { instance: instance(uuid), migration: live });
    const beforeMove = lastTick(console_(a, uuid)) ?? 0;
    await cp.cast(a.host, 'live_migration', { instance: { uuid }, dest: b.host, migration: live, migrate_data: data });
    await cp.waitFor('instance.live_migration_post.end', [uuid], 120000);
    await until('the counter continues on b', () => (lastTick(console_(b, uuid)) ?? -1) > beforeMove);
    expect(alive(pidA)).toBe(false);
    expect(await holders(uuid)).toEqual([rootOf(b)]);
    expect(await holders(live.uuid)).toEqual([]);

    // A live migration b -> a whose destination agent goes away: fails cleanly, source runs on.
    const lost = { uuid: randomUUID(), migration_type: 'live-migration', source_compute: b.host, dest_compute: a.host };
    const lostData = await cp.call<Record<string, unknown>>(a.host, 'check_can_live_migrate_destination', { instance: instance(uuid), migration: lost });
    await da?.stop('the destination goes away');
    await cp.cast(b.host, 'live_migration', { instance: { uuid }, dest: a.host, migration: lost, migrate_data: lostData });
    await cp.waitFor('instance.live_migration_abort.end', [uuid], 60000);
    const runningOn = lastTick(console_(b, uuid)) ?? 0;
    await until('b keeps running it', () => (lastTick(console_(b, uuid)) ?? 0) > runningOn);
    expect(await holders(uuid)).toEqual([rootOf(b)]);
    expect(await holders(lost.uuid)).toEqual([]);
    da = await startDaemon(a); // consumes the rollback cast that waited in its queue
    await until('a dropped the aborted incoming instance', () => da?.compute?.record(uuid) === undefined);

    // Cold b -> a, reverted: the VM runs on b again with its disk.
    const diskB = join(b.dir, 'instances', uuid, 'disk.qcow2');
    const diskBefore = readFileSync(diskB);
    const cold = { uuid: randomUUID(), migration_type: 'migration', source_compute: b.host, dest_compute: a.host };
    await cp.cast(a.host, 'prep_resize', { instance: instance(uuid), flavor: FLAVOR, migration: cold });
    await cp.waitFor('instance.resize_finish.end', [uuid], 120000);
    expect(await holders(uuid)).toEqual([rootOf(a)]);
    expect(await holders(cold.uuid)).toEqual([rootOf(b)]);
    await cp.cast(a.host, 'revert_resize', { instance: { uuid }, migration: cold });
    await cp.waitFor('instance.resize_revert.end', [uuid], 120000);
    const afterRevert = lastTick(console_(b, uuid)) ?? 0;
    await until('it runs on b again', () => (lastTick(console_(b, uuid)) ?? 0) > afterRevert);
    expect(readFileSync(diskB).equals(diskBefore)).toBe(true);
    expect(await holders(uuid)).toEqual([rootOf(b)]);
    expect(await holders(cold.uuid)).toEqual([]);

    // And once more, confirmed: it runs on a, b's copy is gone.
    const cold2 = { uuid: randomUUID(), migration_type: 'migration', source_compute: b.host, dest_compute: a.host };
    await cp.cast(a.host, 'prep_resize', { instance: instance(uuid), flavor: FLAVOR, migration: cold2 });
    await cp.waitFor('instance.resize_finish.end', [uuid].concat(), 120000);
    await until('the second move finished', () => da?.compute?.record(uuid)?.vm_state === 'resized');
    await cp.cast(b.host, 'confirm_resize', { instance: { uuid }, migration: cold2 });
    await cp.waitFor('instance.resize_confirm.end', [uuid], 120000);
    const onA = lastTick(console_(a, uuid)) ?? 0;
    await until('it runs on a', () => (lastTick(console_(a, uuid)) ?? 0) > onA);
    expect(await holders(uuid)).toEqual([rootOf(a)]);
    expect(existsSync(join(b.dir, 'instances', `${uuid}_resize`))).toBe(false);

    await cp.cast(a.host, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', [uuid], 60000);
    expect(await holders(uuid)).toEqual([]);
  });

  test('stop, start, soft and hard reboot, rebuild and the console log through RPC on a real VM', async () => {
    const uuid = randomUUID();
    const seen = (type: string): number => cp.events.filter((e) => e.event_type === type && e.uuid === uuid).length;
    /** Casts `method` and waits for one more `event` of the instance than there was. */
    const step = async (method: string, args: Record<string, unknown>, event: string): Promise<void> => {
      const before = seen(event);
      await cp.cast(b.host, method, { instance: { uuid }, ...args });
      await until(`${event} after ${method}`, () => seen(event) > before, 60000);
    };
    const boots = (): number => (readFileSync(console_(b, uuid), 'utf8').match(/tick 0000/g) ?? []).length;
    await cp.cast(b.host, 'build_and_run_instance', { instance: instance(uuid) });
    await cp.waitFor('instance.create.end', [uuid], 60000);
    await until('the counter runs', () => (lastTick(console_(b, uuid)) ?? -1) >= 1);
    const first = pidOf(b, uuid);

    await step('stop_instance', { clean_shutdown: true }, 'instance.power_off.end');
    expect(alive(first)).toBe(false);
    expect(db?.compute?.record(uuid)).toMatchObject({ vm_state: 'stopped', task_state: null, power_state: 4 });
    await step('start_instance', {}, 'instance.power_on.end');
    expect(db?.compute?.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null, power_state: 1 });
    await until('the guest boots again', () => boots() === 2);
    // The console as nova returns it: the serial log's last lines.
    const out = await cp.call<string>(b.host, 'get_console_output', { instance: { uuid }, tail_length: 3 });
    expect(out.split('\n')).toHaveLength(3);
    expect(out).toMatch(/^tick [0-9a-f]{4}\ntick /);

    await step('reboot_instance', { reboot_type: 'SOFT' }, 'instance.reboot.end'); // the guest ignores ACPI: hard after shutdown_timeout
    await until('a third boot', () => boots() === 3);
    await step('reboot_instance', { reboot_type: 'HARD' }, 'instance.reboot.end');
    await until('a fourth boot', () => boots() === 4);
    expect(alive(pidOf(b, uuid))).toBe(true);

    // Rebuild: a fresh disk and console from the image, the allocation where it was.
    await step('rebuild_instance', { image_ref: 'tick.img', orig_image_ref: 'tick.img', recreate: false }, 'instance.rebuild.end');
    await until('the rebuilt guest counts from 0 in a new log', () => boots() === 1 && (lastTick(console_(b, uuid)) ?? -1) >= 1);
    expect(db?.compute?.record(uuid)).toMatchObject({ vm_state: 'active', task_state: null });
    expect(await holders(uuid)).toEqual([rootOf(b)]);

    await cp.cast(b.host, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', [uuid], 60000);
    expect(await holders(uuid)).toEqual([]);
  });
});

describeWithQemu('an agent killed with SIGKILL while its VM runs', () => {
  test('on restart it adopts the VM without restarting it', async () => {
    const exchange = `test-qkill-${randomUUID().slice(0, 8)}`;
    const images = join(tmpdir(), `ca-images-${exchange}`);
    mkdirSync(images, { recursive: true });
    writeTickImage(join(images, 'tick.img'));
    const spec = qemuAgent(`qk-${exchange.slice(-8)}`, exchange, images);
    const cp = new ControlPlane(exchange);
    let child: ChildProcess | undefined;
    try {
      await cp.start();
      child = (await startProcess(spec, BIN)).child;
      const uuid = randomUUID();
      await cp.cast(spec.host, 'build_and_run_instance', { instance: { uuid, display_name: 'adopt-me', project_id: 'p', user_id: 'u', flavor: FLAVOR, image_ref: 'tick.img' } });
      await cp.waitFor('instance.create.end', [uuid], 60000);
      await until('the counter runs', () => (lastTick(console_(spec, uuid)) ?? -1) >= 1);
      const pid = pidOf(spec, uuid);
      child.kill('SIGKILL');
      await new Promise((r) => child?.once('exit', r));
      const atKill = lastTick(console_(spec, uuid)) ?? 0;
      await until('the VM outlives its agent', () => (lastTick(console_(spec, uuid)) ?? 0) > atKill);
      expect(alive(pid)).toBe(true);
      child = (await startProcess(spec, BIN)).child;
      const shown = await cp.call<{ vm_state: string; placement_allocations: object; allocations: object }>(spec.host, 'show_instance', { instance: { uuid } }, 'compute_agent');
      expect(shown.vm_state).toBe('active');
      expect(shown.placement_allocations).toEqual(shown.allocations);
      expect(pidOf(spec, uuid)).toBe(pid); // the same process: adopted, not restarted
      const atRestart = lastTick(console_(spec, uuid)) ?? 0;
      await until('still counting', () => (lastTick(console_(spec, uuid)) ?? 0) > atRestart);
      await cp.cast(spec.host, 'terminate_instance', { instance: { uuid } });
      await cp.waitFor('instance.delete.end', [uuid], 60000);
      expect(alive(pid)).toBe(false);
    } finally {
      child?.kill('SIGKILL');
      await cp.close();
      reapLeftovers(spec.dir);
      if (existsSync(join(spec.dir, 'state', 'compute_id'))) await deleteTree(api, rootOf(spec)).catch(() => undefined);
    }
  });
});
