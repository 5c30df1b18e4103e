/** The nova report-client driver's wrapper: its input tree, the parsing of its answer, and when it is skipped. */
import { NovaReportClient, novaTree, parseNovaReport, totalRequests, type ProcessResult, type ProcessRunner } from '../../../bench/nova-report-client';
import { nameUuid, SyntheticHost } from '../../../bench/trees';

const pass = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  requests: { GET: 75, PUT: 132, POST: 69, DELETE: 0 },
  conflicts: 0,
  attempts: 1,
  wall_ms: 2511.3,
  cpu_ms: 288,
  routes: { 'POST /resource_providers': 69 },
  rc_only: { requests: { GET: 74, PUT: 132, POST: 69, DELETE: 0 }, wall_ms: 2500 },
  ...over,
});

const answer = (scenarios: Record<string, unknown>): string =>
  JSON.stringify({ nova_version: '26.2.2', refresh_interval_s: 300, setup_requests: 1, scenarios, vm_rss_kb: 131072, vm_hwm_kb: 140000 });

describe('parseNovaReport', () => {
  test('reads every field of a pass, and memory in MB', () => {
    const r = parseNovaReport(`some warning on stdout\n${answer({ first: pass(), claimed: pass({ conflicts: 1, attempts: 2 }) })}\n`);
    expect(r.novaVersion).toBe('26.2.2');
    expect(r.setupRequests).toBe(1);
    expect(r.vmRssMb).toBe(128);
    expect(r.scenarios.first).toEqual({
      requests: { GET: 75, PUT: 132, POST: 69, DELETE: 0 },
      conflicts: 0,
      attempts: 1,
      wallMs: 2511.3,
      cpuMs: 288,
      routes: { 'POST /resource_providers': 69 },
      rcOnly: { requests: { GET: 74, PUT: 132, POST: 69, DELETE: 0 }, wallMs: 2500 },
    });
    expect(totalRequests(r.scenarios.first?.requests ?? { GET: 0, PUT: 0, POST: 0, DELETE: 0 })).toBe(276);
    expect(r.scenarios.claimed?.attempts).toBe(2);
    expect(r.scenarios.steady).toBeUndefined();
  });

  test('a method the driver never saw counts as 0', () => {
    const r = parseNovaReport(answer({ steady: pass({ requests: { GET: 69 } }) }));
    expect(r.scenarios.steady?.requests).toEqual({ GET: 69, PUT: 0, POST: 0, DELETE: 0 });
  });

  test.each([
    ['not JSON', 'Traceback (most recent call last):', /not JSON/],
    ['an unknown scenario', answer({ reboot: pass() }), /unknown scenario\(s\) reboot/],
    ['a negative count', answer({ first: pass({ conflicts: -1 }) }), /first.conflicts is not a number/],
    ['a missing rc_only', answer({ first: pass({ rc_only: undefined }) }), /first.rc_only is not an object/],
    ['a missing version', JSON.stringify({ scenarios: {}, refresh_interval_s: 300, setup_requests: 1, vm_rss_kb: 1, vm_hwm_kb: 1 }), /nova_version/],
  ])('refuses %s', (_what, text, message) => {
    expect(() => parseNovaReport(text)).toThrow(message);
  });
});

describe('novaTree', () => {
  test('the tracker\'s tree with full inventory records and the initial ratios, parents first', async () => {
    const root = nameUuid('h');
    const tree = await novaTree(new SyntheticHost(69), 'h', root, { VCPU: 4 });
    expect(tree).toHaveLength(69);
    expect(tree[0]).toMatchObject({ uuid: root, name: 'h', parent_uuid: null });
    expect(tree[0]?.inventories.VCPU).toEqual({ total: 64, reserved: 0, min_unit: 1, max_unit: 64, step_size: 1, allocation_ratio: 4 });
    expect(tree[0]?.inventories.MEMORY_MB).toMatchObject({ reserved: 512, allocation_ratio: 1 });
    expect(tree[0]?.traits).toContain('COMPUTE_NODE');
    const seen = new Set<string>();
    for (const p of tree) {
      if (p.parent_uuid !== null) expect(seen.has(p.parent_uuid)).toBe(true);
      seen.add(p.uuid);
    }
    expect(tree.filter((p) => p.inventories.CUSTOM_MIG_1G_10GB)).toHaveLength(56);
  });
});

