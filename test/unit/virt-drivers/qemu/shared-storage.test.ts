// check_instance_shared_storage's probe on the qemu driver: a file the other host made in its
// instances directory is seen here only when it exists under this host's instances directory; a
// path elsewhere, a relative one, or one that climbs out with `..` is never looked at.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../../../config/loader';
import { systemClock } from '../../../../lib/clock';
import { silentLogger } from '../../../../lib/logging/logger';
import { RootedHostFs } from '../../../../virt-drivers/host/host-fs';
import { QemuDriver } from '../../../../virt-drivers/qemu/driver';
import { FakeExec } from '../../../helpers/fake-exec';

test('a file under the instances directory is seen; anything else is not', async () => {
  const root = mkdtempSync(join(tmpdir(), 'shared-'));
  const instances = join(root, 'instances');
  const env = { COMPUTE_AGENT__DEFAULT__HOST: 'h', COMPUTE_AGENT__DEFAULT__STATE_PATH: join(root, 'state'), COMPUTE_AGENT__DEFAULT__INSTANCES_PATH: instances };
  const { config } = loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' });
  const driver = new QemuDriver({ config, logger: silentLogger(), clock: systemClock, exec: new FakeExec(), fs: new RootedHostFs('/') });
  try {
    mkdirSync(instances);
    writeFileSync(join(instances, 'tmpAbc123'), '');
    writeFileSync(join(root, 'outside'), '');
    expect(await driver.instanceFileVisible(join(instances, 'tmpAbc123'))).toBe(true);
    expect(await driver.instanceFileVisible(join(instances, 'tmpMissing'))).toBe(false);
    expect(await driver.instanceFileVisible(join(root, 'outside'))).toBe(false);
    expect(await driver.instanceFileVisible(`${instances}/../outside`)).toBe(false);
    expect(await driver.instanceFileVisible('tmpAbc123')).toBe(false);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
