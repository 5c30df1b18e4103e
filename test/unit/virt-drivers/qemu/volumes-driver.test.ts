// The qemu driver with volumes, QEMU itself replaced by a launcher that records its arguments:
// a boot-from-volume spawn (no image_ref) starts QEMU with no local disk and the volume first in
// the boot order; a bad volume or key file fails the spawn before QEMU starts and leaves no
// directory; the definition with its volumes is what the record and a live migration carry.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../../lib/logging/logger';
import { systemClock } from '../../../../lib/clock';
import { RootedHostFs } from '../../../../virt-drivers/host/host-fs';
import { QemuDriver } from '../../../../virt-drivers/qemu/driver';
import { MigrationDataError, VmStartError, VolumeConnectionError, VolumeSecretError } from '../../../../virt-drivers/qemu/errors';
import { readRecord, writeRecord, type VmDefinition } from '../../../../virt-drivers/qemu/instance-files';
import { vmField } from '../../../../virt-drivers/qemu/live-data';
import { LaunchError, type LaunchRequest, type VmProcesses } from '../../../../virt-drivers/qemu/process';
import { volumeDefinitions } from '../../../../virt-drivers/qemu/volumes';
import type { InstanceSpec } from '../../../../virt-drivers/types';
import { configFromEnv } from '../../../helpers/config';
import { FakeExec } from '../../../helpers/fake-exec';
import { rbdVolume } from '../../../helpers/rbd-volume';
import { RECORD } from './record-fixture';

const VERSIONS = {
  'qemu-system-x86_64 --version': { stdout: 'QEMU emulator version 7.2.22 (Debian)\n' },
  'qemu-img --version': { stdout: 'qemu-img version 7.2.22\n' },
};
const KEY = 'AQBwS3hmAAAAABAAf0yR0Uq1Ek5RyqQKrJc0Ww==';
const SECRET = '5b6e1a2c-7f3d-4a8e-9c01-2d3e4f5a6b7c';
const VOL = '0d1a4c4e-1111-4111-8111-111111111111';

describe('qemu driver: RBD volumes', () => {
  const root = mkdtempSync(join(tmpdir(), 'qemu-vol-'));
  const secrets = join(root, 'secrets');
  const instances = join(root, 'i');
  const launched: LaunchRequest[] = [];
  // QEMU "cannot be executed": the arguments are recorded, the spawn then fails as a failed start does.
  const processes: VmProcesses = {
    launch: async (req) => {
      launched.push(req);
      throw new LaunchError(req.binary, 'ENOENT');
    },
    inspect: async () => undefined,
    signal: () => undefined,
  };
  let driver: QemuDriver;

  beforeAll(async () => {
    const config = configFromEnv({ COMPUTE_AGENT__DEFAULT__STATE_PATH: join(root, 'state'), COMPUTE_AGENT__DEFAULT__INSTANCES_PATH: instances, COMPUTE_AGENT__QEMU__RBD_SECRETS_DIR: secrets });
    driver = new QemuDriver({ config, logger: silentLogger(), clock: systemClock, exec: new FakeExec(VERSIONS), fs: new RootedHostFs('/nonexistent') }, { kvmUsable: async () => false, processes });
    await driver.init('h');
    mkdirSync(secrets, { mode: 0o700 });
  });
  afterAll(async () => {
    await driver.cleanupHost('h');
    rmSync(root, { recursive: true, force: true });
  });
  beforeEach(() => (launched.length = 0));

  const spec = (uuid: string, volumes: InstanceSpec['volumes']): InstanceSpec => ({ uuid, name: 'n', flavor: { vcpus: 1, memory_mb: 32, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} }, allocations: {}, ...(volumes ? { volumes } : {}) });
  const failure = (p: Promise<unknown>): Promise<unknown> => p.then(() => undefined, (e: unknown) => e);

  test('boot from volume (no image_ref): QEMU gets no local disk, the volume with bootindex 1 and its key by file only', async () => {
    writeFileSync(join(secrets, `${SECRET}.base64`), KEY, { mode: 0o600 });
    const uuid = '9a1ce000-0000-4000-8000-000000000001';
    const err = await failure(driver.spawn(spec(uuid, [rbdVolume(VOL, { bootIndex: 0 })])));
    expect(err).toBeInstanceOf(VmStartError);
    expect(launched).toHaveLength(1);
    const args = launched[0]?.args ?? [];
    expect(args).not.toContain('-drive');
    expect(args).toContain(`secret,id=vol0-secret,file=${secrets}/${SECRET}.base64,format=base64`);
    expect(args).toContain(`virtio-blk-pci,drive=vol0-format,id=virtio-vol0,serial=${VOL},bus=volport0,bootindex=1`);
    expect(args.join(' ')).not.toContain(KEY);
    expect(readdirSync(instances)).toEqual([]);
  });

  test('without image_ref and without volumes the spawn is what it was: no disk, no volume devices', async () => {
    await failure(driver.spawn(spec('9a1ce000-0000-4000-8000-000000000002', undefined)));
    const args = launched[0]?.args ?? [];
    expect(args).not.toContain('-drive');
    expect(args).not.toContain('-blockdev');
    expect(args.filter((a) => a.startsWith('virtio-blk-pci'))).toEqual([]);
  });

  test('a key file open to others fails the spawn before QEMU starts, naming the file; nothing is left', async () => {
    const file = join(secrets, `${SECRET}.base64`);
    chmodSync(file, 0o644);
    const err = await failure(driver.spawn(spec('9a1ce000-0000-4000-8000-000000000003', [rbdVolume(VOL, { bootIndex: 0 })])));
    chmodSync(file, 0o600);
    expect(err).toBeInstanceOf(VolumeSecretError);
    expect((err as Error).message).toBe(`instance 9a1ce000-0000-4000-8000-000000000003: cephx key file ${file} is open to other users (mode 0644); chmod 600 ${file}`);
    expect(launched).toEqual([]);
    expect(readdirSync(instances)).toEqual([]);
  });

  test('an unsupported back end fails the spawn at once, naming the field; nothing is made', async () => {
    const iscsi = { ...rbdVolume(VOL), connection_info: { driver_volume_type: 'iscsi', data: {} } };
    const err = await failure(driver.spawn(spec('9a1ce000-0000-4000-8000-000000000004', [iscsi])));
    expect(err).toBeInstanceOf(VolumeConnectionError);
    expect((err as Error).message).toContain('connection_info.driver_volume_type must be "rbd"');
    expect(launched).toEqual([]);
    expect(existsSync(join(instances, '9a1ce000-0000-4000-8000-000000000004'))).toBe(false);
  });

  test('the record keeps the volumes (a restarted driver starts the same devices); the live-migration data carries them, checked', async () => {
    const volumes = volumeDefinitions('i', [rbdVolume(VOL, { bootIndex: 0 })]);
    const vm: VmDefinition = { ...RECORD.vm, disk: false, nics: [], volumes };
    const dir = mkdtempSync(join(root, 'rec-'));
    await writeRecord(dir, { ...RECORD, imageRef: null, image: null, vm });
    expect((await readRecord(dir))?.vm).toEqual(vm);
    expect(vmField({ vm: JSON.stringify(vm) })).toEqual(vm);
    const [v0] = volumes;
    const evil = { ...vm, volumes: [{ ...v0, secretUuid: '../../../etc/shadow' }] };
    expect(() => vmField({ vm: JSON.stringify(evil) })).toThrow(MigrationDataError);
    expect(() => vmField({ vm: JSON.stringify(evil) })).toThrow(/volumes\.0\.secretUuid/);
  });
});
