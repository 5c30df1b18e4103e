/** The fake driver's simulated hypervisor, fault injection, host-file handling and vGPU placement. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../../lib/logging/logger';
import type { Clock } from '../../../../lib/clock';
import { loadConfig } from '../../../../config/loader';
import { ProviderTree } from '../../../../model/provider-tree';
import {
  DriverInitError,
  InjectedFaultError,
  InstanceExistsError,
  InstanceNotFoundError,
  InstanceStateError,
  MigrationPreCheckError,
} from '../../../../virt-drivers/errors';
import { FakeDriver } from '../../../../virt-drivers/fake/driver';
import { HostFileError } from '../../../../virt-drivers/fake/host-file';
import { FakeExec } from '../../../helpers/fake-exec';
import { RootedHostFs } from '../../../../virt-drivers/host/host-fs';
import type { InstanceSpec, MigrationRef } from '../../../../virt-drivers/types';
import { checkMoves } from '../../../../virt-drivers/tree-checks';

const ROOT = '99999999-8888-4777-8666-555555555555';

class ManualClock implements Clock {
  t = 1_000_000;
  sleeps: number[] = [];
  now(): number {
    return this.t;
  }
  async sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    this.t += ms;
  }
}

function hostFile(doc: object): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fakedrv-')), 'host.json');
  writeFileSync(file, JSON.stringify(doc));
  return file;
}

function driver(env: Record<string, string> = {}, clock = new ManualClock()): FakeDriver {
  const { config } = loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__HOST: 'h1', ...env }, defaultFile: '/nonexistent' });
  return new FakeDriver({ config, logger: silentLogger(), clock, exec: new FakeExec(), fs: new RootedHostFs('/nonexistent-root') });
}

const spec = (uuid: string, allocations: InstanceSpec['allocations'] = {}): InstanceSpec => ({
  uuid,
  name: `instance-${uuid.slice(0, 4)}`,
  flavor: { vcpus: 1, memory_mb: 512, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} },
  allocations,
});
const migration = (source: string, dest: string): MigrationRef => ({
  uuid: 'mig-1',
  source: { host: source, nodename: source },
  dest: { host: dest, nodename: dest },
});

describe('capability traits', () => {
  test('only the image types it boots and interface attach: no tagging, volume or trusted-cert traits', () => {
    const present = Object.entries(driver().capabilitiesAsTraits())
      .filter(([, on]) => on)
      .map(([trait]) => trait)
      .sort();
    expect(present).toEqual(['COMPUTE_IMAGE_TYPE_QCOW2', 'COMPUTE_IMAGE_TYPE_RAW', 'COMPUTE_NET_ATTACH_INTERFACE']);
  });
});

describe('instances and power', () => {
  test('spawn, list, power off/on, reboot, destroy (idempotent)', async () => {
    const d = driver();
    await d.spawn(spec('a'));
    await d.spawn(spec('b'), { powerOn: false });
    expect(await d.listInstances()).toEqual([
      { uuid: 'a', name: 'instance-a', powerState: 'RUNNING' },
      { uuid: 'b', name: 'instance-b', powerState: 'SHUTDOWN' },
    ]);
    await expect(d.spawn(spec('a'))).rejects.toBeInstanceOf(InstanceExistsError);
    await expect(d.reboot(spec('b'), 'soft')).rejects.toBeInstanceOf(InstanceStateError);
    await d.reboot(spec('b'), 'hard');
    await d.powerOff(spec('a'));
    expect((await d.getInfo(spec('a'))).powerState).toBe('SHUTDOWN');
    await d.powerOn(spec('a'));
    await d.destroy(spec('a'));
    await d.destroy(spec('a'));
    await expect(d.getInfo(spec('a'))).rejects.toBeInstanceOf(InstanceNotFoundError);
    await expect(d.powerOn(spec('zz'))).rejects.toBeInstanceOf(InstanceNotFoundError);
  });
});

describe('migrations, each host doing its half', () => {
  test('cold: migrate out, finish on the destination, confirm on the source', async () => {
    const [src, dst] = [driver(), driver()];
    await src.spawn(spec('a'));
    const disk = await src.migrateDiskAndPowerOff(spec('a'), migration('h1', 'h2'), spec('a').flavor);
    expect(JSON.parse(disk.diskInfo)).toMatchObject({ instance: 'a', migration: 'mig-1' });
    await expect(src.powerOn(spec('a'))).rejects.toBeInstanceOf(InstanceStateError);
    await dst.finishMigration(spec('a'), migration('h1', 'h2'), disk);
    expect((await dst.getInfo(spec('a'))).powerState).toBe('RUNNING');
    await src.confirmMigration(spec('a'), migration('h1', 'h2'));
    expect(await src.listInstances()).toEqual([]);
  });

  test('cold: revert brings the source instance back', async () => {
    const src = driver();
    await src.spawn(spec('a'));
    await src.migrateDiskAndPowerOff(spec('a'), migration('h1', 'h2'), spec('a').flavor);
    await src.finishRevertMigration(spec('a'), migration('h1', 'h2'));
    expect((await src.getInfo(spec('a'))).powerState).toBe('RUNNING');
  });

  test('resize to the same host replaces the record', async () => {
    const d = driver();
    await d.spawn(spec('a'));
    const disk = await d.migrateDiskAndPowerOff(spec('a'), migration('h1', 'h1'), spec('a').flavor);
    await d.finishMigration(spec('a'), migration('h1', 'h1'), disk);
    await d.confirmMigration(spec('a'), migration('h1', 'h1'));
    expect(await d.listInstances()).toEqual([{ uuid: 'a', name: 'instance-a', powerState: 'RUNNING' }]);
  });

  test('live: checks, pre on the destination, migrate, post on both sides', async () => {
    const [src, dst] = [driver(), driver()];
    await src.spawn(spec('a'));
    const data = await dst.checkCanLiveMigrateDestination(spec('a'), { host: 'h1', nodename: 'h1' });
    await src.checkCanLiveMigrateSource(spec('a'), data);
    await dst.preLiveMigration(spec('a'), data);
    expect((await dst.getInfo(spec('a'))).powerState).toBe('PAUSED');
    await src.liveMigration(spec('a'), { host: 'h2', nodename: 'h2' }, data);
    expect(await src.listInstances()).toEqual([]);
    await src.postLiveMigration(spec('a'), data);
    await dst.postLiveMigrationAtDestination(spec('a'), data);
    expect((await dst.getInfo(spec('a'))).powerState).toBe('RUNNING');
    await expect(dst.checkCanLiveMigrateDestination(spec('a'), { host: 'h1', nodename: 'h1' })).rejects.toBeInstanceOf(MigrationPreCheckError);
  });

  test('live: abort during a slow migration, then roll back the destination', async () => {
    const clock = new ManualClock();
    const [src, dst] = [driver({}, clock), driver()];
    await src.spawn(spec('a'));
    await dst.preLiveMigration(spec('a'), {});
    let release: () => void = () => undefined;
    src.faults.inject('liveMigration', { delayMs: 1 });
    clock.sleep = () => new Promise<void>((r) => (release = r));
    const running = src.liveMigration(spec('a'), { host: 'h2', nodename: 'h2' }, {});
    await new Promise((r) => setImmediate(r));
    await src.liveMigrationAbort(spec('a'));
    release();
    await expect(running).rejects.toThrow('aborted');
    expect((await src.getInfo(spec('a'))).powerState).toBe('RUNNING');
    await dst.rollbackLiveMigrationAtDestination(spec('a'), {});
    await dst.rollbackLiveMigrationAtDestination(spec('a'), {});
    expect(await dst.listInstances()).toEqual([]);
  });
});

describe('fault injection', () => {
  test('delays on the injected clock, failures for the first N calls', async () => {
    const clock = new ManualClock();
    const d = driver({}, clock);
    d.faults.inject('spawn', { delayMs: 2500, error: 'libvirt said no', times: 2 });
    await expect(d.spawn(spec('a'))).rejects.toThrow(new InjectedFaultError('spawn', 'libvirt said no'));
    await expect(d.spawn(spec('a'))).rejects.toBeInstanceOf(InjectedFaultError);
    await d.spawn(spec('a'));
    expect(clock.sleeps).toEqual([2500, 2500]);
    expect(await d.listInstances()).toHaveLength(1);
  });

  test('a given Error is thrown as is; clear disarms', async () => {
    const d = driver();
    const boom = new Error('disk full');
    d.faults.inject('destroy', { error: boom });
    await expect(d.destroy(spec('a'))).rejects.toBe(boom);
    d.faults.clear();
    await d.destroy(spec('a'));
  });
});

describe('host file', () => {
  test('a malformed host file fails init with every problem named', async () => {
    const file = hostFile({ cpu: { sockets: 0, cores_per_socket: 1, threads_per_core: 1 } });
    const err = await driver({ COMPUTE_AGENT__FAKE__HOST_FILE: file }).init('h1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DriverInitError);
    expect((err as Error).message).toBe(`${file}: cpu.sockets: expected a socket count (a whole number >= 1)`);
    expect((err as Error).cause).toBeInstanceOf(HostFileError);
  });

  test('a missing host file is a HostFileError naming the errno', async () => {
    const d = driver({ COMPUTE_AGENT__FAKE__HOST_FILE: '/nonexistent/host.yaml' });
    await expect(d.init('h1')).rejects.toThrow('/nonexistent/host.yaml: cannot be read (ENOENT)');
  });

  test('uptime from the host file when it says, else from the clock since init', async () => {
    const withFile = driver({ COMPUTE_AGENT__FAKE__HOST_FILE: hostFile({ uptime_seconds: 42 }) });
    expect(await withFile.getHostUptime()).toBe(42);
    const clock = new ManualClock();
    const plain = driver({ COMPUTE_AGENT__FAKE__HOST_FILE: hostFile({}) }, clock);
    await plain.init('h1');
    clock.t += 90_500;
    expect(await plain.getHostUptime()).toBe(90);
  });
});

describe('vGPU placement feeds the reshape', () => {
  test('instances spawned with root vGPUs move to the GPU their vGPUs are on', async () => {
    const file = hostFile({
      gpus: ['0000:84:00.0', '0000:85:00.0'].map((address) => ({ address, vendor_id: '10de', device_id: '13f2', mdev_types: [{ type: 'nvidia-35', available_instances: 2 }] })),
    });
    const env = { COMPUTE_AGENT__FAKE__HOST_FILE: file, COMPUTE_AGENT__DEVICES__ENABLED_MDEV_TYPES: 'nvidia-35' };
    const legacy = driver({ ...env, COMPUTE_AGENT__DEVICES__VGPU_PROVIDER_LAYOUT: 'root' });
    const tree = new ProviderTree();
    tree.newRoot('h1', ROOT);
    await legacy.updateProviderTree(tree, 'h1');
    expect(tree.data('h1').inventories.VGPU?.total).toBe(4);

    // Instances whose vGPUs were allocated on the root are placed on a GPU by the hypervisor
    // (as libvirt places their mdevs); after the switch to per-GPU providers their allocations
    // follow the GPU they are really on, not a guess.
    const current = driver(env);
    await current.updateProviderTree(tree.clone(), 'h1'); // learn the host
    await current.spawn(spec('a', { [ROOT]: { VGPU: 2 } })); // fills 0000:84:00.0
    await current.spawn(spec('b', { [ROOT]: { VGPU: 1 } })); // goes to 0000:85:00.0
    expect([current.hypervisor.find('a')?.gpu, current.hypervisor.find('b')?.gpu]).toEqual(['0000:84:00.0', '0000:85:00.0']);

    const allocations = { a: { [ROOT]: { VGPU: 2 } }, b: { [ROOT]: { VGPU: 1 } } };
    const t1 = tree.clone();
    const moves = await current.updateProviderTree(t1, 'h1', allocations);
    const g84 = t1.uuidOf('h1_pci_0000_84_00_0');
    const g85 = t1.uuidOf('h1_pci_0000_85_00_0');
    expect(moves).toEqual([
      { from: ROOT, to: g84, resources: { VGPU: 2 }, consumers: { a: { VGPU: 2 } } },
      { from: ROOT, to: g85, resources: { VGPU: 2 }, consumers: { b: { VGPU: 1 } } },
    ]);
    expect(checkMoves(tree.snapshot(), t1.snapshot(), moves, allocations)).toEqual([]);
  });
});
