import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HostProcesses, LaunchError, parseProcStat } from '../../../../virt-drivers/qemu/process';

describe('VM processes', () => {
  test('/proc/<pid>/stat: state and start time, whatever the command name holds', () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    fields[0] = 'S';
    fields[19] = '123456';
    expect(parseProcStat(`42 (qemu (x) y) ${fields.join(' ')}`)).toEqual({ state: 'S', startTicks: '123456' });
    expect(parseProcStat('garbage')).toBeUndefined();
  });

  test('a launched process is detached, logs to its file, is found by pid and identity, and is gone once killed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qemu-proc-'));
    const log = join(dir, 'out.log');
    const p = new HostProcesses();
    const launched = await p.launch({ binary: '/bin/sh', args: ['-c', 'echo started; exec sleep 30'], logPath: log, cwd: dir });
    const info = await p.inspect(launched.pid);
    expect(info?.startTicks).toBe(launched.startTicks);
    // Its own session: the agent's process group can be signalled without reaching it.
    const sid = Number(readFileSync(`/proc/${launched.pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[3]);
    expect(sid).toBe(launched.pid);
    // The shell may not have run its echo yet on a loaded machine: wait for it before the kill.
    for (let t = Date.now(); !readFileSync(log, 'utf8').includes('started') && Date.now() - t < 10_000; ) await new Promise((r) => setTimeout(r, 20));
    expect(readFileSync(log, 'utf8')).toContain('started');
    p.signal(launched.pid, 'SIGKILL');
    expect(await launched.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await p.inspect(launched.pid)).toBeUndefined();
    p.signal(launched.pid, 'SIGKILL'); // gone: not an error
  });

  test('a binary that cannot be executed is a LaunchError', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qemu-proc-'));
    await expect(new HostProcesses().launch({ binary: '/nonexistent/qemu', args: [], logPath: join(dir, 'l'), cwd: dir })).rejects.toThrow(LaunchError);
  });
});
