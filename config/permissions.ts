/**
 * A config file that holds a secret (a password in `transport_url`, the keystone password or
 * application credential secret) must not be readable by every user of the host. The agent refuses
 * to start on one, as sshd does with a world-readable key, unless the operator says otherwise.
 */
import { statSync } from 'node:fs';
import { parseIni } from './ini';
import { readFileSync } from 'node:fs';

/** Option names whose values are secrets, by section. */
const SECRET_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  DEFAULT: ['transport_url'],
  placement: ['password', 'application_credential_secret'],
};

function holdsSecret(file: string): string[] {
  let doc;
  try {
    doc = parseIni(readFileSync(file, 'utf8'), file);
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const [section, keys] of Object.entries(SECRET_OPTIONS)) {
    for (const key of keys) {
      const values = doc.get(section)?.get(key) ?? [];
      // A transport_url without a password in it is not a secret.
      const secret = values.some((v) => (key === 'transport_url' ? /\/\/[^/@:]*:[^@]+@/.test(v.value) : v.value !== ''));
      if (secret) found.push(`${section}.${key}`);
    }
  }
  return found;
}

/** One line per config file that holds secrets and is readable by others (mode & 0o004). */
export function insecureConfigFiles(files: readonly string[]): string[] {
  const out: string[] = [];
  for (const file of files) {
    let mode: number;
    try {
      mode = statSync(file).mode;
    } catch {
      continue;
    }
    if ((mode & 0o004) === 0) continue;
    const secrets = holdsSecret(file);
    if (secrets.length === 0) continue;
    out.push(
      `config file ${file} is readable by every user (mode ${(mode & 0o777).toString(8).padStart(4, '0')}) and holds ${secrets.join(', ')}: ` +
        `chmod o-r ${file} (install.sh makes it 0640 root:compute-agent), or pass --allow-insecure-config to run anyway`,
    );
  }
  return out;
}
