/**
 * The agent's logger: pino, one JSON object per line on stdout, which journald collects.
 *
 * Every line passes through a `SecretScrubber` before it is written, so no code path (an error
 * message, a library's debug output, a config dump) can leak a password or token. Writes are
 * synchronous: a daemon that crashes must not lose the lines explaining why, and the agent's log
 * volume is far below what a synchronous write to a pipe can carry.
 */
import { pino, type Logger as PinoLogger, type LevelWithSilent } from 'pino';
import { SecretScrubber } from './scrub';

export type Logger = PinoLogger;
export type LogLevel = LevelWithSilent;

/** Where serialized lines go; stdout by default, an array in tests. */
export interface LineSink {
  write(line: string): void;
}

export interface LoggerOptions {
  readonly level?: LogLevel;
  readonly secrets?: readonly string[];
  readonly sink?: LineSink;
  /** Fields on every line (host, service). */
  readonly base?: Record<string, unknown>;
}

export interface AgentLogger {
  readonly logger: Logger;
  readonly scrubber: SecretScrubber;
}

const stdoutSink: LineSink = {
  write(line: string): void {
    process.stdout.write(line);
  },
};

/** Builds the logger; `scrubber.setSecrets` updates the masked values after a config reload. */
export function createLogger(opts: LoggerOptions = {}): AgentLogger {
  const scrubber = new SecretScrubber(opts.secrets ?? []);
  const sink = opts.sink ?? stdoutSink;
  const logger = pino(
    {
      level: opts.level ?? 'info',
      base: { service: 'compute-agent', ...(opts.base ?? {}) },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // Structured redaction for the common shapes; the scrubber catches the rest.
      redact: {
        paths: [
          'password',
          '*.password',
          'headers["x-auth-token"]',
          '*.headers["x-auth-token"]',
          'config.placement.password',
          'config.placement.application_credential_secret',
        ],
        censor: '***',
      },
    },
    { write: (line: string) => sink.write(scrubber.scrub(line)) },
  );
  return { logger, scrubber };
}

/** A logger that writes nothing, for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
