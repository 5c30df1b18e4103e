import { CommandFailedError, CommandNotFoundError, CommandTimeoutError, ProcessExec } from '../../../../virt-drivers/host/exec';
import { FakeExec } from '../../../helpers/fake-exec';

describe('ProcessExec', () => {
  const exec = new ProcessExec();

  test('resolves with the output of a command that exits 0, in the C locale', async () => {
    const r = await exec.run('sh', ['-c', 'echo "$LC_ALL"; echo err >&2'], { timeoutMs: 5000 });
    expect(r).toEqual({ stdout: 'C\n', stderr: 'err\n' });
  });

  test('arguments are never interpreted by a shell', async () => {
    const r = await exec.run('echo', ['$HOME; rm -rf /'], { timeoutMs: 5000 });
    expect(r.stdout).toBe('$HOME; rm -rf /\n');
  });

  test('a non-zero exit is a CommandFailedError with the status and the end of stderr', async () => {
    const err = await exec.run('sh', ['-c', 'echo line1 >&2; echo "the reason" >&2; exit 3'], { timeoutMs: 5000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandFailedError);
    expect((err as CommandFailedError).exitCode).toBe(3);
    expect((err as Error).message).toContain('exit status 3');
    expect((err as Error).message).toContain('the reason');
  });

  test('a missing tool is CommandNotFoundError ("not present", not a failure)', async () => {
    await expect(exec.run('/nonexistent/nvidia-smi', [], { timeoutMs: 5000 })).rejects.toBeInstanceOf(CommandNotFoundError);
  });

  test('a hung tool is killed and the call rejects at the deadline', async () => {
    const started = Date.now();
    const err = await exec.run('sleep', ['30'], { timeoutMs: 150 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandTimeoutError);
    expect((err as CommandTimeoutError).timeoutMs).toBe(150);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  test('aborting the signal kills the tool', async () => {
    const controller = new AbortController();
    const pending = exec.run('sleep', ['30'], { timeoutMs: 10000, signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toThrow('aborted');
  });

  test('too much output kills the tool', async () => {
    await expect(exec.run('sh', ['-c', 'yes | head -c 100000'], { timeoutMs: 5000, maxOutputBytes: 1000 })).rejects.toThrow('more than 1000 bytes');
  });
});

describe('FakeExec', () => {
  test('replays scripted output and records calls', async () => {
    const fake = new FakeExec({ 'tool --x': { stdout: 'hello\n' } });
    expect(await fake.run('tool', ['--x'], { timeoutMs: 100 })).toEqual({ stdout: 'hello\n', stderr: '' });
    expect(fake.calls).toEqual([{ file: 'tool', args: ['--x'], timeoutMs: 100, outcome: 'ok' }]);
  });

  test('an unscripted command is not installed', async () => {
    await expect(new FakeExec().run('nvidia-smi', [], { timeoutMs: 100 })).rejects.toBeInstanceOf(CommandNotFoundError);
  });

  test('a scripted exit status fails like a real one', async () => {
    const fake = new FakeExec({ t: { exitCode: 6, stdout: 'No GPU instances found: Not Found' } });
    const err = await fake.run('t', [], { timeoutMs: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandFailedError);
    expect((err as CommandFailedError).stdout).toContain('No GPU instances found');
  });

  test('a hang rejects with CommandTimeoutError when the deadline passes', async () => {
    const fake = new FakeExec({ t: { hang: true } });
    const started = Date.now();
    await expect(fake.run('t', [], { timeoutMs: 60 })).rejects.toBeInstanceOf(CommandTimeoutError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(50);
    expect(fake.calls[0]?.outcome).toBe('timeout');
  });

  test('a delayed answer still loses to a shorter deadline', async () => {
    const fake = new FakeExec({ t: { stdout: 'late', delayMs: 200 } });
    await expect(fake.run('t', [], { timeoutMs: 30 })).rejects.toBeInstanceOf(CommandTimeoutError);
  });
});
