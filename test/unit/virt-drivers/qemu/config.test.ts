import { qemuOptionsFromConfig } from '../../../../virt-drivers/qemu/options';
import { configFromEnv, configProblems } from '../../../helpers/config';

const load = configFromEnv;
const problems = (env: Record<string, string>): string[] => configProblems(() => load(env));

describe('[qemu] options', () => {
  test('defaults: auto accel, q35, loopback migration on libvirt\'s port range, nova\'s timeouts', () => {
    const o = qemuOptionsFromConfig(load({}));
    expect(o).toMatchObject({
      binary: 'qemu-system-x86_64',
      qemuImg: 'qemu-img',
      accel: 'auto',
      machineType: 'q35',
      cpuModel: 'max',
      sandbox: true,
      shutdownTimeoutMs: 60_000,
      softRebootTimeoutMs: 120_000,
      destroyTimeoutMs: 10_000,
      deviceDetach: { attempts: 8, timeoutMs: 20_000 },
      migrationListenAddress: '127.0.0.1',
      migrationPorts: { min: 49152, max: 49215 },
      completionTimeoutMsPerGib: 800_000,
      bandwidthBytes: 0,
      downtimeMs: 500,
      autoConverge: false,
      coldTransport: 'auto',
      instancesPath: '/var/lib/compute-agent/instances',
    });
    expect(o.imagesPath).toBeUndefined();
    expect(o.inboundAddress).toBeUndefined();
  });

  test('values are converted to milliseconds and bytes; an IPv6 address may come in brackets', () => {
    const o = qemuOptionsFromConfig(
      load({
        COMPUTE_AGENT__QEMU__ACCEL: 'tcg',
        COMPUTE_AGENT__QEMU__LIVE_MIGRATION_BANDWIDTH: '100',
        COMPUTE_AGENT__QEMU__MIGRATION_LISTEN_ADDRESS: '[::]',
        COMPUTE_AGENT__QEMU__LIVE_MIGRATION_INBOUND_ADDR: '2001:db8::5',
        COMPUTE_AGENT__QEMU__MIGRATION_PORT_RANGE: ' 61000 - 61010 ',
        COMPUTE_AGENT__QEMU__DESTROY_TIMEOUT: '2.5',
      }),
    );
    expect(o).toMatchObject({ accel: 'tcg', bandwidthBytes: 100 * 1024 * 1024, migrationListenAddress: '::', inboundAddress: '2001:db8::5', migrationPorts: { min: 61000, max: 61010 }, destroyTimeoutMs: 2500 });
  });

  test('bad values are reported together, each naming the option and the expected form', () => {
    const lines = problems({
      COMPUTE_AGENT__QEMU__ACCEL: 'hvf',
      COMPUTE_AGENT__QEMU__MIGRATION_PORT_RANGE: '5000-4000',
      COMPUTE_AGENT__QEMU__MIGRATION_LISTEN_ADDRESS: 'migration.example',
      COMPUTE_AGENT__QEMU__IMAGES_PATH: 'images',
      COMPUTE_AGENT__QEMU__LIVE_MIGRATION_DOWNTIME: '10',
    });
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^qemu\.accel = "hvf": not one of the choices; expected auto, kvm or tcg/),
        expect.stringMatching(/^qemu\.migration_port_range = "5000-4000": not a port range; expected MIN-MAX, e\.g\. 49152-49215/),
        expect.stringMatching(/^qemu\.migration_listen_address = "migration\.example": not an IP address; expected an IP address/),
        expect.stringMatching(/^qemu\.images_path = "images": not an absolute path/),
        expect.stringMatching(/^qemu\.live_migration_downtime = "10": must be >= 100/),
      ]),
    );
    expect(lines).toHaveLength(5);
  });
});
