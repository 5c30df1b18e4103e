/**
 * A parser for nova.conf-style INI files, following oslo.config's `iniparser.py`.
 *
 * It is: a line-oriented reader that turns text into sections of keys, each key holding every value
 * assigned to it in order (oslo's multi-valued options need all of them; single-valued options take
 * the last). It is not: a validator or an interpolator; `loader.ts` does both.
 *
 * Why our own and not the `ini` package: `ini` treats `;` and `#` inside a value as a comment (a
 * password `p;a#ss` becomes `p`), drops repeated keys, and turns indented continuation lines into
 * new keys. oslo.config's rules, which operators' nova.conf files rely on:
 * - comments are whole lines starting with `#` or `;` (after optional blanks are NOT allowed: an
 *   indented line continues the previous value);
 * - `key = value` or `key: value`; the value runs to the end of the line, blanks trimmed;
 * - a value wrapped in matching single or double quotes has them stripped;
 * - an indented line continues the previous value, joined with a newline;
 * - a key may repeat; every assignment is kept.
 */

/** A syntax error at one line of one file. */
export class IniParseError extends Error {
  constructor(
    message: string,
    readonly source: string,
    readonly lineno: number,
    readonly line: string,
  ) {
    super(`${source}:${lineno}: ${message}: ${JSON.stringify(line)}`);
    this.name = 'IniParseError';
  }
}

/** One assignment: where it came from, so errors can point at it. */
export interface IniValue {
  readonly value: string;
  readonly source: string;
  readonly lineno: number;
}

/** Section name -> key -> every assignment, in file order. Keys are as written (oslo keeps case). */
export type IniDocument = Map<string, Map<string, IniValue[]>>;

function stripQuotes(value: string): string {
  // oslo strips one pair of matching quotes from the first line of a value only.
  if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.endsWith(value[0])) {
    return value.slice(1, -1);
  }
  return value;
}

/**
 * Parses `text`; `source` names the file in errors.
 * @throws IniParseError for a key outside any section, a malformed or empty section header, a line
 *   with no separator, an empty key, or a continuation line with nothing to continue.
 */
export function parseIni(text: string, source = '<string>'): IniDocument {
  const doc: IniDocument = new Map();
  let section: Map<string, IniValue[]> | undefined;
  // The assignment being read; continuation lines extend it until a blank line, comment, section
  // header or the next assignment ends it.
  let pending: { key: string; lineno: number; parts: string[] } | undefined;

  const flush = (): void => {
    if (pending && section) {
      const list = section.get(pending.key) ?? [];
      list.push({ value: pending.parts.join('\n'), source, lineno: pending.lineno });
      section.set(pending.key, list);
    }
    pending = undefined;
  };

  text.split(/\r?\n/).forEach((raw, i) => {
    const lineno = i + 1;
    const line = raw.replace(/\s+$/, '');
    if (line === '') {
      flush();
      return;
    }
    if (line[0] === ' ' || line[0] === '\t') {
      if (!pending) throw new IniParseError('continuation line with no value to continue', source, lineno, raw);
      pending.parts.push(line.trimStart());
      return;
    }
    flush();
    if (line[0] === '#' || line[0] === ';') return;
    if (line[0] === '[') {
      if (!line.endsWith(']')) throw new IniParseError('section header without closing "]"', source, lineno, raw);
      const name = line.slice(1, -1);
      if (name.trim() === '') throw new IniParseError('empty section name', source, lineno, raw);
      section = doc.get(name) ?? new Map<string, IniValue[]>();
      doc.set(name, section);
      return;
    }
    if (!section) throw new IniParseError('option outside any [section]', source, lineno, raw);
    const colon = line.indexOf(':');
    const equal = line.indexOf('=');
    if (colon < 0 && equal < 0) throw new IniParseError('expected "key = value"', source, lineno, raw);
    // The first of "=" and ":" separates, so a URL value after "=" keeps its colons.
    const at = colon < 0 || (equal >= 0 && equal < colon) ? equal : colon;
    const key = line.slice(0, at).trim();
    if (key === '') throw new IniParseError('empty option name', source, lineno, raw);
    pending = { key, lineno, parts: [stripQuotes(line.slice(at + 1).trim())] };
  });
  flush();
  return doc;
}
