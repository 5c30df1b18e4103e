import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, secretsOf } from '../../../config/loader';
import { configProblems } from '../../helpers/config';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ca-config-'));
});

function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

const problems = configProblems;

const NO_ENV = {};

describe('loadConfig', () => {
  test('defaults only: every option has a usable value', () => {
    const { config, files } = loadConfig({ files: [], env: NO_ENV, defaultFile: join(dir, 'absent.conf') });
    expect(files).toEqual([]);
    expect(config.DEFAULT.state_path).toBe('/var/lib/compute-agent');
    expect(config.DEFAULT.instances_path).toBe('/var/lib/compute-agent/instances');
    expect(config.DEFAULT.control_exchange).toBe('nova');
    expect(config.DEFAULT.cpu_allocation_ratio).toBeUndefined();
    expect(config.DEFAULT.initial_cpu_allocation_ratio).toBe(4);
    expect(config.DEFAULT.transport_url.hosts).toEqual([{ host: '127.0.0.1', port: 5672, username: 'guest', password: 'guest' }]);
    expect(config.placement.auth_type).toBe('noauth');
    expect(config.placement.valid_interfaces).toEqual(['internal', 'public']);
    expect(config.compute.resource_provider_association_refresh).toBe(300);
    expect(config.oslo_messaging_rabbit.heartbeat_timeout_threshold).toBe(60);
  });

  test('the default file is read when no --config-file is given', () => {
    const def = file('default.conf', '[DEFAULT]\nhost = from-default\n');
    expect(loadConfig({ env: NO_ENV, defaultFile: def }).config.DEFAULT.host).toBe('from-default');
  });

  test('a password with ; # and a space is read exactly', () => {
    const f = file('a.conf', '[placement]\npassword = p;a#ss word\n');
    const { config } = loadConfig({ files: [f], env: NO_ENV });
    expect(config.placement.password).toBe('p;a#ss word');
    expect(secretsOf(config)).toContain('p;a#ss word');
  });

  test('later files override earlier ones, key by key', () => {
    const a = file('a.conf', '[DEFAULT]\nhost = a\nreserved_host_cpus = 2\n');
    const b = file('b.conf', '[DEFAULT]\nhost = b\n');
    const { config, files } = loadConfig({ files: [a, b], env: NO_ENV });
    expect(files).toEqual([a, b]);
    expect(config.DEFAULT.host).toBe('b');
    expect(config.DEFAULT.reserved_host_cpus).toBe(2);
  });

  test('within one file the last assignment of a single-valued option wins', () => {
    const a = file('a.conf', '[DEFAULT]\nhost = first\nhost = second\n');
    expect(loadConfig({ files: [a], env: NO_ENV }).config.DEFAULT.host).toBe('second');
  });

  test('--config-dir reads *.conf sorted, after --config-file', () => {
    const a = file('a.conf', '[DEFAULT]\nhost = a\nreserved_host_cpus = 1\n');
    const d = join(dir, 'conf.d');
    mkdirSync(d);
    writeFileSync(join(d, '20-b.conf'), '[DEFAULT]\nhost = twenty\n');
    writeFileSync(join(d, '10-a.conf'), '[DEFAULT]\nhost = ten\nreserved_host_cpus = 3\n');
    writeFileSync(join(d, 'ignored.txt'), '[DEFAULT]\nhost = nope\n');
    const { config } = loadConfig({ files: [a], dirs: [d], env: NO_ENV });
    expect(config.DEFAULT.host).toBe('twenty');
    expect(config.DEFAULT.reserved_host_cpus).toBe(3);
  });

  test('environment overrides beat files; section names are case-insensitive', () => {
    const a = file('a.conf', '[DEFAULT]\nhost = file\n[placement]\ntimeout = 5\n');
    const { config } = loadConfig({
      files: [a],
      env: { COMPUTE_AGENT__DEFAULT__HOST: 'env-host', COMPUTE_AGENT__PLACEMENT__TIMEOUT: '7.5' },
    });
    expect(config.DEFAULT.host).toBe('env-host');
    expect(config.placement.timeout).toBe(7.5);
  });

  test('an unknown environment override is a warning, not an error', () => {
    const { warnings } = loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__HOTS: 'x' }, defaultFile: join(dir, 'none') });
    expect(warnings).toEqual([expect.stringContaining('COMPUTE_AGENT__DEFAULT__HOTS')]);
  });

  test('an unknown key in a known section warns with its location; other sections are ignored', () => {
    const a = file('a.conf', '[DEFAULT]\nhots = typo\n[libvirt]\nvirt_type = kvm\n');
    const { warnings } = loadConfig({ files: [a], env: NO_ENV });
    expect(warnings).toEqual([`${a}:2: unknown option DEFAULT.hots (ignored)`]);
  });

  test('bandwidth is not reported by default (Neutron reports it); resource_provider_bandwidths alone is a warning', () => {
    const a = file('a.conf', '[network]\nresource_provider_bandwidths = eno1:1000:1000\n');
    const { config, warnings } = loadConfig({ files: [a], env: NO_ENV });
    expect(config.network.report_bandwidth_inventory).toBe(false);
    expect(warnings).toEqual([expect.stringMatching(/resource_provider_bandwidths is set but network.report_bandwidth_inventory = false/)]);
    const b = file('b.conf', '[network]\nreport_bandwidth_inventory = true\nresource_provider_bandwidths = eno1:1000:1000\n');
    expect(loadConfig({ files: [b], env: NO_ENV }).warnings).toEqual([]);
  });

  test('$state_path in instances_path follows state_path; $$ is a literal $', () => {
    const a = file('a.conf', '[DEFAULT]\nstate_path = /srv/agent\n[placement]\npassword = pa$$word\n');
    const { config } = loadConfig({ files: [a], env: NO_ENV });
    expect(config.DEFAULT.instances_path).toBe('/srv/agent/instances');
    expect(config.placement.password).toBe('pa$word');
  });

  test('${name} interpolates from DEFAULT into another section', () => {
    const a = file('a.conf', '[DEFAULT]\nstate_path = /srv/x\n[placement]\ncafile = ${state_path}/ca.pem\n');
    expect(loadConfig({ files: [a], env: NO_ENV }).config.placement.cafile).toBe('/srv/x/ca.pem');
  });

  test('the acceptance file: two lines naming the two bad options', () => {
    const bad = file('bad.conf', '[DEFAULT]\ntransport_url = http://x\ncpu_allocation_ratio = -1\n');
    const lines = problems(() => loadConfig({ files: [bad], env: NO_ENV }));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^DEFAULT\.transport_url = "http:\/\/x": .*; expected rabbit:\/\//);
    expect(lines[1]).toMatch(/^DEFAULT\.cpu_allocation_ratio = "-1": must be > 0; expected a number > 0/);
  });

  test.each([
    ['[DEFAULT]\nreserved_host_cpus = two\n', 'DEFAULT.reserved_host_cpus = "two": not an integer'],
    ['[DEFAULT]\nreserved_host_memory_mb = -5\n', 'DEFAULT.reserved_host_memory_mb = "-5": must be >= 0'],
    ['[DEFAULT]\nram_allocation_ratio = 0\n', 'DEFAULT.ram_allocation_ratio = "0": must be > 0'],
    ['[DEFAULT]\nstate_path = relative/dir\n', 'DEFAULT.state_path = "relative/dir": not an absolute path'],
    ['[DEFAULT]\nhost = has space\n', 'DEFAULT.host = "has space": not a valid host name'],
    ['[DEFAULT]\nmy_ip = 10.0.0.300\n', 'DEFAULT.my_ip = "10.0.0.300": not an IP address; expected an IPv4 or IPv6 address'],
    ['[DEFAULT]\nnova_service_version = 66\n', 'DEFAULT.nova_service_version = "66": not a service version the agent implements; expected auto, 64 (Zed) or 68 (2025.1)'],
    ['[DEFAULT]\ndebug = maybe\n', 'DEFAULT.debug = "maybe": not a boolean'],
    ['[DEFAULT]\nlog_level = loud\n', 'DEFAULT.log_level = "loud": not one of the choices'],
    ['[DEFAULT]\ntransport_url = rabbit://u:p@h:99999/\n', 'port "99999" is not in 1-65535'],
    ['[DEFAULT]\ntransport_url = rabbit://\n', 'DEFAULT.transport_url'],
    ['[placement]\nauth_type = kerberos\n', 'placement.auth_type = "kerberos": not one of the choices; expected one of noauth, password'],
    ['[placement]\nendpoint_override = ftp://x\n', 'placement.endpoint_override = "ftp://x": scheme must be http or https'],
    ['[placement]\ntimeout = 0\n', 'placement.timeout = "0": must be > 0'],
    ['[oslo_messaging_rabbit]\nssl = si\n', 'oslo_messaging_rabbit.ssl = "si": not a boolean'],
    ['[DEFAULT]\ninstances_path = $nowhere/x\n', 'DEFAULT.instances_path: $nowhere does not name an option'],
  ])('bad value %j', (text, expected) => {
    const f = file('x.conf', text);
    const lines = problems(() => loadConfig({ files: [f], env: NO_ENV }));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(expected);
  });

  test('an error line names the file and line the value came from', () => {
    const f = file('x.conf', '[DEFAULT]\n\nreserved_host_cpus = x\n');
    expect(problems(() => loadConfig({ files: [f], env: NO_ENV }))[0]).toContain(`(${f}:3)`);
  });

  test('an error from the environment names the variable', () => {
    const lines = problems(() => loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__DEBUG: 'nah' }, defaultFile: join(dir, 'none') }));
    expect(lines[0]).toContain('(environment COMPUTE_AGENT__DEFAULT__DEBUG)');
  });

  test('secrets are masked in error lines', () => {
    const f = file('x.conf', '[DEFAULT]\ntransport_url = rabbit://user:s3cretpw@h:abc/\n');
    const [line] = problems(() => loadConfig({ files: [f], env: NO_ENV }));
    expect(line).toContain('rabbit://user:***@h:abc/');
    expect(line).not.toContain('s3cretpw');
  });

  test('a $ reference in a secret is reported without echoing the secret', () => {
    const f = file('x.conf', '[placement]\npassword = ab$cdefgh\n');
    const [line] = problems(() => loadConfig({ files: [f], env: NO_ENV }));
    expect(line).toContain('placement.password: a $ reference does not name an option');
    expect(line).not.toContain('cdefgh');
  });

  test('auth_type = password requires its credentials, each named', () => {
    const f = file('x.conf', '[placement]\nauth_type = password\nusername = nova\n');
    const lines = problems(() => loadConfig({ files: [f], env: NO_ENV }));
    expect(lines.map((l) => l.split(':')[0])).toEqual(['placement.auth_url', 'placement.password', 'placement.project_name']);
  });

  test('v3applicationcredential requires id and secret', () => {
    const f = file('x.conf', '[placement]\nauth_type = v3applicationcredential\nauth_url = https://ks:5000/v3\n');
    const lines = problems(() => loadConfig({ files: [f], env: NO_ENV }));
    expect(lines.map((l) => l.split(':')[0])).toEqual(['placement.application_credential_id', 'placement.application_credential_secret']);
  });

  test('a syntax error names file and line without echoing the line', () => {
    const f = file('x.conf', '[placement]\npassword\n');
    const lines = problems(() => loadConfig({ files: [f], env: NO_ENV }));
    expect(lines).toEqual([`${f}:2: expected "key = value"`]);
  });

  test('a missing --config-file is an error; every problem is reported together', () => {
    const bad = file('bad.conf', '[DEFAULT]\ndebug = x\n');
    const lines = problems(() => loadConfig({ files: [join(dir, 'missing.conf'), bad], env: NO_ENV }));
    expect(lines).toEqual([`config file ${join(dir, 'missing.conf')}: not found`, expect.stringContaining('DEFAULT.debug')]);
  });

  test('several brokers, a vhost and percent-encoded credentials', () => {
    const f = file('x.conf', '[DEFAULT]\ntransport_url = rabbit://a:p%40ss@h1:5671,b:q@[::1]:5673/nova%2Fprod\n');
    const t = loadConfig({ files: [f], env: NO_ENV }).config.DEFAULT.transport_url;
    expect(t.hosts).toEqual([
      { host: 'h1', port: 5671, username: 'a', password: 'p@ss' },
      { host: '::1', port: 5673, username: 'b', password: 'q' },
    ]);
    expect(t.virtualHost).toBe('nova/prod');
  });
});
