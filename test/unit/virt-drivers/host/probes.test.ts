/**
 * Probes on fixture trees, and how failures are reported: a hung tool is cut at its deadline and
 * the rest of the inventory still reports; "not present" differs from "failed".
 */
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../../lib/logging/logger';
import { systemClock } from '../../../../lib/clock';
import { discoverHost, HOST_PROBE_NAMES } from '../../../../virt-drivers/host/discover';
import { FakeExec } from '../../../helpers/fake-exec';
import { RecordedSizesHostFs } from '../../../../virt-drivers/host/host-fs';
import { ProbeDataError, ProbeError, ProbeTimeoutError, runProbe, type Probe } from '../../../../virt-drivers/host/probe';
import { HOST_PROBE_NAMES as CONFIG_PROBE_NAMES } from '../../../../config/schema';
import { ProviderTree } from '../../../../model/provider-tree';
import { FakeDriver } from '../../../../virt-drivers/fake/driver';
import { driverContext, loadFixtureHost, rootOnlyTree } from '../../../helpers/fixture-host';

const env = { clock: systemClock, logger: silentLogger() };
const QUERY = 'nvidia-smi --query-gpu=index,pci.bus_id,uuid,name,memory.total,mig.mode.current,compute_cap --format=csv,noheader,nounits';

