/** What every subcommand gets: process I/O and config loading with the global options applied. */
import type { Command } from 'commander';
import { loadConfig, type LoadedConfig } from '../../config/loader';

export interface CliIo {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Resolves when the process is asked to stop (SIGTERM/SIGINT); the value names the signal. */
  readonly stopSignal: () => Promise<string>;
  /** Registers a handler for reload requests (SIGHUP); optional in tests. */
  readonly onReload?: (fn: () => void) => void;
}

export interface GlobalOptions {
  configFile: string[];
  configDir: string[];
}

export interface CliContext {
  readonly io: CliIo;
  /** Loads the configuration named by the global options of `cmd`. @throws ConfigError */
  load(cmd: Command): LoadedConfig;
  /** Sets the process exit code (the last call wins); commands that succeed leave it at 0. */
  setExitCode(code: number): void;
}

/** A subcommand: adds itself to the program. One file per command in `commands/`. */
export type CommandModule = (program: Command, ctx: CliContext) => void;

export function makeContext(io: CliIo, setExitCode: (code: number) => void): CliContext {
  return {
    io,
    setExitCode,
    load: (cmd) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      return loadConfig({ files: g.configFile, dirs: g.configDir, env: io.env });
    },
  };
}