/** A runner that answers by program and first argument, and records what it ran. */
function fakeRunner(answers: Record<string, ProcessResult[]>): { run: ProcessRunner; calls: string[] } {
  const calls: string[] = [];
  const run: ProcessRunner = (file, args) => {
    const key = `${file} ${args[0] ?? ''}`;
    calls.push(key);
    const next = answers[key]?.shift();
    return next ? Promise.resolve(next) : Promise.reject(new Error(`unexpected ${key}`));
  };
  return { run, calls };
}

const ok = (stdout = ''): ProcessResult => ({ code: 0, stdout, stderr: '' });
const failed = (stderr: string): ProcessResult => ({ code: 1, stdout: '', stderr });
const input = { placement_url: 'http://p', nodename: 'n', root_uuid: 'r', tree: [], scenarios: ['first' as const] };

describe('NovaReportClient', () => {
  test('runs the driver with the input on stdin once nova imports', async () => {
    const seen: string[] = [];
    const run: ProcessRunner = (file, args, stdin) => {
      seen.push(`${file} ${args[0] === '-c' ? '-c' : (args[0]?.split('/').slice(-2).join('/') ?? '')}`);
      if (args[0] === '-c') return Promise.resolve(ok());
      expect(JSON.parse(stdin)).toEqual(input);
      return Promise.resolve(ok(answer({ first: pass() })));
    };
    const outcome = await new NovaReportClient(run, false).measure(input);
    expect(outcome.ran && outcome.report.scenarios.first?.attempts).toBe(1);
    expect(seen).toEqual(['/usr/bin/python3 -c', '/usr/bin/python3 nova/report_client.py']);
  });

  test('not root and nova missing: skipped, saying why, without trying to install', async () => {
    const { run, calls } = fakeRunner({ '/usr/bin/python3 -c': [failed("ModuleNotFoundError: No module named 'nova'")] });
    const outcome = await new NovaReportClient(run, false).measure(input);
    expect(outcome).toEqual({ ran: false, reason: 'python3-nova is not installed and this is not root to install it' });
    expect(calls).toEqual(['/usr/bin/python3 -c']);
  });

  test('root and nova missing: installs python3-nova, then checks again', async () => {
    const { run, calls } = fakeRunner({
      '/usr/bin/python3 -c': [failed('No module named nova'), ok()],
      'apt-get install': [ok()],
    });
    const client = new NovaReportClient(run, true);
    expect(await client.unavailable()).toBeUndefined();
    expect(calls).toEqual(['/usr/bin/python3 -c', 'apt-get install', '/usr/bin/python3 -c']);
  });

  test('a failed install is the reason, and the check runs once per client', async () => {
    const { run, calls } = fakeRunner({ '/usr/bin/python3 -c': [failed('x')], 'apt-get install': [failed('E: Unable to locate package python3-nova')] });
    const client = new NovaReportClient(run, true);
    expect(await client.unavailable()).toBe('python3-nova is not installed and apt-get install failed: E: Unable to locate package python3-nova');
    await client.unavailable();
    expect(calls).toHaveLength(2);
  });

  test('a driver that fails is an error with its last lines, not a skip', async () => {
    const run: ProcessRunner = (_f, args) => Promise.resolve(args[0] === '-c' ? ok() : failed('Traceback\nnova.exception.ResourceProviderSyncFailed'));
    await expect(new NovaReportClient(run, false).measure(input)).rejects.toThrow(/exited 1: Traceback \| nova.exception.ResourceProviderSyncFailed/);
  });
});
