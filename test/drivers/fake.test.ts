/**
 * The fake driver through the conformance suite: on this machine's real probes, on every fixture
 * host, and on a host file edited into reshape scenarios (vGPU layout switch, NIC split into
 * ports, interface renamed, storage becoming shared).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../lib/logging/logger';
import { systemClock } from '../../lib/clock';
import { loadConfig } from '../../config/loader';
import type { VirtDriver } from '../../virt-drivers/driver';
import { FakeDriver } from '../../virt-drivers/fake/driver';
import { ProcessExec } from '../../virt-drivers/host/exec';
import { RootedHostFs } from '../../virt-drivers/host/host-fs';
import { driverContext, loadFixtureHost } from '../helpers/fixture-host';
import { describeDriverConformance, type ConformanceSubject } from './conformance';
import { describePlacementConformance } from './placement-conformance';

function fakeOn(env: Record<string, string>): FakeDriver {
  const { config } = loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' });
  return new FakeDriver({ config, logger: silentLogger(), clock: systemClock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
}

/** Both halves of the suite: the tree contract, and the Placement writes through the tracker. */
function describeBoth(label: string, subject: ConformanceSubject): void {
  describeDriverConformance(label, subject);
  describePlacementConformance(label, subject);
}

/** What the fake driver has plugged (its `vifs` table). */
const fakePlugged = (d: VirtDriver): string[] => [...(d as FakeDriver).vifs.plugged.keys()];

describeBoth('fake on this machine', {
  nodename: 'conformance-host',
  plugged: fakePlugged,
  make: async () => fakeOn({ COMPUTE_AGENT__DEFAULT__HOST: 'conformance-host', COMPUTE_AGENT__DEFAULT__STATE_PATH: '/nonexistent/state' }),
});

for (const fixture of ['h100-mig', 'mi250-amd', 'm60-mdev', 'nic-sriov-25g', 'numa-hugepages']) {
  const host = loadFixtureHost(fixture);
  describeBoth(`fake on fixture ${fixture}`, {
    nodename: host.config.DEFAULT.host,
    make: async () => new FakeDriver(driverContext(loadFixtureHost(fixture))),
  });
}

const BASE = {
  cpu: { sockets: 2, cores_per_socket: 8, threads_per_core: 2, vendor: 'GenuineIntel', flags: ['avx2', 'sse4_2', 'vmx'] },
  memory: { total_mb: 262144, hugepages: [{ size_kb: 1048576, total: 16 }] },
  disk: { total_gb: 1800 },
  gpus: [
    { address: '0000:84:00.0', vendor_id: '10de', device_id: '13f2', model: 'Tesla M60', memory_mb: 8129, mdev_types: [{ type: 'nvidia-35', available_instances: 16 }] },
    { address: '0000:85:00.0', vendor_id: '10de', device_id: '13f2', model: 'Tesla M60', memory_mb: 8129, mdev_types: [{ type: 'nvidia-35', available_instances: 16 }] },
  ],
  nics: [{ name: 'ens1', address: '0000:3b:00.0', speed_mbps: 50000, sriov_totalvfs: 128 }],
};

function hostFileSubject(label: string) {
  const dir = mkdtempSync(join(tmpdir(), 'fake-host-'));
  const file = join(dir, 'host.yaml');
  const env = (layout: string): Record<string, string> => ({
    COMPUTE_AGENT__DEFAULT__HOST: 'edited-host',
    COMPUTE_AGENT__FAKE__HOST_FILE: file,
    COMPUTE_AGENT__DEVICES__ENABLED_MDEV_TYPES: 'nvidia-35',
    COMPUTE_AGENT__DEVICES__VGPU_PROVIDER_LAYOUT: layout,
    COMPUTE_AGENT__NETWORK__PHYSICAL_DEVICE_MAPPINGS: 'physnet1:ens1,physnet1:ens1f0,physnet2:ens1f1',
  });
  const write = (doc: object): void => writeFileSync(file, JSON.stringify(doc, null, 1));
  describeBoth(label, {
    nodename: 'edited-host',
    make: async () => {
      write(BASE);
      return fakeOn(env('root'));
    },
    scenarios: [
      {
        name: 'vGPU layout switched from the root to one child per GPU (agent restarted)',
        expectMoves: true,
        change: async () => {
          const next = fakeOn(env('per_gpu'));
          await next.init('edited-host');
          return next;
        },
      },
      {
        name: 'a 2x25G NIC, reported as one port, split into its two ports',
        expectMoves: true,
        change: async (d) => {
          write({
            ...BASE,
            nics: [
              { name: 'ens1f0', address: '0000:3b:00.0', speed_mbps: 25000, sriov_totalvfs: 64 },
              { name: 'ens1f1', address: '0000:3b:00.1', speed_mbps: 25000, sriov_totalvfs: 64 },
            ],
          });
          return d;
        },
      },
      {
        name: 'an interface renamed (same PCI function): the provider is renamed, nothing moves',
        expectMoves: false,
        change: async (d) => {
          write({ ...BASE, nics: [{ name: 'enp59s0', address: '0000:3b:00.0', speed_mbps: 50000, sriov_totalvfs: 128 }] });
          return d;
        },
      },
      {
        name: 'instances_path storage becomes a sharing provider',
        expectMoves: true,
        change: async (d) => {
          write({
            ...BASE,
            shared_storage: {
              aggregate: '3c4d5e6f-7081-4a92-8ba3-c4d5e6f70819',
              provider: { uuid: '4d5e6f70-8192-4aa3-9cb4-d5e6f708192a', name: 'ceph-pool', disk_gb: 100000 },
            },
          });
          return d;
        },
      },
    ],
  });
}

hostFileSubject('fake on an edited host file');
