// scripts/stack's PLACEMENT_MAX_CANDIDATES: a bad value and Zed (which has no such option) are
// refused before anything starts; on 2025.1 a private Placement started with it generates no more
// candidates than it says, whatever GET /allocation_candidates asks.
import { randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPENSTACK_RELEASE } from '../../helpers/stack';

const STACK = join(__dirname, '..', '..', '..', 'scripts', 'stack');

describe('scripts/stack PLACEMENT_MAX_CANDIDATES', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ca-max-candidates-'));
  const port = 23000 + Math.floor(Math.random() * 5000);
  const env = { ...process.env, OPENSTACK_RELEASE, PLACEMENT_PORT: String(port), STACK_DIR: dir, PLACEMENT_DB: 'sqlite', PLACEMENT_WORKERS: '1' };
  const stack = (extra: Record<string, string>, ...args: string[]) => spawnSync('bash', [STACK, ...args], { env: { ...env, ...extra }, encoding: 'utf8', timeout: 120_000 });

  afterAll(() => {
    stack({}, 'down', 'placement');
    rmSync(dir, { recursive: true, force: true });
  });

  test('a value that is not a positive integer is refused, naming the variable', () => {
    const r = stack({ PLACEMENT_MAX_CANDIDATES: 'many' }, 'up', 'placement');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/PLACEMENT_MAX_CANDIDATES must be a positive integer/);
  });

  test('Zed is refused: its Placement would ignore the option', () => {
    const r = stack({ OPENSTACK_RELEASE: 'zed', PLACEMENT_MAX_CANDIDATES: '5' }, 'up', 'placement');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/PLACEMENT_MAX_CANDIDATES needs OPENSTACK_RELEASE=2025\.1/);
  });

  (OPENSTACK_RELEASE === '2025.1' ? test : test.skip)('2025.1: Placement generates at most that many candidates', async () => {
    const up = stack({ PLACEMENT_MAX_CANDIDATES: '2' }, 'up', 'placement');
    expect(up.status).toBe(0);
    expect(readFileSync(join(dir, `placement-${port}`, 'placement.conf'), 'utf8')).toMatch(/\[placement\]\nmax_allocation_candidates = 2\n/);
    const base = `http://127.0.0.1:${port}`;
    const headers = { 'X-Auth-Token': 'admin', 'OpenStack-API-Version': 'placement 1.39', 'Content-Type': 'application/json' };
    for (let i = 0; i < 4; i++) {
      const uuid = randomUUID();
      expect((await fetch(`${base}/resource_providers`, { method: 'POST', headers, body: JSON.stringify({ name: `cand-${uuid}`, uuid }) })).status).toBe(200);
      const inv = await fetch(`${base}/resource_providers/${uuid}/inventories`, { method: 'PUT', headers, body: JSON.stringify({ resource_provider_generation: 0, inventories: { VCPU: { total: 8 } } }) });
      expect(inv.status).toBe(200);
    }
    const res = await fetch(`${base}/allocation_candidates?resources=VCPU:1&limit=10`, { headers });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { allocation_requests: unknown[] };
    expect(body.allocation_requests).toHaveLength(2);
  });
});
