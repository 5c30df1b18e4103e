import { IniParseError, parseIni } from '../../../config/ini';

const values = (text: string, section: string, key: string): string[] | undefined =>
  parseIni(text).get(section)?.get(key)?.map((v) => v.value);

describe('parseIni (oslo.config semantics)', () => {
  test('a value runs to the end of its line: ; and # belong to it', () => {
    expect(values('[placement]\npassword = p;a#ss word\n', 'placement', 'password')).toEqual(['p;a#ss word']);
  });

  test('comments are whole lines only', () => {
    const doc = parseIni('# a comment\n; another\n[DEFAULT]\n#host = commented\nhost = h1\n');
    expect(doc.get('DEFAULT')?.get('host')?.map((v) => v.value)).toEqual(['h1']);
    expect(doc.get('DEFAULT')?.has('#host')).toBe(false);
  });

  test('indented lines continue the previous value, joined by newlines', () => {
    expect(values('[s]\nk = first\n  second\n\tthird\nother = x\n', 's', 'k')).toEqual(['first\nsecond\nthird']);
  });

  test('a blank line ends a continued value', () => {
    expect(() => parseIni('[s]\nk = v\n\n  orphan\n')).toThrow(IniParseError);
  });

  test('repeated keys keep every assignment in order', () => {
    expect(values('[s]\nk = 1\nk = 2\n[t]\n[s]\nk = 3\n', 's', 'k')).toEqual(['1', '2', '3']);
  });

  test('":" separates as well as "=", whichever comes first', () => {
    const doc = parseIni('[s]\na: 1\nurl = rabbit://u:p@h:5672/\nb : x=y\n');
    expect(doc.get('s')?.get('a')?.[0]?.value).toBe('1');
    expect(doc.get('s')?.get('url')?.[0]?.value).toBe('rabbit://u:p@h:5672/');
    expect(doc.get('s')?.get('b')?.[0]?.value).toBe('x=y');
  });

  test('one pair of matching quotes is stripped', () => {
    expect(values('[s]\na = "quoted; value"\nb = \'x\'\nc = "unbalanced\n', 's', 'a')).toEqual(['quoted; value']);
    expect(values('[s]\nb = \'x\'\n', 's', 'b')).toEqual(['x']);
    expect(values('[s]\nc = "unbalanced\n', 's', 'c')).toEqual(['"unbalanced']);
  });

  test('empty values are kept as empty strings', () => {
    expect(values('[s]\nk =\n', 's', 'k')).toEqual(['']);
  });

  test('CRLF line endings', () => {
    expect(values('[s]\r\nk = v\r\n', 's', 'k')).toEqual(['v']);
  });

  test('line numbers are recorded for each assignment', () => {
    const v = parseIni('[s]\n\nk = v\n', 'f.conf').get('s')?.get('k')?.[0];
    expect(v).toEqual({ value: 'v', source: 'f.conf', lineno: 3 });
  });

  test.each([
    ['k = v\n', 'option outside any [section]', 1],
    ['[s\nk = v\n', 'section header without closing "]"', 1],
    ['[]\n', 'empty section name', 1],
    ['[s]\njust words\n', 'expected "key = value"', 2],
    ['[s]\n= v\n', 'empty option name', 2],
    ['  indented first\n', 'continuation line with no value to continue', 1],
  ])('syntax error %j', (text, message, lineno) => {
    let err: unknown;
    try {
      parseIni(text, 'x.conf');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(IniParseError);
    expect((err as IniParseError).lineno).toBe(lineno);
    expect((err as IniParseError).message).toContain(message);
  });
});
