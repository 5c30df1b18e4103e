/** `compute-agent run`: the daemon, until SIGTERM or SIGINT. */
import { Option, type Command } from 'commander';
import { secretsOf } from '../../../config/loader';
import { insecureConfigFiles } from '../../../config/permissions';
import { placementFromConfig } from '../../../tracker/placement/factory';
import { Daemon } from '../../daemon';
import { driverChoiceProblem } from '../../wiring';
import { AgentMetrics } from '../../ops/metrics';
import { createLogger } from '../../../lib/logging/logger';
import type { CommandModule } from '../context';
import { packageVersion } from '../version';

export const runCommand: CommandModule = (program, ctx) => {
  program
    .command('run')
    .description('run the agent until SIGTERM or SIGINT')
    .addOption(new Option('--connect-attempts <n>', 'attempts per dependency at start-up').default('5'))
    .option('--allow-insecure-config', 'start even when a config file holding secrets is readable by every user')
    .action(async (opts: { connectAttempts: string; allowInsecureConfig?: boolean }, cmd: Command) => {
      const loaded = ctx.load(cmd);
      const { config } = loaded;
      const insecure = insecureConfigFiles(loaded.files);
      const noDriver = driverChoiceProblem(config);
      const refusals = [...(opts.allowInsecureConfig ? [] : insecure), ...(noDriver ? [noDriver] : [])];
      if (refusals.length > 0) {
        for (const line of refusals) ctx.io.err(line);
        ctx.setExitCode(2);
        return;
      }
      const attempts = Number(opts.connectAttempts);
      if (!Number.isInteger(attempts) || attempts < 1) {
        ctx.io.err(`--connect-attempts = ${JSON.stringify(opts.connectAttempts)}: expected an integer >= 1`);
        ctx.setExitCode(2);
        return;
      }
      const { logger, scrubber } = createLogger({
        level: config.DEFAULT.debug ? 'debug' : config.DEFAULT.log_level,
        secrets: secretsOf(config),
        base: { host: config.DEFAULT.host },
      });
      for (const w of loaded.warnings) logger.warn(w);
      for (const line of insecure) logger.warn(line);
      logger.info({ files: loaded.files, version: packageVersion() }, 'configuration loaded');
      const metrics = new AgentMetrics();
      const observer = { request: metrics.placementRequest.bind(metrics), conflict: metrics.conflict.bind(metrics) };
      const daemon = new Daemon({ config, logger, placement: placementFromConfig(config, undefined, observer), startupAttempts: attempts, env: ctx.io.env, metrics });
      ctx.io.onReload?.(() => {
        try {
          const next = ctx.load(cmd).config;
          scrubber.setSecrets(secretsOf(next));
          logger.level = next.DEFAULT.debug ? 'debug' : next.DEFAULT.log_level;
          daemon.reload(next);
        } catch (e) {
          // A bad file on reload keeps the running configuration: say why, in one line per problem.
          logger.error({ reason: e instanceof Error ? e.message : String(e) }, 'configuration reload refused; keeping the running configuration');
        }
      });
      const stop = ctx.io.stopSignal();
      const started = daemon.start();
      try {
        const first = await Promise.race([started.then(() => 'started' as const), stop]);
        if (first === 'started') {
          await daemon.stop(await stop);
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
};
