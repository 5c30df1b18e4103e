// `compute-agent run`, the built binary, as an operator starts it: against the local stack it comes
// up, logs JSON, and exits 0 on SIGTERM; against an unreachable Placement it exits 1 with one clear
// line; the Placement password never appears in its output.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { deleteTree, placementClient } from '../../helpers/placement';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLACEMENT_URL, TRANSPORT_URL } from '../../helpers/stack';

const BIN = join(__dirname, '..', '..', '..', 'dist', 'agent', 'cli', 'main.js');
const PASSWORD = 'p;a#ss word';

interface Run {
  child: ChildProcess;
  out: string[];
  exited: Promise<number | null>;
}

function start(conf: string, extra: string[] = []): Run {
  const child = spawn(process.execPath, [BIN, 'run', '--config-file', conf, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out: string[] = [];
  child.stdout?.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => out.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, exited };
}

async function waitFor(run: Run, text: string, ms = 30000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!run.out.join('').includes(text)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for "${text}"; output:\n${run.out.join('')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const started: string[] = [];

function config(placement: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ca-run-'));
  const file = join(dir, 'agent.conf');
  // A new state dir is a new compute_id: the host name must be new too (the agent refuses to take
  // over a name another compute node's provider holds).
  const host = `it-run-${dir.slice(-6).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
  started.push(dir);
  writeFileSync(
    file,
    `[DEFAULT]\nhost = ${host}\ncompute_driver = fake\nstate_path = ${dir}\ntransport_url = ${TRANSPORT_URL}\n` +
      `[placement]\nendpoint_override = ${placement}\npassword = ${PASSWORD}\n` +
      // No fixed metrics port: an operator's agent on this machine may hold 9180.
      `[metrics]\nlisten =\n`,
    { mode: 0o600 },
  );
  return file;
}

afterAll(async () => {
  const api = placementClient();
  for (const dir of started) {
    const id = join(dir, 'compute_id');
    if (existsSync(id)) await deleteTree(api, readFileSync(id, 'utf8').trim());
  }
});

beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` first (scripts/test does)`);
});

test('starts against the local stack, logs that it is up, stops cleanly on SIGTERM', async () => {
  const run = start(config(PLACEMENT_URL));
  await waitFor(run, '"msg":"compute-agent up"');
  run.child.kill('SIGTERM');
  expect(await run.exited).toBe(0);
  const text = run.out.join('');
  expect(text).toContain('"msg":"placement reachable"');
  expect(text).toContain('"msg":"broker connected"');
  expect(text).toContain('"msg":"compute-agent stopped"');
  for (const line of text.trim().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
  expect(text).not.toContain(PASSWORD);
});

test('unreachable Placement: bounded retries, one clear line naming the endpoint, exit 1', async () => {
  const run = start(config('http://127.0.0.1:1'), ['--connect-attempts', '2']);
  expect(await run.exited).toBe(1);
  const text = run.out.join('');
  expect(text).toContain('compute-agent: placement unreachable after 2 attempt(s): GET http://127.0.0.1:1/: connect ECONNREFUSED');
  expect(text).not.toMatch(/\n\s+at /);
  expect(text).not.toContain(PASSWORD);
});

test('no compute_driver: exit 2 at once with one line naming the option and the drivers, nothing contacted', async () => {
  const file = config('http://127.0.0.1:1');
  writeFileSync(file, readFileSync(file, 'utf8').replace('compute_driver = fake\n', ''), { mode: 0o600 });
  const run = start(file);
  expect(await run.exited).toBe(2);
  expect(run.out.join('')).toBe('DEFAULT.compute_driver missing: the agent has no default virt driver; expected one of fake, qemu\n');
});
