/**
 * The `compute-agent` command line, with oslo-style `--config-file` (repeatable; later files
 * override earlier ones) and `--config-dir`. Subcommands live one per file in `commands/`.
 *
 * Exit codes: 0 success; 1 a runtime failure (a dependency unreachable, an unexpected error);
 * 2 bad configuration or usage. Errors are printed as plain lines, never as stack traces.
 */
import { Command, CommanderError, Option } from 'commander';
import { ConfigError } from '../../config/loader';
import { COMMANDS } from './commands';
import { makeContext, type CliIo } from './context';
import { packageVersion } from './version';

export type { CliIo } from './context';

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** Runs the CLI and resolves to the exit code. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let exitCode = 0;
  const program = new Command()
    .name('compute-agent')
    .description('Per-host compute agent: host inventory to OpenStack Placement, RPC from the control plane.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .addOption(new Option('--config-file <path>', 'config file; repeatable, later files override earlier ones').default([]).argParser(collect))
    .addOption(new Option('--config-dir <dir>', 'directory of *.conf files read after --config-file; repeatable').default([]).argParser(collect))
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.replace(/\n$/, '')), writeErr: (s) => io.err(s.replace(/\n$/, '')) });
  const ctx = makeContext(io, (code) => {
    exitCode = code;
  });
  for (const register of COMMANDS) register(program, ctx);
  program.commands.forEach((c) => c.exitOverride());

  try {
    await program.parseAsync(argv, { from: 'user' });
    return exitCode;
  } catch (e) {
    if (e instanceof CommanderError) {
      return e.exitCode === 0 ? 0 : 2;
    }
    if (e instanceof ConfigError) {
      for (const p of e.problems) io.err(p.message);
      return 2;
    }
    io.err(`compute-agent: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}
