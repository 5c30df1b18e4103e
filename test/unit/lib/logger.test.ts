import { createLogger } from '../../../lib/logging/logger';
import { SecretScrubber } from '../../../lib/logging/scrub';
import { loadConfig, secretsOf } from '../../../config/loader';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

function capture(secrets: string[] = []): { lines: string[]; log: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const log = createLogger({ level: 'trace', secrets, sink: { write: (l) => lines.push(l) } });
  return { lines, log };
}

describe('logger redaction (real pino output)', () => {
  const PASSWORD = 'p;a#ss word';
  const RABBIT_PW = 'r@bbit/Secret';

  test('secrets from a real config never appear in any line, whatever the path they take', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ca-log-'));
    const f = join(dir, 'a.conf');
    writeFileSync(
      f,
      `[DEFAULT]\ntransport_url = rabbit://nova:${encodeURIComponent(RABBIT_PW)}@mq:5672/\n` +
        `[placement]\nauth_type = v3applicationcredential\nauth_url = https://ks/v3\npassword = ${PASSWORD}\n` +
        'application_credential_id = abc\napplication_credential_secret = appcred-secret-123\n',
    );
    const { config } = loadConfig({ files: [f], env: {} });
    const { lines, log } = capture(secretsOf(config));
    const l = log.logger;
    l.info({ config }, 'effective configuration');
    l.info(`connecting to rabbit://nova:${encodeURIComponent(RABBIT_PW)}@mq:5672/`);
    l.warn({ err: new Error(`keystone refused password ${PASSWORD}`) }, 'auth failed');
    l.debug({ headers: { 'X-Auth-Token': 'gAAAAAtoken', 'content-type': 'application/json' } }, 'request');
    l.debug({ request: { headers: { 'x-auth-token': 'gAAAAAtoken2' } } }, 'nested request');
    l.info('raw header dump: X-Auth-Token: gAAAAAtoken3\nAccept: */*');
    l.info({ body: { auth: { identity: { password: { user: { password: PASSWORD } } } } } }, 'keystone body');
    l.info({ application_credential_secret: 'appcred-secret-123' }, 'field');
    l.error({ detail: `value was ${JSON.stringify(PASSWORD)}` }, 'quoted');
    const all = lines.join('');
    expect(lines).toHaveLength(9);
    for (const secret of [PASSWORD, RABBIT_PW, encodeURIComponent(RABBIT_PW), 'gAAAAAtoken', 'appcred-secret-123']) {
      expect(all).not.toContain(secret);
    }
    // What is not secret survives, so the lines stay useful.
    expect(all).toContain('rabbit://nova:***@mq:5672/');
    expect(all).toContain('application/json');
    expect(all).toContain('keystone refused password ***');
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  test('lines are JSON with level label, time, service and message', () => {
    const { lines, log } = capture();
    log.logger.info({ n: 1 }, 'hello');
    const rec = JSON.parse(lines[0] ?? '') as Record<string, unknown>;
    expect(rec).toMatchObject({ level: 'info', service: 'compute-agent', n: 1, msg: 'hello' });
    expect(typeof rec.time).toBe('string');
  });

  test('the level from config filters lines', () => {
    const lines: string[] = [];
    const { logger } = createLogger({ level: 'warn', sink: { write: (l) => lines.push(l) } });
    logger.info('dropped');
    logger.warn('kept');
    expect(lines).toHaveLength(1);
  });

  test('setSecrets replaces the masked values (config reload)', () => {
    const lines: string[] = [];
    const { logger, scrubber } = createLogger({ secrets: ['old-secret'], sink: { write: (l) => lines.push(l) } });
    scrubber.setSecrets(['new-secret']);
    logger.info('old-secret new-secret');
    expect(lines[0]).toContain('old-secret');
    expect(lines[0]).not.toContain('new-secret');
  });
});

describe('SecretScrubber', () => {
  const s = new SecretScrubber(['hunter22', 'quote"back\\slash']);
  test.each([
    ['plain value', 'pw is hunter22 ok', 'pw is *** ok'],
    ['JSON-escaped value', JSON.stringify({ m: 'quote"back\\slash' }), '{"m":"***"}'],
    ['URL credentials, several hosts', 'amqp://u:x@h1,v:y@h2', 'amqp://u:***@h1,v:***@h2'],
    ['password key at any depth', '{"a":{"db_password":"zz"}}', '{"a":{"db_password":"***"}}'],
    ['token key', '{"token":"abc","other":"keep"}', '{"token":"***","other":"keep"}'],
    ['authorization header text', 'Authorization: Bearer abc', 'Authorization: ***'],
    ['header inside a JSON string, escaped newline', '{"m":"X-Auth-Token: tok\\nAccept: x"}', '{"m":"X-Auth-Token: ***"}'],
  ])('%s', (_name, input, expected) => {
    expect(s.scrub(input)).toBe(expected);
  });
});

describe('SecretScrubber: a secret that is an ordinary word is masked where it is a credential, not as a word', () => {
  // The dev broker's password, and a Keystone password made only of letters but not a word.
  const s = new SecretScrubber(['guest', 'XkqPzWmvRt']);
  test.each([
    ['the word in a message', '{"msg":"guest OS of the guest booted"}', '{"msg":"guest OS of the guest booted"}'],
    ['the word as a user name', '{"user":"guest","vhost":"/"}', '{"user":"guest","vhost":"/"}'],
    ['URL userinfo', '{"msg":"connecting to rabbit://guest:guest@mq:5672/ as guest"}', '{"msg":"connecting to rabbit://guest:***@mq:5672/ as guest"}'],
    ['every host of an oslo URL, IPv6 included', 'rabbit://guest:guest@10.0.0.1:5672,guest:guest@[fd00::2]:5672,guest:guest@mq3/nova', 'rabbit://guest:***@10.0.0.1:5672,guest:***@[fd00::2]:5672,guest:***@mq3/nova'],
    ['password= in a query string', 'GET /auth?user=guest&password=guest&x=1', 'GET /auth?user=guest&password=***&x=1'],
    ['key: value and key=value pairs in text', '{"msg":"login failed (password: guest, auth_token=guest; user guest)"}', '{"msg":"login failed (password: ***, auth_token=***; user guest)"}'],
    ['JSON fields named as secrets', '{"password":"guest","rabbit_password":"guest","name":"guest"}', '{"password":"***","rabbit_password":"***","name":"guest"}'],
    ['X-Auth-Token header', 'X-Auth-Token: guest', 'X-Auth-Token: ***'],
    ['a letters-only secret in no word case is masked anywhere', 'unexpected XkqPzWmvRt in reply', 'unexpected *** in reply'],
  ])('%s', (_name, input, expected) => {
    expect(s.scrub(input)).toBe(expected);
  });
});

test('with the dev stack\'s guest:guest broker, the broker password is masked and the word "guest" survives (real pino output)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ca-log-'));
  const f = join(dir, 'a.conf');
  writeFileSync(f, '[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672,guest:guest@127.0.0.2:5672/\n');
  const { config } = loadConfig({ files: [f], env: {} });
  expect(secretsOf(config)).toContain('guest');
  const { lines, log } = capture(secretsOf(config));
  log.logger.info({ config }, 'effective configuration');
  log.logger.warn({ err: new Error('connect to rabbit://guest:guest@127.0.0.1:5672/ refused') }, 'broker down');
  log.logger.info({ instance: 'i-1' }, 'guest agent answered; guest OS is Debian');
  const all = lines.join('');
  expect(all).not.toMatch(/guest:guest|"password":"guest"/);
  expect(all).toContain('rabbit://guest:***@127.0.0.1:5672/ refused');
  expect(all).toContain('"password":"***"');
  expect(all).toContain('"username":"guest"');
  expect(all).toContain('guest agent answered; guest OS is Debian');
});

test('scrubbing is linear in the line length: 100 kB hostile lines take milliseconds, not seconds', () => {
  const s = new SecretScrubber(['guest', 'hunter22']);
  const hostile = [
    'x'.repeat(100_000), // a run of scheme characters with no "://"
    JSON.stringify({ m: 'a-'.repeat(50_000) }), // a word boundary every other character
    'a://u:'.repeat(16_000), // URL starts whose credentials never end in "@"
    '@h,u:'.repeat(20_000),
    'password='.repeat(11_000),
  ];
  for (const line of hostile) {
    const started = process.hrtime.bigint();
    s.scrub(line);
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(1500); // quadratic patterns took 6-40 s
  }
});
