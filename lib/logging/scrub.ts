/**
 * Removes secrets from serialized log lines.
 *
 * Structured redaction (pino's `redact` paths) only covers fields whose path is known in advance;
 * a password also reaches logs inside strings: an error message quoting a URL, a header dump, a
 * value echoed by a library. So the agent scrubs every serialized line where a secret stands as a
 * credential:
 * - credentials in URLs (`scheme://user:password@host`, every host of a multi-host URL such as
 *   oslo's `rabbit://u:p@h1,u:p@h2/`): keeps the user, masks the password;
 * - values of keys that name a secret (`password`, `secret`, `token`, `X-Auth-Token`, ...), at any
 *   depth, whether JSON (`"db_password":"value"`), a `key=value` / `key: value` pair in text or a
 *   query string, or header text (`X-Auth-Token: value`, `Authorization: Bearer value`);
 * - the exact secret values from the configuration (as they appear inside JSON strings and URLs),
 *   wherever they appear, unless the value is an ordinary word.
 *
 * Contract on that last point: a configured secret made only of letters in a word's case
 * (`guest`, `Guest`, `GUEST`: the dev broker's password) is also an English word, and masking it
 * everywhere would blank every "guest" a log line speaks of (guest OS, guest agent). Such a value
 * is masked only in the credential positions above. Any other secret (a digit, a symbol, a space,
 * mixed case: what a real password has) cannot be mistaken for text and is masked wherever it occurs.
 */

export const MASK = '***';

// Values shorter than this are not scrubbed by value (it would shred ordinary words); key- and
// URL-based scrubbing still covers them.
const MIN_SECRET_LENGTH = 3;

/** A value that reads as a word: letters only, in lower, upper or capitalised case. */
const ORDINARY_WORD = /^(?:[a-z]+|[A-Z][a-z]+|[A-Z]+)$/;

// Every pattern is linear in the line's length, whatever the line holds (a log line may quote a
// hostile body): a pattern starts only where a run of its leading characters starts (the
// lookbehinds), and the parts that scan forward are bounded.
// The first host's credentials, right after the scheme.
const URL_CREDENTIALS = /(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,31}:\/\/[^\s:/@"',]{0,256}):[^\s@"]{0,512}@/g;
// Each further host's credentials in a multi-host URL: `,user:password@` right after `@host[:port]`.
const URL_MORE_CREDENTIALS = /(?<=@[A-Za-z0-9_.[\]:-]{1,261},)([^\s:/@"',]{0,256}):[^\s@"]{0,512}@/g;
const SECRET_KEYS =
  'password|passwd|new_pass|secret|token|auth_token|x-auth-token|x-subject-token|authorization|application_credential_secret';
// A key may carry a prefix (`db_password`, `rabbit-token`), up to 64 characters.
const KEY = `(?:[A-Za-z0-9_-]{0,63}[_-])?(?:${SECRET_KEYS})`;
const JSON_SECRET_FIELD = new RegExp(`("${KEY}"\\s*:\\s*)"(?:[^"\\\\]|\\\\.)*"`, 'gi');
// `password=value`, `token: value` in text or a query string; the value runs to a separator.
const TEXT_SECRET_PAIR = new RegExp(`((?<![A-Za-z0-9_-])${KEY}\\s{0,8}[=:]\\s{0,8})(?!\\*\\*\\*)[^\\s&;,"'\\\\]+`, 'gi');
// A header value runs to the end of the line or the enclosing JSON string ("Bearer <token>" included).
const HEADER_SECRET = new RegExp(`(?<![A-Za-z0-9_-])(x-auth-token|x-subject-token|authorization)(\\s*[:=]\\s*)(?:\\\\.|[^\\r\\n"\\\\])+`, 'gi');

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A line scrubber that knows the current secret values; replaceable on config reload. */
export class SecretScrubber {
  private valuePattern: RegExp | undefined;

  constructor(secrets: readonly string[] = []) {
    this.setSecrets(secrets);
  }

  /** Replaces the set of exact values to mask (ordinary words among them: see the module comment). */
  setSecrets(secrets: readonly string[]): void {
    const forms = new Set<string>();
    for (const s of secrets) {
      if (s.length < MIN_SECRET_LENGTH || ORDINARY_WORD.test(s)) continue;
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
    out = out.replace(URL_MORE_CREDENTIALS, `$1:${MASK}@`);
    out = out.replace(JSON_SECRET_FIELD, `$1"${MASK}"`);
    out = out.replace(HEADER_SECRET, `$1$2${MASK}`);
    out = out.replace(TEXT_SECRET_PAIR, `$1${MASK}`);
    return out;
  }
}
