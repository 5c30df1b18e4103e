import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DriverInitError } from '../../../../virt-drivers/errors';
import { FakeExec } from '../../../helpers/fake-exec';
import { RootedHostFs } from '../../../../virt-drivers/host/host-fs';
import { chooseAccel, compareVersions, parseQemuVersion, probeQemu, tcgMigrationHazard } from '../../../../virt-drivers/qemu/host';

function hostWithFlags(flags: string): RootedHostFs {
  const root = mkdtempSync(join(tmpdir(), 'qemu-host-'));
  mkdirSync(join(root, 'proc'));
  writeFileSync(join(root, 'proc', 'cpuinfo'), `processor\t: 0\nflags\t\t: fpu vme ${flags} sse2\n\n`);
  return new RootedHostFs(root);
}

describe('qemu host facts', () => {
  test('the version printed by qemu-system-x86_64 --version', () => {
    expect(parseQemuVersion('QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright ...')).toEqual({
      major: 7,
      minor: 2,
      micro: 22,
      text: '7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)',
    });
    expect(parseQemuVersion('nonsense')).toBeUndefined();
    expect(compareVersions({ major: 7, minor: 2, micro: 22 }, { major: 8, minor: 0, micro: 0 })).toBe(-1);
    expect(compareVersions({ major: 7, minor: 2, micro: 22 }, { major: 7, minor: 2, micro: 22 })).toBe(0);
    expect(compareVersions({ major: 7, minor: 10, micro: 0 }, { major: 7, minor: 2, micro: 9 })).toBe(1);
  });

  test('live migration under TCG before QEMU 9.0 is named a hazard (lost dirty pages); KVM and QEMU 9.0 on are not', () => {
    const v = (text: string) => parseQemuVersion(`QEMU emulator version ${text}`)!;
    expect(tcgMigrationHazard(v('7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)'), 'tcg')).toMatch(/^QEMU 7\.2\.22 under TCG can lose guest writes during a live migration \(fixed in QEMU 9\.0\)/);
    expect(tcgMigrationHazard(v('8.2.9'), 'tcg')).toMatch(/QEMU 8\.2\.9/);
    expect(tcgMigrationHazard(v('7.2.22'), 'kvm')).toBeUndefined();
    expect(tcgMigrationHazard(v('9.0.0'), 'tcg')).toBeUndefined();
    expect(tcgMigrationHazard(v('10.0.13 (Debian 1:10.0.13+ds-0+deb13u1)'), 'tcg')).toBeUndefined();
  });

  test('missing binaries fail init with the package to install', async () => {
    await expect(probeQemu(new FakeExec(), 'qemu-system-x86_64', 'qemu-img')).rejects.toThrow(
      'qemu-system-x86_64 not found: install qemu-system-x86 and qemu-utils (apt-get install --no-install-recommends qemu-system-x86 qemu-utils), or set [qemu] binary',
    );
    const onlyQemu = new FakeExec({ 'qemu-system-x86_64 --version': { stdout: 'QEMU emulator version 7.2.22\n' } });
    await expect(probeQemu(onlyQemu, 'qemu-system-x86_64', 'qemu-img')).rejects.toThrow(/qemu-img not found: .*or set \[qemu\] qemu_img_binary/);
    const odd = new FakeExec({ 'qemu-system-x86_64 --version': { stdout: 'hello\n' } });
    await expect(probeQemu(odd, 'qemu-system-x86_64', 'qemu-img')).rejects.toThrow(DriverInitError);
  });

  test('auto uses KVM only when /dev/kvm opens and the CPU has vmx or svm', async () => {
    const yes = async (): Promise<boolean> => true;
    const no = async (): Promise<boolean> => false;
    expect(await chooseAccel('auto', hostWithFlags('vmx'), yes)).toMatchObject({ accel: 'kvm' });
    expect(await chooseAccel('auto', hostWithFlags('svm'), yes)).toMatchObject({ accel: 'kvm' });
    expect(await chooseAccel('auto', hostWithFlags('pni'), yes)).toEqual({ accel: 'tcg', reason: '/dev/kvm opens but the CPU advertises no vmx/svm (partial or paravirtual KVM)' });
    expect(await chooseAccel('auto', hostWithFlags('vmx'), no)).toMatchObject({ accel: 'tcg', reason: '/dev/kvm cannot be opened read-write' });
    expect(await chooseAccel('tcg', hostWithFlags('vmx'), yes)).toMatchObject({ accel: 'tcg' });
    expect(await chooseAccel('kvm', hostWithFlags('pni'), yes)).toMatchObject({ accel: 'kvm' });
    await expect(chooseAccel('kvm', hostWithFlags('vmx'), no)).rejects.toThrow(/accel = kvm, but \/dev\/kvm cannot be opened read-write/);
  });
});