describe('runProbe', () => {
  const base = { ...env, fs: new RecordedSizesHostFs('/nonexistent', {}), exec: new FakeExec(), options: { instancesPath: '/', commandTimeoutMs: 50 } };

  test('a probe that never answers is cut at its deadline', async () => {
    const stuck: Probe<number> = { name: 'stuck', run: () => new Promise(() => undefined) };
    const started = Date.now();
    const outcome = await runProbe(stuck, base, 80);
    expect(outcome.status).toBe('failed');
    expect(outcome.status === 'failed' && outcome.error).toBeInstanceOf(ProbeTimeoutError);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  test('the deadline aborts the signal the probe passes to its tools', async () => {
    let aborted = false;
    const watcher: Probe<number> = {
      name: 'watcher',
      run: ({ signal }) =>
        new Promise(() => {
          signal.addEventListener('abort', () => (aborted = true));
        }),
    };
    await runProbe(watcher, base, 30);
    expect(aborted).toBe(true);
  });

  test('a thrown error becomes a failed outcome with the error as cause', async () => {
    const bad: Probe<number> = {
      name: 'bad',
      run: async () => {
        throw new ProbeDataError('/proc/x', 'a number', 'zz');
      },
    };
    const outcome = await runProbe(bad, base, 1000);
    expect(outcome.status).toBe('failed');
    if (outcome.status !== 'failed') return;
    expect(outcome.error).toBeInstanceOf(ProbeError);
    expect(outcome.error.message).toBe('bad probe: /proc/x: expected a number, got "zz"');
    expect(outcome.error.cause).toBeInstanceOf(ProbeDataError);
  });

  test('"not present" is its own outcome', async () => {
    const none: Probe<number> = { name: 'none', run: async () => ({ detected: false, reason: 'no such thing' }) };
    expect(await runProbe(none, base, 1000)).toMatchObject({ status: 'absent', reason: 'no such thing' });
  });
});

describe('discoverHost', () => {
  test('the probe names match the ones [compute] disabled_host_probes accepts', () => {
    expect([...HOST_PROBE_NAMES].sort()).toEqual([...CONFIG_PROBE_NAMES].sort());
  });

  test('an empty root: every probe reports not present, none fails', async () => {
    const facts = await discoverHost(
      { ...env, fs: new RecordedSizesHostFs(mkdtempSync(join(tmpdir(), 'empty-')), {}), exec: new FakeExec() },
      { instancesPath: '/var/lib/x', probeTimeoutMs: 1000, commandTimeoutMs: 100 },
    );
    expect(Object.fromEntries(Object.entries(facts).map(([k, v]) => [k, v.status]))).toEqual({
      cpu: 'absent',
      memory: 'absent',
      disk: 'failed', // statfs of / has no recorded size: a real failure, not absence
      gpu: 'absent',
      nic: 'absent',
    });
  });

  test('disabled probes are not run and report not present', async () => {
    const host = loadFixtureHost('h100-mig');
    const facts = await discoverHost(
      { ...env, fs: host.fs, exec: host.exec },
      { instancesPath: '/var/lib/nova/instances', probeTimeoutMs: 1000, commandTimeoutMs: 100, disabled: ['gpu'] },
    );
    expect(facts.gpu).toMatchObject({ status: 'absent', reason: 'disabled by [compute] disabled_host_probes' });
    expect(host.exec.calls).toEqual([]);
    expect(facts.cpu.status).toBe('detected');
  });

  test('the disk probe measures the nearest existing ancestor of a missing instances_path', async () => {
    const host = loadFixtureHost('h100-mig');
    const facts = await discoverHost(
      { ...env, fs: host.fs, exec: host.exec },
      { instancesPath: '/var/lib/nova/instances/not/yet', probeTimeoutMs: 1000, commandTimeoutMs: 100 },
    );
    expect(facts.disk).toMatchObject({ status: 'detected', data: { measuredPath: '/var/lib/nova/instances', totalGb: 28677 } });
  });
});

describe('a hung nvidia-smi (acceptance)', () => {
  test('is killed at probe_command_timeout; the GPUs it speaks for stay as they were, everything else reports', async () => {
    // Bandwidth reported, so the host's one NIC (no VFs, no physnet) shows in the tree as a provider.
    const overrides = { 'compute.probe_command_timeout': '0.2', 'compute.probe_timeout': '5', 'network.report_bandwidth_inventory': 'true' };
    const host = loadFixtureHost('h100-mig', overrides);
    host.exec.set(QUERY, { hang: true });
    const driver = new FakeDriver(driverContext(host));
    const started = Date.now();
    const tree = rootOnlyTree(host.config);
    expect(await driver.updateProviderTree(tree, 'dgx-h100-01')).toEqual([]);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(host.exec.calls).toEqual([expect.objectContaining({ file: 'nvidia-smi', timeoutMs: 200, outcome: 'timeout' })]);

    // The rest of the host is reported in full.
    const names = tree.snapshot().map((p) => p.name);
    expect(names).toEqual(['dgx-h100-01', 'dgx-h100-01:eno3']);
    expect(Object.keys(tree.data('dgx-h100-01').inventories).sort()).toEqual(['DISK_GB', 'MEMORY_MB', 'VCPU']);
    const facts = driver.lastHostFacts();
    expect(facts?.gpu.status).toBe('detected');
    if (facts?.gpu.status !== 'detected') return;
    expect(facts.gpu.data).toHaveLength(8);
    expect(facts.gpu.data.every((g) => g.incomplete?.includes('no answer within 200 ms'))).toBe(true);
    expect(facts.gpu.warnings[0]).toMatch(/^nvidia-smi: nvidia-smi .* no answer within 200 ms \(killed\); MIG state of 0000:18:00.0, .* unknown$/);
  });

  test('on a tree that already has the GPUs, they are kept exactly as they were (no withdrawn capacity)', async () => {
    const good = loadFixtureHost('h100-mig');
    const first = new FakeDriver(driverContext(good));
    const tree: ProviderTree = rootOnlyTree(good.config);
    await first.updateProviderTree(tree, 'dgx-h100-01');
    const before = tree.snapshot();

    const hung = loadFixtureHost('h100-mig', { 'compute.probe_command_timeout': '0.1' });
    hung.exec.set(QUERY, { hang: true });
    const copy = tree.clone();
    expect(await new FakeDriver(driverContext(hung)).updateProviderTree(copy, 'dgx-h100-01')).toEqual([]);
    expect(copy.snapshot()).toEqual(before);
  });

  test('garbage from nvidia-smi degrades the NVIDIA GPUs, with the expected form in the warning', async () => {
    const host = loadFixtureHost('h100-mig');
    host.exec.set(QUERY, { stdout: 'Failed to initialize NVML: Driver/library version mismatch\n' });
    const driver = new FakeDriver(driverContext(host));
    await driver.updateProviderTree(rootOnlyTree(host.config), 'dgx-h100-01');
    const facts = driver.lastHostFacts();
    expect(facts?.gpu.status === 'detected' && facts.gpu.data[0]?.incomplete).toMatch(/expected 7 comma-separated columns/);
  });

  test('a whole probe that hangs (a stuck sysfs read) is cut at probe_timeout and the others report', async () => {
    const host = loadFixtureHost('nic-sriov-25g', { 'compute.probe_timeout': '0.1' });
    const realList = host.fs.list.bind(host.fs);
    host.fs.list = (path: string) => (path === '/sys/class/net' ? new Promise<string[]>(() => undefined) : realList(path));
    const driver = new FakeDriver(driverContext(host));
    const tree = rootOnlyTree(host.config);
    await driver.updateProviderTree(tree, 'net-node-12');
    expect(driver.lastHostFacts()?.nic).toMatchObject({ status: 'failed' });
    expect(tree.snapshot().map((p) => p.name)).toEqual(['net-node-12']);
    expect(Object.keys(tree.data('net-node-12').inventories).sort()).toEqual(['DISK_GB', 'MEMORY_MB', 'VCPU']);
  });
});

describe('nvidia-smi absent or without MIG', () => {
  test('not installed: NVIDIA GPUs on the nvidia driver are incomplete, the reason says so', async () => {
    const host = loadFixtureHost('m60-mdev');
    host.exec.set(QUERY, { notFound: true });
    const driver = new FakeDriver(driverContext(host));
    await driver.updateProviderTree(rootOnlyTree(host.config), 'vgpu-m60-03');
    const facts = driver.lastHostFacts();
    expect(facts?.gpu.status === 'detected' && facts.gpu.data.map((g) => g.incomplete)).toEqual(['nvidia-smi is not installed', 'nvidia-smi is not installed']);
  });

  test('MIG listings are only run when a GPU has MIG enabled', async () => {
    const host = loadFixtureHost('m60-mdev');
    await new FakeDriver(driverContext(host)).updateProviderTree(rootOnlyTree(host.config), 'vgpu-m60-03');
    expect(host.exec.calls.map((c) => c.args[0])).toEqual([expect.stringContaining('--query-gpu')]);
  });
});

describe('nic probe roles', () => {
  test('ports, SR-IOV VFs and switchdev representors are told apart; virtual interfaces are skipped', async () => {
    const root = mkdtempSync(join(tmpdir(), 'nicroles-'));
    const w = (p: string, v: string): void => {
      mkdirSync(join(root, p, '..'), { recursive: true });
      writeFileSync(join(root, p), `${v}\n`);
    };
    const l = (p: string, target: string): void => {
      mkdirSync(join(root, p, '..'), { recursive: true });
      symlinkSync(target, join(root, p));
    };
    const pf = '/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0';
    const vf = '/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.2';
    for (const [dev, id] of [
      [pf, '1015'],
      [vf, '1016'],
    ] as const) {
      w(`${dev}/vendor`, '0x15b3');
      w(`${dev}/device`, `0x${id}`);
      w(`${dev}/class`, '0x020000');
      l(`/sys/bus/pci/devices/${dev.split('/').pop()}`, join(root, dev));
    }
    w(`${pf}/sriov_totalvfs`, '8');
    l(`${vf}/physfn`, join(root, pf));
    for (const [ifname, dev, port] of [
      ['enp3s0f0np0', pf, 'p0'],
      ['enp3s0f0v0', vf, ''],
      ['eth_rep0', pf, 'pf0vf0'],
    ] as const) {
      const node = `${dev}/net/${ifname}`;
      w(`${node}/speed`, '25000');
      if (port) w(`${node}/phys_port_name`, port);
      l(`${node}/device`, join(root, dev));
      l(`/sys/class/net/${ifname}`, join(root, node));
    }
    w('/sys/devices/virtual/net/br0/speed', '-1');
    l('/sys/class/net/br0', join(root, '/sys/devices/virtual/net/br0'));
    const facts = await discoverHost(
      { ...env, fs: new RecordedSizesHostFs(root, {}), exec: new FakeExec() },
      { instancesPath: '/', probeTimeoutMs: 1000, commandTimeoutMs: 100 },
    );
    expect(facts.nic.status === 'detected' && facts.nic.data.map((n) => [n.name, n.role, n.address, n.sriovTotalVfs])).toEqual([
      ['enp3s0f0np0', 'port', '0000:03:00.0', 8],
      ['enp3s0f0v0', 'vf', '0000:03:00.2', undefined],
      ['eth_rep0', 'representor', '0000:03:00.0', 8],
    ]);
  });
});

describe('gpu probe: Intel through /sys/class/drm', () => {
  test('an Intel Data Center GPU Flex: memory from the DRM card, no vendor tool run', async () => {
    const root = mkdtempSync(join(tmpdir(), 'intelgpu-'));
    const w = (p: string, v: string): void => {
      mkdirSync(join(root, p, '..'), { recursive: true });
      writeFileSync(join(root, p), `${v}\n`);
    };
    const l = (p: string, target: string): void => {
      mkdirSync(join(root, p, '..'), { recursive: true });
      symlinkSync(join(root, target), join(root, p));
    };
    const dev = '/sys/devices/pci0000:00/0000:00:01.0/0000:4d:00.0';
    w(`${dev}/vendor`, '0x8086');
    w(`${dev}/device`, '0x56c0');
    w(`${dev}/class`, '0x038000');
    w(`${dev}/numa_node`, '1');
    mkdirSync(join(root, '/sys/bus/pci/drivers/i915'), { recursive: true });
    l(`${dev}/driver`, '/sys/bus/pci/drivers/i915');
    l('/sys/bus/pci/devices/0000:4d:00.0', dev);
    w(`${dev}/drm/card0/lmem_total_bytes`, String(16 * 1024 ** 3));
    l(`${dev}/drm/card0/device`, dev);
    l('/sys/class/drm/card0', `${dev}/drm/card0`);
    const exec = new FakeExec();
    const facts = await discoverHost({ ...env, fs: new RecordedSizesHostFs(root, {}), exec }, { instancesPath: '/', probeTimeoutMs: 1000, commandTimeoutMs: 100 });
    expect(facts.gpu).toMatchObject({
      status: 'detected',
      data: [{ address: '0000:4d:00.0', vendor: 'intel', vendorId: '8086', deviceId: '56c0', driver: 'i915', numaNode: 1, memoryMb: 16384, mdevTypes: [] }],
    });
    expect(exec.calls).toEqual([]);
  });
});
