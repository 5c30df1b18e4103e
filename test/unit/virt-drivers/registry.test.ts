import { silentLogger } from '../../../lib/logging/logger';
import { systemClock } from '../../../lib/clock';
import { loadConfig } from '../../../config/loader';
import { CAPABILITY_TRAITS, capabilityTraits } from '../../../virt-drivers/driver';
import { UnknownDriverError } from '../../../virt-drivers/errors';
import { FakeDriver } from '../../../virt-drivers/fake/driver';
import { FakeExec } from '../../helpers/fake-exec';
import { QemuDriver } from '../../../virt-drivers/qemu/driver';
import { RootedHostFs } from '../../../virt-drivers/host/host-fs';
import { builtinDrivers, DriverRegistry } from '../../../virt-drivers/registry';
import { STANDARD_TRAITS } from '../../../virt-drivers/traits';
import type { DriverContext } from '../../../virt-drivers/types';

const ctx = (): DriverContext => ({
  config: loadConfig({ files: [], env: {}, defaultFile: '/nonexistent' }).config,
  logger: silentLogger(),
  clock: systemClock,
  exec: new FakeExec(),
  fs: new RootedHostFs('/nonexistent'),
});

describe('driver registry', () => {
  test('the built-in registry builds the fake and qemu drivers by name', () => {
    const registry = builtinDrivers();
    expect(registry.names()).toEqual(['fake', 'qemu']);
    expect(registry.create('fake', ctx())).toBeInstanceOf(FakeDriver);
    expect(registry.create('qemu', ctx())).toBeInstanceOf(QemuDriver);
  });

  test('an unknown name lists the registered ones', () => {
    expect(() => builtinDrivers().create('libvirt.LibvirtDriver', ctx())).toThrow(
      new UnknownDriverError('libvirt.LibvirtDriver', ['fake', 'qemu']),
    );
    expect(() => builtinDrivers().create('x', ctx())).toThrow('no virt driver named "x"; registered: fake, qemu');
  });

  test('a third-party driver registers the same way; a name is taken once', () => {
    const registry = new DriverRegistry().register('other', (c) => new FakeDriver(c));
    expect(registry.create('other', ctx()).name).toBe('fake');
    expect(() => registry.register('other', (c) => new FakeDriver(c))).toThrow('already registered');
  });
});

describe('capability traits', () => {
  test("every trait of nova's capability map is a standard trait", () => {
    for (const trait of Object.values(CAPABILITY_TRAITS)) expect(STANDARD_TRAITS.has(trait)).toBe(true);
  });

  test('flags map to {trait: present}, absent flags are false', () => {
    const t = capabilityTraits({ supports_attach_interface: true });
    expect(t.COMPUTE_NET_ATTACH_INTERFACE).toBe(true);
    expect(t.COMPUTE_VOLUME_EXTEND).toBe(false);
    expect(Object.keys(t)).toHaveLength(Object.keys(CAPABILITY_TRAITS).length);
  });
});
