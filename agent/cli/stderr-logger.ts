/**
 * Logging for one-shot commands: warnings and errors as short text lines on stderr, so stdout
 * stays the command's result (a tree, a plan, JSON). The daemon logs JSON to stdout instead.
 */
import { pino } from 'pino';
import type { Logger } from '../../lib/logging/logger';
import { DriverInitError, DriverNotChosenError, UnknownDriverError } from '../../virt-drivers/errors';
import { HostFileError } from '../../virt-drivers/fake/host-file';
import type { CliIo } from './context';

/** Driver log lines at warn and above, as short text on stderr. */
export function stderrLogger(io: CliIo): Logger {
  return pino(
    { level: 'warn', base: null, timestamp: false },
    {
      write: (line: string) => {
        try {
          const { msg, level, probe, err, reason } = JSON.parse(line) as { msg?: string; level?: number; probe?: string; err?: string; reason?: string };
          const why = err ?? reason;
          io.err(`${(level ?? 0) >= 50 ? 'error' : 'warning'}: ${probe ? `${probe}: ` : ''}${msg ?? ''}${why ? `: ${why}` : ''}`);
        } catch {
          io.err(line.trim());
        }
      },
    },
  );
}

/** Errors that are the operator's input (exit 2), not a failure of the host (exit 1). */
export function isConfigProblem(e: unknown): boolean {
  return e instanceof HostFileError || e instanceof UnknownDriverError || e instanceof DriverNotChosenError || (e instanceof DriverInitError && e.cause instanceof HostFileError);
}

