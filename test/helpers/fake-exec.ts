/**
 * A scripted `Exec` for tests: each command line maps to a recorded answer, an exit status,
 * "not installed", a delay, or a hang.
 *
 * It is: a faithful stand-in for `ProcessExec`'s contract (a hang rejects with
 * `CommandTimeoutError` when `timeoutMs` passes or the signal aborts, exactly like a killed child).
 * It is not: a process runner; nothing is executed. Unscripted commands behave as "not installed".
 */
import {
  CommandFailedError,
  CommandNotFoundError,
  CommandTimeoutError,
  type Exec,
  type ExecOptions,
  type ExecResult,
} from '../../virt-drivers/host/exec';

/** What a scripted command does. */
export type FakeAnswer =
  | { readonly stdout: string; readonly stderr?: string; readonly delayMs?: number }
  | { readonly exitCode: number; readonly stdout?: string; readonly stderr?: string; readonly delayMs?: number }
  | { readonly notFound: true }
  | { readonly hang: true };

/** One call the fake received. */
export interface FakeCall {
  readonly file: string;
  readonly args: readonly string[];
  readonly timeoutMs: number;
  /** How it ended: `ok`, `failed`, `not-found` or `timeout`. */
  outcome?: 'ok' | 'failed' | 'not-found' | 'timeout';
}

/** The key a command is scripted under: file and arguments joined by single spaces. */
function commandKey(file: string, args: readonly string[]): string {
  return [file, ...args].join(' ');
}

export class FakeExec implements Exec {
  readonly calls: FakeCall[] = [];
  private readonly answers = new Map<string, FakeAnswer>();

  constructor(script: Readonly<Record<string, FakeAnswer>> = {}) {
    for (const [k, v] of Object.entries(script)) this.answers.set(k, v);
  }

  /** Scripts (or re-scripts) one command line. */
  set(commandLine: string, answer: FakeAnswer): this {
    this.answers.set(commandLine, answer);
    return this;
  }

  run(file: string, args: readonly string[], opts: ExecOptions): Promise<ExecResult> {
    const key = commandKey(file, args);
    const call: FakeCall = { file, args: [...args], timeoutMs: opts.timeoutMs };
    this.calls.push(call);
    const answer = this.answers.get(key) ?? { notFound: true };
    return new Promise<ExecResult>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (outcome: NonNullable<FakeCall['outcome']>, fn: () => void): void => {
        if (call.outcome) return;
        call.outcome = outcome;
        if (timer) clearTimeout(timer);
        clearTimeout(deadline);
        opts.signal?.removeEventListener('abort', onAbort);
        fn();
      };
      const onAbort = (): void => done('timeout', () => reject(new CommandTimeoutError(key, opts.timeoutMs, 'aborted')));
      const deadline = setTimeout(() => done('timeout', () => reject(new CommandTimeoutError(key, opts.timeoutMs))), opts.timeoutMs);
      if (opts.signal?.aborted) {
        onAbort();
        return;
      }
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      if ('hang' in answer) return;
      if ('notFound' in answer) {
        done('not-found', () => reject(new CommandNotFoundError(key)));
        return;
      }
      const answerNow = (): void => {
        if ('exitCode' in answer && answer.exitCode !== 0) {
          done('failed', () => reject(new CommandFailedError(key, answer.exitCode, answer.stderr ?? '', answer.stdout ?? '')));
        } else {
          done('ok', () => resolve({ stdout: answer.stdout ?? '', stderr: answer.stderr ?? '' }));
        }
      };
      if (answer.delayMs) timer = setTimeout(answerNow, answer.delayMs);
      else answerNow();
    });
  }
}
