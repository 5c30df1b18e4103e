// The live-migration runner against a scripted QMP monitor: the order of the commands (disk
// mirror, then memory, the mirror completed at pre-switchover before migrate-continue), and how
// each failure surfaces. Real QEMU runs the same paths in the integration tests.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../../lib/logging/logger';
import { systemClock } from '../../../../lib/clock';
import { loadConfig } from '../../../../config/loader';
import { FakeExec } from '../../../helpers/fake-exec';
import type { QemuHost } from '../../../../virt-drivers/qemu/context';
import { LiveMigrationAbortedError, LiveMigrationError, LiveMigrationTimeoutError } from '../../../../virt-drivers/qemu/errors';
import { Images } from '../../../../virt-drivers/qemu/images';
import { instancePaths } from '../../../../virt-drivers/qemu/instance-files';
import { InstanceTable } from '../../../../virt-drivers/qemu/instances';
import { runLiveMigration, type LiveRun } from '../../../../virt-drivers/qemu/live-run';
import { qemuOptionsFromConfig, type QemuOptions } from '../../../../virt-drivers/qemu/options';
import type { VmProcesses } from '../../../../virt-drivers/qemu/process';
import { QemuVm } from '../../../../virt-drivers/qemu/vm';
import { FakeQmpServer, type FakeQmpCommand } from '../../../helpers/fake-qmp';

const processes: VmProcesses = {
  launch: () => Promise.reject(new Error('not in this test')),
  inspect: async (pid) => ({ pid, startTicks: '1', argv: [] }),
  signal: () => undefined,
};

function host(extra: Partial<QemuOptions> = {}): QemuHost {
  const { config } = loadConfig({ files: [], env: {}, defaultFile: '/nonexistent/compute-agent.conf' });
  const opts: QemuOptions = { ...qemuOptionsFromConfig(config), migrationPollMs: 5, migrationLogEveryMs: 0, ...extra };
  const vmDeps = { processes, clock: systemClock, logger: silentLogger(), opts };
  return {
    opts,
    log: silentLogger(),
    clock: systemClock,
    exec: new FakeExec(),
    images: new Images({ qemuImg: 'qemu-img' }, new FakeExec()),
    processes,
    vmDeps,
    table: new InstanceTable(vmDeps),
    plugger: { plug: () => Promise.reject(new Error('not in this test')), unplug: () => Promise.reject(new Error('not in this test')) },
    facts: () => ({ version: { major: 7, minor: 2, micro: 22, text: '7.2.22' }, accel: { accel: 'tcg', reason: 'test' } }),
  };
}

