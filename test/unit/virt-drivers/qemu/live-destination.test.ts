// The destination's last step of a live migration, with QEMU replaced by a fake that records its
// commands: the received guest becomes an ordinary running instance; it is announced again only
// when [workarounds] enable_qemu_monitor_announce_self asks for it (count times, interval apart,
// best effort); a guest without NICs is never announced; QEMU still loading the state is waited
// for up to qmp_command_timeout, then refused.
import { silentLogger } from '../../../../lib/logging/logger';
import { InstanceStateError } from '../../../../virt-drivers/errors';
import type { QemuHost } from '../../../../virt-drivers/qemu/context';
import { QmpCommandError } from '../../../../virt-drivers/qemu/errors';
import type { VmDefinition } from '../../../../virt-drivers/qemu/instance-files';
import type { Managed } from '../../../../virt-drivers/qemu/instances';
import { postLiveMigrationAtDestination } from '../../../../virt-drivers/qemu/live-destination';
import { qemuOptionsFromConfig } from '../../../../virt-drivers/qemu/options';
import type { LiveMigrateData } from '../../../../virt-drivers/types';
import { configFromEnv, configProblems } from '../../../helpers/config';

const UUID = '9a1ce000-0000-4000-8000-0000000000d5';
const ref = { uuid: UUID, name: 'n' };
const NIC = { portId: '6dc509ee-0e7f-46b4-8920-d6883f9a6a56', mac: 'fa:16:3e:00:00:01', slot: 0 };

interface Fake { host: QemuHost; m: Managed; calls: string[]; slept: number[] }

function fake(opts: { announce: QemuHost['opts']['announceAfterLiveMigration']; nics?: boolean; runStates?: string[]; refuse?: boolean }): Fake {
  const calls: string[] = [];
  const slept: number[] = [];
  let now = 0;
  const states = [...(opts.runStates ?? ['running'])];
  const vm = {
    alive: async () => true,
    // The states in turn, the last one from then on.
    runState: async () => (states.length > 1 ? states.shift() : states[0]) ?? 'running',
    execute: async (command: string) => {
      calls.push(command);
      if (command === 'announce-self' && opts.refuse) throw new QmpCommandError(command, 'GenericError', 'refused');
      return {};
    },
  };
  const def = { machine: 'q35', ...(opts.nics === false ? {} : { nics: [NIC] }) } as unknown as VmDefinition;
  const m = { rec: { uuid: UUID, vm: def, task: 'incoming', power: 'running' }, paths: {}, vm } as unknown as Managed;
  const host = {
    opts: { announceAfterLiveMigration: opts.announce, qmpTimeoutMs: 30_000 },
    log: silentLogger(),
    clock: { now: () => now, sleep: async (ms: number) => void (slept.push(ms), (now += ms)) },
    table: {
      active: new Map([[UUID, m]]),
      withLock: <T>(_u: string, fn: () => Promise<T>) => fn(),
      save: async (mm: Managed, patch: Partial<Managed['rec']>) => void (mm.rec = { ...mm.rec, ...patch }),
    },
  } as unknown as QemuHost;
  return { host, m, calls, slept };
}

const data = {} as LiveMigrateData;

describe('qemu live migration: the destination finishes', () => {
  test('by default (as nova) the guest is not announced again: QEMU announced it as it started here', async () => {
    const announce = qemuOptionsFromConfig(configFromEnv({})).announceAfterLiveMigration;
    expect(announce).toBeNull();
    const f = fake({ announce });
    await postLiveMigrationAtDestination(f.host, ref, data);
    expect(f.calls).not.toContain('announce-self');
    expect(f.m.rec).toMatchObject({ task: null, power: 'running' });
  });

  test('[workarounds] enable_qemu_monitor_announce_self: announced count times, interval apart', async () => {
    const announce = qemuOptionsFromConfig(
      configFromEnv({
        COMPUTE_AGENT__WORKAROUNDS__ENABLE_QEMU_MONITOR_ANNOUNCE_SELF: 'true',
        COMPUTE_AGENT__WORKAROUNDS__QEMU_MONITOR_ANNOUNCE_SELF_COUNT: '4',
        COMPUTE_AGENT__WORKAROUNDS__QEMU_MONITOR_ANNOUNCE_SELF_INTERVAL: '2',
      }),
    ).announceAfterLiveMigration;
    expect(announce).toEqual({ count: 4, intervalMs: 2000 });
    const f = fake({ announce });
    await postLiveMigrationAtDestination(f.host, ref, data);
    expect(f.calls.filter((c) => c === 'announce-self')).toHaveLength(4);
    expect(f.slept).toEqual([2000, 2000, 2000]);
    expect(f.m.rec).toMatchObject({ task: null, power: 'running' });
    // Finished already: nothing more.
    await postLiveMigrationAtDestination(f.host, ref, data);
    expect(f.calls.filter((c) => c === 'announce-self')).toHaveLength(4);
  });

  test('an announcement QEMU refuses ends the rounds and does not fail the migration; a guest without NICs is not announced', async () => {
    const refused = fake({ announce: { count: 3, intervalMs: 1000 }, refuse: true });
    await postLiveMigrationAtDestination(refused.host, ref, data);
    expect(refused.calls.filter((c) => c === 'announce-self')).toHaveLength(1);
    expect(refused.m.rec.task).toBeNull();
    const noNics = fake({ announce: { count: 3, intervalMs: 1000 }, nics: false });
    await postLiveMigrationAtDestination(noNics.host, ref, data);
    expect(noNics.calls).not.toContain('announce-self');
  });

  test('QEMU still loading the last of the state (the source already done): waited for, then finished', async () => {
    const f = fake({ announce: null, runStates: ['inmigrate', 'inmigrate', 'inmigrate', 'running'] });
    await postLiveMigrationAtDestination(f.host, ref, data);
    expect(f.slept).toEqual([50, 50, 50]);
    expect(f.m.rec).toMatchObject({ task: null, power: 'running' });
  });

  test('a guest still receiving after qmp_command_timeout is refused, and stays incoming', async () => {
    const f = fake({ announce: null, runStates: ['inmigrate'] });
    await expect(postLiveMigrationAtDestination(f.host, ref, data)).rejects.toBeInstanceOf(InstanceStateError);
    expect(f.slept.reduce((a, b) => a + b, 0)).toBe(30_000);
    expect(f.m.rec.task).toBe('incoming');
    expect(f.calls).toEqual([]);
  });

  test('a bad count or interval is one line naming the option', () => {
    const lines = configProblems(() =>
      configFromEnv({
        COMPUTE_AGENT__WORKAROUNDS__ENABLE_QEMU_MONITOR_ANNOUNCE_SELF: 'sometimes',
        COMPUTE_AGENT__WORKAROUNDS__QEMU_MONITOR_ANNOUNCE_SELF_COUNT: '0',
        COMPUTE_AGENT__WORKAROUNDS__QEMU_MONITOR_ANNOUNCE_SELF_INTERVAL: 'soon',
      }),
    );
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^workarounds\.enable_qemu_monitor_announce_self = .*true or false/),
        expect.stringMatching(/^workarounds\.qemu_monitor_announce_self_count = .*>= 1/),
        expect.stringMatching(/^workarounds\.qemu_monitor_announce_self_interval = .*not an integer/),
      ]),
    );
    expect(lines).toHaveLength(3);
  });
});
