// `compute-agent plan` and `sync --once`, the built binary against the local stack: plan lists the
// writes and makes none; sync makes them and exits 0; the next plan is empty; an unreachable
// Placement exits 1 with the reason.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deleteTree, placementClient } from '../../helpers/placement';
import { PLACEMENT_URL } from '../../helpers/stack';

const run = promisify(execFile);
const BIN = join(__dirname, '..', '..', '..', 'dist', 'agent', 'cli', 'main.js');

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [BIN, ...args]);
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

test('plan, then sync --once, then an empty plan', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ca-sync-'));
  const conf = join(dir, 'agent.conf');
  const host = `cli-sync-${dir.slice(-6).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
  writeFileSync(conf, `[DEFAULT]\nhost = ${host}\ncompute_driver = fake\nstate_path = ${dir}\n[placement]\nendpoint_override = ${PLACEMENT_URL}\n`, { mode: 0o600 });
  const api = placementClient();
  let rootUuid = '';
  try {
    const plan = await cli(['plan', '--config-file', conf, '--json']);
    expect(plan.code).toBe(0);
    const writes = (JSON.parse(plan.stdout) as { writes: Array<{ method: string; path: string }> }).writes;
    expect(writes[0]).toMatchObject({ method: 'POST', path: '/resource_providers' });
    // A new host: every inventory in one POST /reshaper.
    expect(writes.filter((w) => w.path === '/reshaper')).toHaveLength(1);
    rootUuid = readFileSync(join(dir, 'compute_id'), 'utf8').trim();
    expect(await api.providersInTree(rootUuid)).toEqual([]);

    const sync = await cli(['sync', '--once', '--config-file', conf, '--json']);
    expect(sync.code).toBe(0);
    const summary = JSON.parse(sync.stdout) as { created: number; placement_writes: number; root_provider_uuid: string };
    expect(summary.root_provider_uuid).toBe(rootUuid);
    expect(summary.created).toBeGreaterThanOrEqual(1);
    expect(summary.placement_writes).toBe(writes.length);
    expect((await api.providersInTree(rootUuid)).length).toBe(summary.created);

    const again = await cli(['plan', '--config-file', conf]);
    expect(again.stdout.trim()).toBe('nothing to write: Placement matches this host');

    const down = await cli(['sync', '--once', '--config-file', conf]);
    expect(down.code).toBe(0);
    writeFileSync(conf, `[DEFAULT]\nhost = ${host}\ncompute_driver = fake\nstate_path = ${dir}\n[placement]\nendpoint_override = http://127.0.0.1:1\n`, { mode: 0o600 });
    const failed = await cli(['sync', '--once', '--config-file', conf]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('http://127.0.0.1:1');
    expect(failed.stderr).toContain('ECONNREFUSED');
    expect(failed.stderr).not.toMatch(/\n\s+at /);
  } finally {
    if (rootUuid) await deleteTree(api, rootUuid);
  }
});
