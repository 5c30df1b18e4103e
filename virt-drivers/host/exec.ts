/**
 * The `Exec` port: run a host tool (nvidia-smi, ...) as a child process, asynchronously, with a
 * deadline that is always enforced.
 *
 * It is: the only way drivers and probes start processes, so tests replace it with a fake that
 * replays recorded output or hangs on purpose (`test/helpers/fake-exec.ts`). It is not: a shell. Arguments are
 * passed as an array (`execFile`), never interpolated into a command line.
 *
 * Deadline semantics: when `timeoutMs` elapses (or `signal` aborts) the child gets SIGKILL and the
 * promise rejects at once, without waiting for the child to exit. A tool stuck in the kernel
 * (nvidia-smi on a wedged GPU sits in uninterruptible sleep, where even SIGKILL waits) would
 * otherwise hold the caller forever; the child is reaped whenever it finally dies.
 */
import { spawn } from 'node:child_process';

/** Options for one command. */
export interface ExecOptions {
  /** Milliseconds before the child is killed and the call rejects with `CommandTimeoutError`. */
  readonly timeoutMs: number;
  /** Aborting kills the child and rejects with `CommandTimeoutError` (reason "aborted"). */
  readonly signal?: AbortSignal;
  /** Bytes of stdout kept before the child is killed (default 4 MiB). */
  readonly maxOutputBytes?: number;
  /** Extra environment; `LC_ALL=C` is always set so tools print untranslated text. */
  readonly env?: Readonly<Record<string, string>>;
}

/** What a command printed; only returned when it exited 0. */
export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs host commands. Implementations own the child processes they start and kill them on
 * timeout or abort.
 */
export interface Exec {
  /**
   * Runs `file` with `args` and resolves with its output when it exits 0.
   * @throws CommandNotFoundError when `file` cannot be executed (ENOENT, EACCES)
   * @throws CommandTimeoutError when the deadline passes or the signal aborts
   * @throws CommandFailedError when it exits non-zero, is killed, or prints too much
   */
  run(file: string, args: readonly string[], opts: ExecOptions): Promise<ExecResult>;
}

/** Base class of the errors `Exec.run` rejects with. */
export class CommandError extends Error {
  constructor(
    readonly command: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'CommandError';
  }
}

/** The tool is not installed (or not executable): "not present", not a failure of the host. */
export class CommandNotFoundError extends CommandError {
  constructor(command: string, options?: { cause?: unknown }) {
    super(command, `${command}: not found`, options);
    this.name = 'CommandNotFoundError';
  }
}

/** The tool did not finish in time and was killed. */
export class CommandTimeoutError extends CommandError {
  constructor(
    command: string,
    readonly timeoutMs: number,
    reason: 'timeout' | 'aborted' = 'timeout',
  ) {
    super(command, reason === 'timeout' ? `${command}: no answer within ${timeoutMs} ms (killed)` : `${command}: aborted (killed)`);
    this.name = 'CommandTimeoutError';
  }
}

/** The tool ran and failed: a non-zero exit status, a signal, or too much output. */
export class CommandFailedError extends CommandError {
  constructor(
    command: string,
    readonly exitCode: number | null,
    readonly stderr: string,
    readonly stdout: string = '',
    detail?: string,
  ) {
    const tail = (stderr.trim() || stdout.trim()).split('\n').slice(-2).join(' / ');
    super(command, `${command}: ${detail ?? `exit status ${exitCode ?? 'killed'}`}${tail ? `: ${tail.slice(0, 300)}` : ''}`);
    this.name = 'CommandFailedError';
  }
}

const DEFAULT_MAX_OUTPUT = 4 * 1024 * 1024;

/** The real `Exec`, on `child_process.spawn`. */
export class ProcessExec implements Exec {
  run(file: string, args: readonly string[], opts: ExecOptions): Promise<ExecResult> {
    const label = [file, ...args].join(' ');
    const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    return new Promise<ExecResult>((resolve, reject) => {
      if (opts.signal?.aborted) {
        reject(new CommandTimeoutError(label, opts.timeoutMs, 'aborted'));
        return;
      }
      let settled = false;
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let outBytes = 0;
      const child = spawn(file, [...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...(opts.env ?? {}), LC_ALL: 'C' },
      });
      const finish = (fn: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        fn();
      };
      const kill = (): void => {
        try {
          child.kill('SIGKILL');
        } catch {
          /* already gone */
        }
      };
      const onAbort = (): void => {
        kill();
        finish(() => reject(new CommandTimeoutError(label, opts.timeoutMs, 'aborted')));
      };
      const timer = setTimeout(() => {
        kill();
        finish(() => reject(new CommandTimeoutError(label, opts.timeoutMs)));
      }, opts.timeoutMs);
      opts.signal?.addEventListener('abort', onAbort, { once: true });

      child.stdout.on('data', (chunk: Buffer) => {
        outBytes += chunk.length;
        if (outBytes > max) {
          kill();
          finish(() => reject(new CommandFailedError(label, null, '', '', `more than ${max} bytes of output`)));
          return;
        }
        out.push(chunk);
      });
      child.stderr.on('data', (chunk: Buffer) => {
        if (err.reduce((n, b) => n + b.length, 0) < 64 * 1024) err.push(chunk);
      });
      child.on('error', (e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT' || e.code === 'EACCES') finish(() => reject(new CommandNotFoundError(label, { cause: e })));
        else finish(() => reject(new CommandFailedError(label, null, e.message)));
      });
      child.on('close', (code, signal) => {
        const stdout = Buffer.concat(out).toString('utf8');
        const stderr = Buffer.concat(err).toString('utf8');
        if (code === 0) finish(() => resolve({ stdout, stderr }));
        else finish(() => reject(new CommandFailedError(label, code, stderr, stdout, signal ? `killed by ${signal}` : undefined)));
      });
    });
  }
}
