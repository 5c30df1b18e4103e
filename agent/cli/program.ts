/**
 * The `compute-agent` command line: `run` (the daemon) and `check-config`, with oslo-style
 * `--config-file` (repeatable; later files override earlier ones) and `--config-dir`.
 *
 * Exit codes: 0 success; 1 a runtime failure (a dependency unreachable, an unexpected error);
 * 2 bad configuration or usage. Errors are printed as plain lines, never as stack traces.
 */
import { Command, CommanderError, Option } from 'commander';
import { ConfigError, displayValue, loadConfig, secretsOf, type LoadedConfig } from '../../config/loader';
import { SECTION_NAMES, type AgentConfig } from '../../config/schema';
import { placementFromConfig } from '../../tracker/placement/factory';
import { Daemon } from '../daemon';
import { createLogger } from '../logging/logger';
import { packageVersion } from './version';

export interface CliIo {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Resolves when the process is asked to stop (SIGTERM/SIGINT); the reason is the signal. */
  readonly stopSignal: () => Promise<string>;
}

interface GlobalOptions {
  configFile: string[];
  configDir: string[];
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

function load(opts: GlobalOptions, io: CliIo): LoadedConfig {
  return loadConfig({ files: opts.configFile, dirs: opts.configDir, env: io.env });
}

/** The effective configuration as INI text, secrets masked. */
export function renderEffective(config: AgentConfig, raw: (section: string, key: string) => string): string {
  const lines: string[] = [];
  for (const section of SECTION_NAMES) {
    lines.push(`[${section}]`);
    for (const key of Object.keys(config[section])) lines.push(`${key} = ${raw(section, key)}`);
    lines.push('');
  }
  return lines.join('\n');
}

function show(value: unknown): string {
  if (value === undefined) return '';
  if (Array.isArray(value)) return value.join(',');
  if (typeof value === 'object' && value !== null && 'hosts' in value) return '(transport url)';
  return String(value);
}

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

  program
    .command('check-config')
    .description('validate the configuration and exit: 0 when usable, 2 with one line per problem')
    .option('--show', 'print the effective configuration, secrets masked')
    .action((cmdOpts: { show?: boolean }, cmd: Command) => {
      const loaded = load(cmd.optsWithGlobals<GlobalOptions>(), io);
      for (const w of loaded.warnings) io.err(`warning: ${w}`);
      if (cmdOpts.show) {
        const cfg = loaded.config;
        io.out(
          renderEffective(cfg, (section, key) => {
            const v = (cfg as unknown as Record<string, Record<string, unknown>>)[section]?.[key];
            if (key === 'transport_url') return displayValue('DEFAULT', key, urlText(cfg)).slice(1, -1);
            return displayValue(section as never, key, show(v)).replace(/^"|"$/g, '');
          }),
        );
      }
      io.out(`configuration OK${loaded.files.length ? ` (${loaded.files.join(', ')})` : ' (defaults only)'}`);
    });

  program
    .command('run')
    .description('run the agent until SIGTERM or SIGINT')
    .addOption(new Option('--connect-attempts <n>', 'attempts per dependency at start-up').default('5'))
    .action(async (cmdOpts: { connectAttempts: string }, cmd: Command) => {
      const loaded = load(cmd.optsWithGlobals<GlobalOptions>(), io);
      const { config } = loaded;
      const attempts = Number(cmdOpts.connectAttempts);
      if (!Number.isInteger(attempts) || attempts < 1) {
        io.err(`--connect-attempts = ${JSON.stringify(cmdOpts.connectAttempts)}: expected an integer >= 1`);
        exitCode = 2;
        return;
      }
      const { logger } = createLogger({
        level: config.DEFAULT.debug ? 'debug' : config.DEFAULT.log_level,
        secrets: secretsOf(config),
        base: { host: config.DEFAULT.host },
      });
      for (const w of loaded.warnings) logger.warn(w);
      logger.info({ files: loaded.files, version: packageVersion() }, 'configuration loaded');
      const daemon = new Daemon({ config, logger, placement: placementFromConfig(config), startupAttempts: attempts });
      const stop = io.stopSignal();
      const started = daemon.start();
      try {
        const first = await Promise.race([started.then(() => 'started' as const), stop]);
        if (first === 'started') {
          const reason = await stop;
          await daemon.stop(reason);
        } else {
          await daemon.stop(first);
          await started.catch(() => undefined);
        }
      } catch (e) {
        logger.fatal({ reason: e instanceof Error ? e.message : String(e) }, 'compute-agent failed to start');
        await daemon.stop('start-up failed');
        throw e;
      }
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
    return exitCode;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return 0;
      return 2;
    }
    if (e instanceof ConfigError) {
      for (const p of e.problems) io.err(p.message);
      return 2;
    }
    io.err(`compute-agent: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

function urlText(config: AgentConfig): string {
  const t = config.DEFAULT.transport_url;
  const hosts = t.hosts
    .map((h) => `${h.username !== undefined ? `${h.username}${h.password !== undefined ? ':***' : ''}@` : ''}${h.host}:${h.port}`)
    .join(',');
  return `rabbit://${hosts}/${t.virtualHost === '/' ? '' : encodeURIComponent(t.virtualHost)}`;
}
