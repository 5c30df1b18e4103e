/**
 * Renders `compute-agent.conf.example` from the option table in `schema.ts`, so the example
 * documents every option with its default and cannot drift (a unit test compares the two).
 * Regenerate with `npm run gen:config-example`.
 */
import { configSchema, SECTION_NAMES } from './schema';
import { optionMeta } from './types';
import type { z } from 'zod';

function wrap(text: string, width = 96): string[] {
  const out: string[] = [];
  let line = '#';
  for (const word of text.split(/\s+/)) {
    if (line.length + word.length + 1 > width && line !== '#') {
      out.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  out.push(line);
  return out;
}

export function renderExample(): string {
  const lines = [
    '# compute-agent configuration, nova.conf style (oslo.config rules): a value runs to the end of',
    '# its line (; and # inside a value are part of it), comments are whole lines, an indented line',
    '# continues the previous value. Later --config-file files override earlier ones; environment',
    '# variables COMPUTE_AGENT__<SECTION>__<KEY> override files. Every option is shown commented out',
    '# with its default.',
    '',
  ];
  for (const section of SECTION_NAMES) {
    lines.push(`[${section}]`, '');
    const shape = (configSchema.shape[section] as unknown as { shape: Record<string, z.ZodType> }).shape;
    for (const [key, schema] of Object.entries(shape)) {
      const meta = optionMeta(schema);
      if (!meta) throw new Error(`option ${section}.${key} has no metadata`);
      lines.push(...wrap(meta.help));
      lines.push(`# Expected: ${meta.expected}.${meta.secret ? ' Secret: masked in logs and errors.' : ''}`);
      const def = typeof meta.default === 'function' ? (meta.defaultShown ?? '') : (meta.default ?? '');
      lines.push(`#${key} = ${def}`, '');
    }
  }
  return lines.join('\n');
}

if (require.main === module) process.stdout.write(renderExample());
