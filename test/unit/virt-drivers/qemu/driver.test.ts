import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../../lib/logging/logger';
import { systemClock } from '../../../../lib/clock';
import { loadConfig } from '../../../../config/loader';
import { DriverError, DriverInitError } from '../../../../virt-drivers/errors';
import { FakeExec } from '../../../helpers/fake-exec';
import { RootedHostFs } from '../../../../virt-drivers/host/host-fs';
import { QemuDriver } from '../../../../virt-drivers/qemu/driver';
import { ImageDownloadError } from '../../../../virt-drivers/qemu/errors';
import type { GlanceApi } from '../../../../virt-drivers/glance/api';
import { GlanceNotFoundError } from '../../../../virt-drivers/glance/errors';

const VERSIONS = {
  'qemu-system-x86_64 --version': { stdout: 'QEMU emulator version 7.2.22 (Debian)\n' },
  'qemu-img --version': { stdout: 'qemu-img version 7.2.22\n' },
};

function driver(env: Record<string, string>, exec = new FakeExec(VERSIONS), kvm = false): QemuDriver {
  const { config } = loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__STATE_PATH: '/nonexistent/state', ...env }, defaultFile: '/nonexistent/compute-agent.conf' });
  return new QemuDriver({ config, logger: silentLogger(), clock: systemClock, exec, fs: new RootedHostFs('/nonexistent') }, { kvmUsable: async () => kvm });
}

describe('qemu driver init', () => {
  test('an empty host: ready, nothing recovered, TCG when KVM is not usable', async () => {
    const d = driver({});
    await d.init('h');
    expect(d.recoveryReport()).toEqual([]);
    expect(d.hostFacts().accel).toEqual({ accel: 'tcg', reason: '/dev/kvm cannot be opened read-write' });
    expect(d.hostFacts().version).toMatchObject({ major: 7, minor: 2, micro: 22 });
    expect(await d.listInstances()).toEqual([]);
  });

  test("the hypervisor version as nova's libvirt driver reports QEMU's (major * 10^6 + minor * 10^3 + micro), 0 before init", async () => {
    const d = driver({});
    expect(d.hypervisorVersion()).toBe(0);
    await d.init('h');
    expect(d.hypervisorVersion()).toBe(7_002_022);
  });

  test('fails with what to do: QEMU missing, /dev/kvm demanded but unusable, instances_path too long for QMP sockets', async () => {
    await expect(driver({}, new FakeExec()).init('h')).rejects.toThrow(/qemu-system-x86_64 not found: install qemu-system-x86/);
    await expect(driver({ COMPUTE_AGENT__QEMU__ACCEL: 'kvm' }).init('h')).rejects.toThrow(DriverInitError);
    const long = `/srv/${'x'.repeat(60)}`;
    await expect(driver({ COMPUTE_AGENT__DEFAULT__INSTANCES_PATH: long }).init('h')).rejects.toThrow(/instances_path .* is too long: QMP socket paths under it would exceed 107 bytes/);
  });

  test('operations before init say so', async () => {
    const d = driver({});
    await expect(d.spawn({ uuid: 'u', name: 'n', flavor: { vcpus: 1, memory_mb: 32, root_gb: 0, ephemeral_gb: 0, swap: 0, extra_specs: {} }, allocations: {} })).rejects.toThrow(
      new DriverError('the qemu driver is not initialised (init was not called or failed)'),
    );
  });

  test('a spec with impossible sizes is refused naming the field', async () => {
    const d = driver({});
    await d.init('h');
    await expect(d.spawn({ uuid: 'u', name: 'n', flavor: { vcpus: 0, memory_mb: 32, root_gb: 0, ephemeral_gb: 0, swap: 0, extra_specs: {} }, allocations: {} })).rejects.toThrow(
      'instance u: flavor.vcpus must be an integer > 0',
    );
  });

  test('a Glance image id goes to Glance through the cache; a failure there leaves no instance directory', async () => {
    const root = mkdtempSync(join(tmpdir(), 'qemu-glance-'));
    const asked: string[] = [];
    const glance: GlanceApi = {
      getImage: async (id) => {
        asked.push(id);
        throw new GlanceNotFoundError(`GET /v2/images/${id}`);
      },
      openImageData: () => Promise.reject(new Error('not reached')),
    };
    const { config } = loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__STATE_PATH: join(root, 'state'), COMPUTE_AGENT__DEFAULT__INSTANCES_PATH: join(root, 'i') }, defaultFile: '/nonexistent/compute-agent.conf' });
    const d = new QemuDriver({ config, logger: silentLogger(), clock: systemClock, exec: new FakeExec(VERSIONS), fs: new RootedHostFs('/nonexistent') }, { kvmUsable: async () => false, glance });
    await d.init('h');
    const image = '11111111-2222-3333-4444-555555555555';
    const spec = { uuid: '9a1ce000-0000-4000-8000-000000000001', name: 'n', image_ref: image, flavor: { vcpus: 1, memory_mb: 32, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} }, allocations: {} };
    const err = await d.spawn(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDownloadError);
    expect((err as Error).message).toBe(`image "${image}": GET /v2/images/${image}: not found in Glance (404)`);
    expect(asked).toEqual([image]);
    expect(readdirSync(join(root, 'i'))).toEqual([]);
    await d.cleanupHost('h');
    rmSync(root, { recursive: true, force: true });
  });
});
