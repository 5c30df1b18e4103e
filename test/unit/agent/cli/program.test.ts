import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, type CliIo } from '../../../../agent/cli/program';
import { insecureConfigFiles } from '../../../../config/permissions';

function io(env: Record<string, string> = {}): CliIo & { outLines: string[]; errLines: string[] } {
  const outLines: string[] = [];
  const errLines: string[] = [];
  return {
    outLines,
    errLines,
    out: (l) => outLines.push(l),
    err: (l) => errLines.push(l),
    env,
    stopSignal: () => new Promise(() => undefined),
  };
}

const dir = mkdtempSync(join(tmpdir(), 'ca-cli-'));
const write = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe('compute-agent CLI', () => {
  test('check-config on the acceptance file: exactly two lines, exit 2', async () => {
    const bad = write('bad.conf', '[DEFAULT]\ntransport_url = http://x\ncpu_allocation_ratio = -1\n');
    const t = io();
    expect(await runCli(['check-config', '--config-file', bad], t)).toBe(2);
    expect(t.errLines).toHaveLength(2);
    expect(t.errLines[0]).toMatch(/^DEFAULT\.transport_url/);
    expect(t.errLines[1]).toMatch(/^DEFAULT\.cpu_allocation_ratio/);
    expect(t.errLines.join('\n')).not.toMatch(/\n\s+at /); // no stack trace
  });

  test('--config-file works before the subcommand too', async () => {
    const good = write('good.conf', '[DEFAULT]\nhost = h1\ncompute_driver = fake\n');
    const t = io();
    expect(await runCli(['--config-file', good, 'check-config'], t)).toBe(0);
    expect(t.outLines).toEqual([`configuration OK (${good})`]);
  });

  test('check-config --show prints the effective config with secrets masked', async () => {
    const f = write('s.conf', '[DEFAULT]\ncompute_driver = qemu\ntransport_url = rabbit://nova:mqpass@mq1:5672,nova:mqpass@mq2/\n[placement]\npassword = p;a#ss word\n');
    const t = io();
    expect(await runCli(['check-config', '--show', '--config-file', f], t)).toBe(0);
    const shown = t.outLines.join('\n');
    expect(shown).toContain('transport_url = rabbit://nova:***@mq1:5672,nova:***@mq2:5672/');
    expect(shown).toContain('password = ***');
    expect(shown).toContain('migration_port_range = 49152-49215');
    expect(shown).not.toContain('[object Object]');
    expect(shown).not.toContain('mqpass');
    expect(shown).not.toContain('p;a#ss');
  });

  test('warnings for unknown options go to stderr, exit stays 0', async () => {
    const f = write('w.conf', '[DEFAULT]\ncompute_driver = fake\nhots = typo\n');
    const t = io();
    expect(await runCli(['check-config', '--config-file', f], t)).toBe(0);
    expect(t.errLines).toEqual([expect.stringContaining('warning: ') as string]);
  });

  test('run, sync --once and check-config without compute_driver: exit 2, one line naming the option and the drivers', async () => {
    const none = write('nodriver.conf', '[DEFAULT]\nhost = h1\n');
    for (const argv of [['run'], ['sync', '--once'], ['check-config']]) {
      const t = io();
      expect(await runCli([...argv, '--config-file', none], t)).toBe(2);
      expect(t.errLines).toHaveLength(1);
      expect(t.errLines[0]).toMatch(/^(compute-agent: )?DEFAULT\.compute_driver missing: the agent has no default virt driver; expected one of fake, qemu$/);
      expect(t.outLines).toEqual([]);
    }
  });

  test('run with an unregistered compute_driver: exit 2 naming it and the registered drivers', async () => {
    const f = write('libvirt.conf', '[DEFAULT]\nhost = h1\ncompute_driver = libvirt\n');
    const t = io();
    expect(await runCli(['run', '--config-file', f], t)).toBe(2);
    expect(t.errLines).toEqual(['no virt driver named "libvirt"; registered: fake, qemu']);
  });

  test('--version, --help exit 0; an unknown command or option exits 2', async () => {
    const t = io();
    expect(await runCli(['--version'], t)).toBe(0);
    expect(t.outLines[0]).toMatch(/^\d+\.\d+\.\d+/);
    expect(await runCli(['--help'], io())).toBe(0);
    expect(await runCli(['bogus'], io())).toBe(2);
    expect(await runCli(['check-config', '--nope'], io())).toBe(2);
  });

  test('run with a bad --connect-attempts is a usage error', async () => {
    const good = write('r.conf', '[DEFAULT]\nhost = h1\ncompute_driver = fake\n');
    const t = io();
    expect(await runCli(['run', '--config-file', good, '--connect-attempts', 'zero'], t)).toBe(2);
    expect(t.errLines[0]).toContain('--connect-attempts');
  });
});

describe('config files holding secrets', () => {
  test('run refuses a world-readable file with a password, naming file, mode and option', async () => {
    const f = write('secret.conf', '[DEFAULT]\ncompute_driver = fake\n[placement]\npassword = hunter2-long\n');
    chmodSync(f, 0o644);
    const t = io();
    expect(await runCli(['run', '--config-file', f], t)).toBe(2);
    expect(t.errLines).toEqual([expect.stringContaining(`config file ${f} is readable by every user (mode 0644) and holds placement.password`)]);
    expect(t.errLines.join('')).not.toContain('hunter2-long');
  });

  test('a file without secrets, or a 0640 one, is fine; a transport_url without password is no secret', async () => {
    const open = write('open.conf', '[DEFAULT]\nhost = h\ntransport_url = rabbit://127.0.0.1:5672/\n');
    chmodSync(open, 0o644);
    const closed = write('closed.conf', '[DEFAULT]\ntransport_url = rabbit://u:pw@h/\n');
    chmodSync(closed, 0o640);
    const leaky = write('leaky.conf', '[DEFAULT]\ntransport_url = rabbit://u:pw@h/\n');
    chmodSync(leaky, 0o604);
    expect(insecureConfigFiles([open, closed])).toEqual([]);
    expect(insecureConfigFiles([leaky])).toEqual([expect.stringContaining('holds DEFAULT.transport_url')]);
  });
});