describe('live migration runner (scripted QMP)', () => {
  let server: FakeQmpServer;
  let vm: QemuVm;
  let h: QemuHost;
  const executed = (): string[] => server.received.map((c) => c.execute).filter((c) => c !== 'qmp_capabilities' && c !== 'query-migrate' && c !== 'query-block-jobs');

  async function setup(extra: Partial<QemuOptions> = {}): Promise<void> {
    const dir = mkdtempSync(join(tmpdir(), 'qemu-run-'));
    server = new FakeQmpServer(join(dir, 'qmp.sock'));
    await server.listen();
    h = host(extra);
    vm = new QemuVm('u1', instancePaths(dir), 4242, '1', h.vmDeps);
  }
  afterEach(async () => {
    vm.detach();
    await server.close();
  });

  function run(nbd: boolean, signal = new AbortController().signal): Promise<unknown> {
    const r: LiveRun = { uuid: 'u1', dest: 'host-b', vm, migrateUri: 'tcp:127.0.0.1:49153', memoryMb: 32, diskBytes: nbd ? 1 << 30 : 0, signal, ...(nbd ? { nbd: { host: '127.0.0.1', port: 49152, export: 'drive-disk0' } } : {}) };
    return runLiveMigration(h, r);
  }

  /** A monitor whose migration walks through `statuses` (the last one repeats) and whose mirror is ready at once. */
  function script(statuses: Array<Record<string, unknown>>): void {
    let mirror: Record<string, unknown> | undefined;
    let i = 0;
    server.handler = (cmd: FakeQmpCommand) => {
      switch (cmd.execute) {
        case 'blockdev-mirror':
          mirror = { device: 'mirror-drive-disk0', ready: true, offset: 1, len: 1 };
          return { return: {} };
        case 'block-job-cancel':
          mirror = undefined;
          return { return: {} };
        case 'query-block-jobs':
          return { return: mirror ? [mirror] : [] };
        case 'query-migrate': {
          const s = statuses[Math.min(i, statuses.length - 1)] as Record<string, unknown>;
          if (s.status !== 'pre-switchover' || executed().includes('migrate-continue')) i++;
          return { return: s };
        }
        case 'migrate-continue':
          i++;
          return { return: {} };
        default:
          return { return: {} };
      }
    };
  }

  test('with a disk: mirror into the NBD node, migrate, complete the mirror at pre-switchover, continue', async () => {
    await setup();
    script([{ status: 'setup' }, { status: 'active', ram: { transferred: 10, remaining: 5, total: 15 } }, { status: 'pre-switchover' }, { status: 'completed', 'total-time': 9, downtime: 2, ram: { transferred: 600000 } }]);
    expect(await run(true)).toMatchObject({ totalTimeMs: 9, downtimeMs: 2, ramTransferred: 600000 });
    expect(executed()).toEqual(['migrate-set-capabilities', 'migrate-set-parameters', 'blockdev-add', 'blockdev-mirror', 'migrate', 'block-job-cancel', 'blockdev-del', 'migrate-continue']);
    const caps = server.received.find((c) => c.execute === 'migrate-set-capabilities')?.arguments;
    expect(caps).toEqual({ capabilities: [{ capability: 'events', state: true }, { capability: 'pause-before-switchover', state: true }, { capability: 'auto-converge', state: false }] });
    expect(server.received.find((c) => c.execute === 'blockdev-add')?.arguments).toEqual({ driver: 'nbd', 'node-name': 'migration-drive-disk0', server: { type: 'inet', host: '127.0.0.1', port: '49152' }, export: 'drive-disk0' });
    expect(server.received.find((c) => c.execute === 'block-job-cancel')?.arguments).toEqual({ device: 'mirror-drive-disk0' }); // not forced: completes
    expect(server.received.find((c) => c.execute === 'migrate-set-parameters')?.arguments).toEqual({ 'max-bandwidth': Number.MAX_SAFE_INTEGER, 'downtime-limit': 500 });
  });

  test('without a disk: no mirror, no pause before switch-over', async () => {
    await setup({ bandwidthBytes: 1 << 20 });
    script([{ status: 'active' }, { status: 'completed' }]);
    await run(false);
    expect(executed()).toEqual(['migrate-set-capabilities', 'migrate-set-parameters', 'migrate']);
    expect(server.received.find((c) => c.execute === 'migrate-set-parameters')?.arguments).toEqual({ 'max-bandwidth': 1 << 20, 'downtime-limit': 500 });
  });

  test("QEMU's failure reason is the error's; a started mirror is cancelled (forced) and its node removed", async () => {
    await setup();
    script([{ status: 'active' }, { status: 'failed', 'error-desc': "Failed to connect to '127.0.0.1:1': Connection refused" }]);
    const e = await run(true).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(LiveMigrationError);
    expect((e as Error).message).toBe("live migration of u1 to host-b failed: Failed to connect to '127.0.0.1:1': Connection refused; the instance still runs here");
    expect(executed().slice(-2)).toEqual(['block-job-cancel', 'blockdev-del']);
    expect(server.received.filter((c) => c.execute === 'block-job-cancel').at(-1)?.arguments).toEqual({ device: 'mirror-drive-disk0', force: true });
  });

  test('abort and the completion timeout send migrate_cancel and reject with their own classes', async () => {
    /** Active until cancelled. */
    const untilCancelled = (cmd: FakeQmpCommand): { return: unknown } =>
      cmd.execute === 'query-migrate' ? { return: { status: executed().includes('migrate_cancel') ? 'cancelled' : 'active' } } : { return: {} };
    await setup();
    server.handler = untilCancelled;
    const ac = new AbortController();
    const aborted = run(false, ac.signal);
    setTimeout(() => ac.abort(), 20);
    await expect(aborted).rejects.toThrow(LiveMigrationAbortedError);
    expect(executed()).toEqual(['migrate-set-capabilities', 'migrate-set-parameters', 'migrate', 'migrate_cancel']);

    await server.close();
    await setup({ completionTimeoutMsPerGib: 10 }); // at least 2 GiB counted: 20 ms
    server.handler = untilCancelled;
    const t0 = Date.now();
    await expect(run(false)).rejects.toThrow(LiveMigrationTimeoutError);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(20);
  });

  test('a mirror that stops before it is in sync fails with the reason QEMU gave', async () => {
    await setup();
    server.handler = (cmd) => {
      if (cmd.execute === 'blockdev-mirror') {
        setTimeout(() => server.event('BLOCK_JOB_COMPLETED', { device: 'mirror-drive-disk0', error: 'No space left on device' }), 5);
        return { return: {} };
      }
      if (cmd.execute === 'query-block-jobs') return { return: server.received.filter((c) => c.execute === 'query-block-jobs').length < 3 ? [{ device: 'mirror-drive-disk0', ready: false, offset: 0, len: 10 }] : [] };
      return { return: {} };
    };
    await expect(run(true)).rejects.toThrow('the disk copy stopped: No space left on device');
    expect(executed()).not.toContain('migrate');
  });
});
