/**
 * `compute-agent discover [--json] [--facts]`: what the configured driver reports for this host,
 * without talking to Placement. The root provider's uuid comes from `<state_path>/compute_id`
 * (created on first use, as the daemon would).
 *
 * Output: the provider tree, readable, or with `--json` exactly
 * `{"providers": [{uuid, name, parent_provider_uuid, inventories, traits, aggregates}]}`, parents
 * first. `--facts` prints the probe results behind the tree instead, as JSON.
 * Warnings (failed probes, clamped values) go to stderr, so stdout stays parseable.
 *
 * Exit codes: 0 reported (even if some probe failed; stderr says which); 1 the driver failed;
 * 2 bad configuration or a bad host file.
 */
import type { Command } from 'commander';
import { discoverOnce } from '../../discover';
import type { CommandModule } from '../context';
import { isConfigProblem, stderrLogger } from '../stderr-logger';
import { factNotes, treeJson, treeText } from '../render-tree';

export const discoverCommand: CommandModule = (program, ctx) => {
  program
    .command('discover')
    .description("show the provider tree the configured driver reports for this host (Placement's field names with --json)")
    .option('--json', 'print {"providers": [...]} as Placement names the fields')
    .option('--facts', 'print the host facts the probes found (JSON) instead of the tree')
    .action(async (opts: { json?: boolean; facts?: boolean }, cmd: Command) => {
      const loaded = ctx.load(cmd);
      for (const w of loaded.warnings) ctx.io.err(`warning: ${w}`);
      const { config } = loaded;
      let result;
      try {
        result = await discoverOnce({ config, logger: stderrLogger(ctx.io) });
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        for (const line of message.split('\n')) ctx.io.err(line);
        ctx.setExitCode(isConfigProblem(e) ? 2 : 1);
        return;
      }
      const host = config.DEFAULT.host;
      if (opts.facts) {
        ctx.io.out(JSON.stringify(result.facts ?? {}, (_k, v: unknown) => (v instanceof Error ? v.message : v), 2));
        return;
      }
      if (opts.json) {
        ctx.io.out(JSON.stringify(treeJson(result.tree, config), null, 2));
      } else {
        for (const line of treeText(result.tree, config)) ctx.io.out(line);
        const notes = factNotes(result.facts, result.tree, host);
        if (notes.length > 0) ctx.io.out('');
        for (const n of notes) ctx.io.out(`note: ${n}`);
      }
      if (result.moves.length > 0) ctx.io.err(`warning: ${result.moves.length} move instruction(s) on a fresh tree: a driver bug`);
    });
};
