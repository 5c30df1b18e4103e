/**
 * The qemu driver through the conformance suite (tree contract and Placement writes), on this
 * machine's real probes and on every fixture host. No QEMU is needed: `init` asks for the QEMU
 * version through the Exec port, scripted here. On the fixture hosts the qemu driver's tree must
 * equal the fake driver's but for the capability traits: both lay the host out through the same
 * probes and `layout/`.
 */
import { silentLogger } from '../../lib/logging/logger';
import { systemClock } from '../../lib/clock';
import { loadConfig } from '../../config/loader';
import type { ProviderSnapshot } from '../../model/provider-types';
import { CAPABILITY_TRAITS } from '../../virt-drivers/driver';
import { FakeDriver } from '../../virt-drivers/fake/driver';
import { FakeExec } from '../helpers/fake-exec';
import { RootedHostFs } from '../../virt-drivers/host/host-fs';
import { QemuDriver } from '../../virt-drivers/qemu/driver';
import type { DriverContext } from '../../virt-drivers/types';
import { driverContext, loadFixtureHost, rootOnlyTree } from '../helpers/fixture-host';
import { describeDriverConformance, type ConformanceSubject } from './conformance';
import { describePlacementConformance } from './placement-conformance';

const VERSION = 'QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright (c) 2003-2022 Fabrice Bellard and the QEMU Project developers\n';

/** Scripts the two version probes `init` runs. */
function withQemu(exec: FakeExec): FakeExec {
  return exec.set('qemu-system-x86_64 --version', { stdout: VERSION }).set('qemu-img --version', { stdout: 'qemu-img version 7.2.22\n' });
}

function qemu(ctx: DriverContext): QemuDriver {
  return new QemuDriver(ctx, { kvmUsable: async () => false });
}

function describeBoth(label: string, subject: ConformanceSubject): void {
  describeDriverConformance(label, subject);
  describePlacementConformance(label, subject);
}

describeBoth('qemu on this machine', {
  nodename: 'conformance-host',
  make: async () => {
    // init only reads instances_path; a path that does not exist is an empty host.
    const env = { COMPUTE_AGENT__DEFAULT__HOST: 'conformance-host', COMPUTE_AGENT__DEFAULT__STATE_PATH: '/nonexistent/state' };
    const { config } = loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' });
    return qemu({ config, logger: silentLogger(), clock: systemClock, exec: withQemu(new FakeExec()), fs: new RootedHostFs('/') });
  },
});

const FIXTURES = ['h100-mig', 'mi250-amd', 'm60-mdev', 'nic-sriov-25g', 'numa-hugepages'];

for (const fixture of FIXTURES) {
  const host = loadFixtureHost(fixture);
  describeBoth(`qemu on fixture ${fixture}`, {
    nodename: host.config.DEFAULT.host,
    make: async () => {
      const h = loadFixtureHost(fixture);
      withQemu(h.exec);
      return qemu(driverContext(h));
    },
  });
}

describe('qemu driver: the same layout as the fake driver', () => {
  const capability = new Set<string>(Object.values(CAPABILITY_TRAITS));
  const withoutCapabilities = (snaps: readonly ProviderSnapshot[]): unknown =>
    snaps.map((s) => ({ ...s, traits: s.traits.filter((t) => !capability.has(t)) }));

  for (const fixture of FIXTURES) {
    test(`fixture ${fixture}: the trees differ only in capability traits`, async () => {
      const hq = loadFixtureHost(fixture);
      const q = qemu(driverContext({ ...hq, exec: withQemu(hq.exec) }));
      const hf = loadFixtureHost(fixture);
      const f = new FakeDriver(driverContext(hf));
      await q.init(hq.config.DEFAULT.host);
      await f.init(hf.config.DEFAULT.host);
      const tq = rootOnlyTree(hq.config);
      const tf = rootOnlyTree(hf.config);
      await q.updateProviderTree(tq, hq.config.DEFAULT.host);
      await f.updateProviderTree(tf, hf.config.DEFAULT.host);
      expect(withoutCapabilities(tq.snapshot())).toEqual(withoutCapabilities(tf.snapshot()));
      const root = tq.data(hq.config.DEFAULT.host).traits;
      expect(root).toEqual(expect.arrayContaining(['COMPUTE_IMAGE_TYPE_QCOW2', 'COMPUTE_IMAGE_TYPE_RAW', 'COMPUTE_NET_ATTACH_INTERFACE']));
      expect(root).not.toContain('COMPUTE_ACCELERATORS');
    });
  }
});
