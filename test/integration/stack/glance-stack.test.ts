// scripts/glance-stack as a developer uses it: up on a private port and stack directory (glance
// 25, Zed's, on Debian 12), status, upload of a file through Image API v2 printing the image id,
// the GET count from glance-api's log, down (status then says down and exits 1), and the errors
// a wrong call gets.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tickImage } from '../../helpers/tick-guest';

const SCRIPT = join(__dirname, '..', '..', '..', 'scripts', 'glance-stack');

describe('scripts/glance-stack', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ca-glance-stack-'));
  const port = String(22000 + Math.floor(Math.random() * 8000));
  const env = { ...process.env, GLANCE_PORT: port, STACK_DIR: dir };
  const run = (...args: string[]) => spawnSync('bash', [SCRIPT, ...args], { env, encoding: 'utf8', timeout: 180_000 });

  afterAll(() => {
    run('reset');
    rmSync(dir, { recursive: true, force: true });
  });

  test('up, upload, gets, status, down', async () => {
    const up = run('up');
    expect(up.status).toBe(0);
    expect(run('status').stdout).toMatch(new RegExp(`^glance: up \\(http://127\\.0\\.0\\.1:${port}, (zed|2025\\.1), auth noauth\\)`));
    expect(run('up').stderr).toMatch(/already up/);
    const file = join(dir, 'tick.img');
    writeFileSync(file, tickImage());
    const upload = run('upload', 'tick', file);
    expect(upload.status).toBe(0);
    const id = upload.stdout.trim();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const image = (await (await fetch(`http://127.0.0.1:${port}/v2/images/${id}`)).json()) as Record<string, unknown>;
    expect(image).toMatchObject({ status: 'active', disk_format: 'raw', visibility: 'public', size: 1024 * 1024, os_hash_algo: 'sha512' });
    expect(run('gets', id).stdout.trim()).toBe('0');
    expect((await fetch(`http://127.0.0.1:${port}/v2/images/${id}/file`)).status).toBe(200);
    expect(run('gets', id).stdout.trim()).toBe('1');
    expect(execFileSync('bash', [SCRIPT, 'env'], { env, encoding: 'utf8' })).toContain(`GLANCE_URL=http://127.0.0.1:${port}\n`);

    expect(run('upload', 'x', join(dir, 'absent')).stderr).toMatch(/absent is not a file/);
    expect(run('upload', 'x', file, 'vmdk').stderr).toMatch(/format must be raw or qcow2, not 'vmdk'/);

    expect(run('down').status).toBe(0);
    const after = run('status');
    expect(after.status).toBe(1);
    expect(after.stdout).toMatch(/^glance: down/);
  });
});
