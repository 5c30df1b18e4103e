/**
 * Removes secrets from serialized log lines.
 *
 * Structured redaction (pino's `redact` paths) only covers fields whose path is known in advance;
 * a password also reaches logs inside strings: an error message quoting a URL, a header dump, a
 * value echoed by a library. So the agent scrubs every serialized line, in three ways:
 * - the exact secret values from the configuration (as they appear inside JSON strings);
 * - credentials in URLs (`scheme://user:password@host` keeps the user, masks the password);
 * - values of keys that name a secret (`password`, `secret`, `token`, `X-Auth-Token`, ...), at any
 *   depth, whether JSON (`"key":"value"`) or header text (`X-Auth-Token: value`).
 */

export const MASK = '***';

// Values shorter than this are not scrubbed by value (it would shred ordinary words); key- and
// URL-based scrubbing still covers them.
const MIN_SECRET_LENGTH = 3;

const URL_CREDENTIALS = /([A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s:/@"',]*):[^\s@"]*@/g;
const SECRET_KEYS =
  'password|passwd|secret|token|auth_token|x-auth-token|x-subject-token|authorization|application_credential_secret';
const JSON_SECRET_FIELD = new RegExp(`("(?:[A-Za-z0-9_-]*_)?(?:${SECRET_KEYS})"\\s*:\\s*)"(?:[^"\\\\]|\\\\.)*"`, 'gi');
// A header value runs to the end of the line or the enclosing JSON string ("Bearer <token>" included).
const HEADER_SECRET = new RegExp(`\\b(x-auth-token|x-subject-token|authorization)(\\s*[:=]\\s*)(?:\\\\.|[^\\r\\n"\\\\])+`, 'gi');

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A line scrubber that knows the current secret values; replaceable on config reload. */
export class SecretScrubber {
  private valuePattern: RegExp | undefined;

  constructor(secrets: readonly string[] = []) {
    this.setSecrets(secrets);
  }

  /** Replaces the set of exact values to mask. */
  setSecrets(secrets: readonly string[]): void {
    const forms = new Set<string>();
    for (const s of secrets) {
      if (s.length < MIN_SECRET_LENGTH) continue;
      forms.add(s);
      forms.add(JSON.stringify(s).slice(1, -1)); // as it appears inside a JSON string
      forms.add(encodeURIComponent(s)); // as it appears inside a URL
    }
    const sorted = [...forms].sort((a, b) => b.length - a.length).map(escapeRegExp);
    this.valuePattern = sorted.length > 0 ? new RegExp(sorted.join('|'), 'g') : undefined;
  }

  /** The line with every secret masked. */
  scrub(line: string): string {
    let out = this.valuePattern ? line.replace(this.valuePattern, MASK) : line;
    out = out.replace(URL_CREDENTIALS, `$1:${MASK}@`);
    out = out.replace(JSON_SECRET_FIELD, `$1"${MASK}"`);
    out = out.replace(HEADER_SECRET, `$1$2${MASK}`);
    return out;
  }
}
