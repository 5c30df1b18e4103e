/**
 * `compute-agent check-config [--show]`: validate and exit 0, or 2 with one line per problem. A
 * configuration that names no registered `[DEFAULT] compute_driver` is a problem: `run` refuses it.
 */
import type { Command } from 'commander';
import { displayValue } from '../../../config/loader';
import { SECTION_NAMES, type AgentConfig, type SectionName } from '../../../config/schema';
import type { CommandModule } from '../context';
import { driverChoiceProblem } from '../../wiring';

function transportText(config: AgentConfig): string {
  const t = config.DEFAULT.transport_url;
  const hosts = t.hosts
    .map((h) => `${h.username !== undefined ? `${h.username}${h.password !== undefined ? ':***' : ''}@` : ''}${h.host}:${h.port}`)
    .join(',');
  return `rabbit://${hosts}/${t.virtualHost === '/' ? '' : encodeURIComponent(t.virtualHost)}`;
}

/** A parsed option value as the INI text that sets it. */
function optionText(v: unknown): string {
  if (v === undefined) return '';
  if (Array.isArray(v)) return v.join(',');
  if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'object' && 'min' in v && 'max' in v && typeof v.min === 'number' && typeof v.max === 'number') return `${v.min}-${v.max}`;
  return JSON.stringify(v);
}

function valueText(config: AgentConfig, section: SectionName, key: string): string {
  if (key === 'transport_url') return transportText(config);
  const text = optionText((config[section] as Record<string, unknown>)[key]);
  return displayValue(section, key, text).slice(1, -1);
}

/** The effective configuration as INI text, secrets masked. */
export function renderEffective(config: AgentConfig): string {
  const lines: string[] = [];
  for (const section of SECTION_NAMES) {
    lines.push(`[${section}]`);
    for (const key of Object.keys(config[section])) lines.push(`${key} = ${valueText(config, section, key)}`);
    lines.push('');
  }
  return lines.join('\n');
}

export const checkConfigCommand: CommandModule = (program, ctx) => {
  program
    .command('check-config')
    .description('validate the configuration and exit: 0 when usable, 2 with one line per problem')
    .option('--show', 'print the effective configuration, secrets masked')
    .action((opts: { show?: boolean }, cmd: Command) => {
      const loaded = ctx.load(cmd);
      for (const w of loaded.warnings) ctx.io.err(`warning: ${w}`);
      if (opts.show) ctx.io.out(renderEffective(loaded.config));
      const noDriver = driverChoiceProblem(loaded.config);
      if (noDriver) {
        ctx.io.err(noDriver);
        ctx.setExitCode(2);
        return;
      }
      ctx.io.out(`configuration OK${loaded.files.length ? ` (${loaded.files.join(', ')})` : ' (defaults only)'}`);
    });
};
