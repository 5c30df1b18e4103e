import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderExample } from '../../../config/example';
import { configSchema, SECTION_NAMES } from '../../../config/schema';
import { parseIni } from '../../../config/ini';

describe('compute-agent.conf.example', () => {
  const committed = readFileSync(join(__dirname, '..', '..', '..', 'config', 'compute-agent.conf.example'), 'utf8');

  test('matches the option table (run `npm run gen:config-example` after changing options)', () => {
    expect(committed).toBe(renderExample());
  });

  test('documents every option of every section with its default', () => {
    // Uncomment every "#key = value" line and parse: every option must be there.
    const uncommented = committed.replace(/^#([a-z_]+ = )/gm, '$1');
    const doc = parseIni(uncommented);
    for (const section of SECTION_NAMES) {
      const keys = Object.keys((configSchema.shape[section] as unknown as { shape: object }).shape);
      for (const key of keys) expect(doc.get(section)?.has(key)).toBe(true);
    }
  });
});
