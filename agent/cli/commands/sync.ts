/**
 * `compute-agent sync --once`: one audit as the daemon runs it (discover through the driver, sync
 * Placement, compare allocations with instances), then exit: 0 when it completed, 1 with the
 * reason when it did not, 2 for bad configuration.
 *
 * `compute-agent plan [--json]`: the exact Placement writes the next sync would make (method,
 * path, body), without making them. Reads are made; nothing is written, not even the ownership
 * record.
 */
import type { Command } from 'commander';
import type { AgentConfig } from '../../../config/schema';
import { placementFromConfig } from '../../../tracker/placement/factory';
import { createDriver, createTracker } from '../../wiring';
import type { CliContext, CommandModule } from '../context';
import { isConfigProblem, stderrLogger } from '../stderr-logger';

async function withTracker<T>(ctx: CliContext, cmd: Command, fn: (parts: Awaited<ReturnType<typeof createTracker>>, config: AgentConfig) => Promise<T>): Promise<T | undefined> {
  const loaded = ctx.load(cmd);
  for (const w of loaded.warnings) ctx.io.err(`warning: ${w}`);
  const { config } = loaded;
  const logger = stderrLogger(ctx.io);
  const api = placementFromConfig(config);
  try {
    // The driver first: a configuration naming none fails before Placement is asked anything.
    const driver = createDriver({ config, logger });
    await api.assertUsable();
    await driver.init(config.DEFAULT.host);
    try {
      return await fn(await createTracker(config, api, driver, logger), config);
    } finally {
      await driver.cleanupHost(config.DEFAULT.host);
    }
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    for (const line of message.split('\n')) ctx.io.err(`compute-agent: ${line}`);
    ctx.setExitCode(isConfigProblem(e) ? 2 : 1);
    return undefined;
  }
}

export const syncCommand: CommandModule = (program, ctx) => {
  program
    .command('sync')
    .description('run one audit (discover, sync Placement, check allocations) and exit')
    .requiredOption('--once', 'run once and exit (the daemon runs it on a schedule)')
    .option('--json', 'print the result as JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      await withTracker(ctx, cmd, async ({ auditor, rootUuid }, config) => {
        const r = await auditor.run();
        const summary = {
          host: config.DEFAULT.host,
          root_provider_uuid: rootUuid,
          created: r.sync.created.length,
          deleted: r.sync.deleted.length,
          reshaped: r.sync.reshaped,
          placement_reads: r.sync.stats.reads,
          placement_writes: r.sync.stats.writes,
          conflicts: r.sync.stats.conflicts,
          problems: r.sync.problems.map((p) => p.message),
          orphaned: r.orphaned,
          missing: r.missing,
          healed: r.healed,
        };
        if (opts.json) ctx.io.out(JSON.stringify(summary, null, 2));
        else {
          ctx.io.out(
            `synced ${config.DEFAULT.host} (${rootUuid}): ${summary.created} created, ${summary.deleted} deleted, ` +
              `${summary.placement_writes} writes, ${summary.placement_reads} reads${summary.reshaped ? ', reshaped' : ''}; ` +
              `${r.orphaned.length} orphaned, ${r.missing.length} missing allocations${r.healed.length ? `, ${r.healed.length} healed` : ''}`,
          );
          for (const p of summary.problems) ctx.io.out(`  problem: ${p}`);
        }
      });
    });

  program
    .command('plan')
    .description('show the Placement writes the next sync would make, without making them')
    .option('--json', 'print the writes as JSON')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      await withTracker(ctx, cmd, async ({ tracker }) => {
        const r = await tracker.updateFromDriver({ dryRun: true });
        if (opts.json) {
          ctx.io.out(JSON.stringify({ writes: r.writes, problems: r.problems }, null, 2));
          return;
        }
        if (r.writes.length === 0) ctx.io.out('nothing to write: Placement matches this host');
        for (const w of r.writes) ctx.io.out(`${w.method} ${w.path}${w.body === undefined ? '' : ` ${JSON.stringify(w.body)}`}`);
        for (const p of r.problems) ctx.io.out(`problem: ${p.message}`);
      });
    });
};

