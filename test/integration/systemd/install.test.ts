// install.sh in a staging root: everything lands where the unit expects it, a second run changes
// nothing an operator edited, the installed binary runs, and uninstall.sh removes what was added.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const REPO = join(__dirname, '..', '..', '..');
const sh = (script: string, ...args: string[]): string => execFileSync('bash', [join(REPO, 'systemd', script), ...args], { encoding: 'utf8' });

test('install is idempotent, keeps the operator config, and uninstall keeps state unless purged', () => {
  const root = mkdtempSync(join(tmpdir(), 'ca-install-'));
  sh('install.sh', '--root', root, '--no-build');
  const conf = join(root, 'etc/compute-agent/compute-agent.conf');
  expect(statSync(join(root, 'etc/compute-agent')).mode & 0o777).toBe(0o750);
  expect(statSync(conf).mode & 0o777).toBe(0o640);
  expect(statSync(join(root, 'var/lib/compute-agent')).mode & 0o777).toBe(0o750);
  expect(readlinkSync(join(root, 'usr/local/bin/compute-agent'))).toBe('/opt/compute-agent/dist/agent/cli/main.js');
  const unit = readFileSync(join(root, 'etc/systemd/system/compute-agent.service'), 'utf8');
  expect(unit).toMatch(/^ExecStart=\/usr\/bin\/env node (--\S+ )*\/opt\/compute-agent\/dist\/agent\/cli\/main\.js run --config-file \/etc\/compute-agent\/compute-agent\.conf$/m);

  // The installed copy runs on its own node_modules. The example config names no virt driver, so it
  // is refused until an operator picks one; with one picked it is accepted.
  const checkConfig = (): ReturnType<typeof spawnSync> =>
    spawnSync(process.execPath, [join(root, 'opt/compute-agent/dist/agent/cli/main.js'), 'check-config', '--config-file', conf], { encoding: 'utf8' });
  const untouched = checkConfig();
  expect(untouched.status).toBe(2);
  expect(String(untouched.stderr).trim()).toBe('DEFAULT.compute_driver missing: the agent has no default virt driver; expected one of fake, qemu');
  writeFileSync(conf, `${readFileSync(conf, 'utf8')}\n[DEFAULT]\ncompute_driver = fake\n`);
  const picked = checkConfig();
  expect(picked.status).toBe(0);
  expect(String(picked.stdout)).toContain('configuration OK');

  writeFileSync(conf, '[DEFAULT]\nhost = edited\n');
  const second = sh('install.sh', '--root', root, '--no-build');
  expect(second).not.toContain('example config copied');
  expect(second).not.toContain('dependencies installed');
  expect(readFileSync(conf, 'utf8')).toBe('[DEFAULT]\nhost = edited\n');

  // A staging root never gets the GPU drop-in by detection; --gpu-devices yes writes it, no removes it.
  const dropin = join(root, 'etc/systemd/system/compute-agent.service.d/gpu-devices.conf');
  expect(existsSync(dropin)).toBe(false);
  expect(sh('install.sh', '--root', root, '--no-build', '--gpu-devices', 'yes')).toContain('GPU/VFIO drop-in written');
  const gpu = readFileSync(dropin, 'utf8');
  expect(gpu).toContain('PrivateDevices=no');
  expect(gpu).toContain('DevicePolicy=closed');
  for (const allow of ['char-nvidia* rw', 'char-drm rw', '/dev/vfio/vfio rw', 'char-vfio rw']) expect(gpu).toContain(`DeviceAllow=${allow}`);
  sh('install.sh', '--root', root, '--no-build', '--gpu-devices', 'no');
  expect(existsSync(dropin)).toBe(false);
  sh('install.sh', '--root', root, '--no-build', '--gpu-devices', 'yes');

  sh('uninstall.sh', '--root', root);
  expect(existsSync(dropin)).toBe(false);
  expect(existsSync(join(root, 'opt/compute-agent'))).toBe(false);
  expect(existsSync(join(root, 'etc/systemd/system/compute-agent.service'))).toBe(false);
  expect(existsSync(join(root, 'usr/local/bin/compute-agent'))).toBe(false);
  expect(existsSync(conf)).toBe(true);
  sh('uninstall.sh', '--root', root, '--purge');
  expect(existsSync(join(root, 'etc/compute-agent'))).toBe(false);
  expect(existsSync(join(root, 'var/lib/compute-agent'))).toBe(false);
}, 180000);
