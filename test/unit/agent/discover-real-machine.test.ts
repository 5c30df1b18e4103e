/**
 * Acceptance on the machine the tests run on: `compute-agent discover --json` (fake driver on the
 * real probes) reports VCPU = `nproc`, MEMORY_MB within 1% of MemTotal, DISK_GB of the
 * instances_path filesystem (as df measures it), and a provider or a record for every physical
 * interface in /sys/class/net. Only reads the local machine.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mem } from 'systeminformation';
import { runCli } from '../../../agent/cli/program';

interface Out {
  providers: Array<{ name: string; inventories: Record<string, { total: number }> }>;
}

async function cli(conf: string, ...args: string[]): Promise<{ code: number; out: string; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(['--config-file', conf, 'discover', ...args], {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env: {},
    stopSignal: () => new Promise(() => undefined),
  });
  return { code, out: out.join('\n'), err };
}

describe('discover on this machine', () => {
  const dir = mkdtempSync(join(tmpdir(), 'discover-real-'));
  const instances = join(dir, 'instances-not-created-yet');
  const conf = join(dir, 'agent.conf');
  writeFileSync(conf, `[DEFAULT]\nhost = this-machine\ncompute_driver = fake\nstate_path = ${dir}/state\ninstances_path = ${instances}\n`);

  test('VCPU = nproc, MEMORY_MB ~ MemTotal, DISK_GB = df of instances_path, every physical NIC accounted for', async () => {
    const { code, out, err } = await cli(conf, '--json');
    expect(code).toBe(0);
    expect(err.filter((l) => /probe failed/.test(l))).toEqual([]);
    const { providers } = JSON.parse(out) as Out;
    const root = providers.find((p) => p.name === 'this-machine');
    const inv = root?.inventories ?? {};

    expect(inv.VCPU?.total).toBe(Number(execFileSync('nproc', { encoding: 'utf8' }).trim()));

    const memTotalKb = Number(/^MemTotal:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1]);
    const memMb = inv.MEMORY_MB?.total ?? 0;
    expect(Math.abs(memMb - memTotalKb / 1024) / (memTotalKb / 1024)).toBeLessThan(0.01);
    // systeminformation reads the same /proc/meminfo (asynchronously) and is accurate for the
    // total: a second opinion, not a source (it cannot read a fixture tree).
    expect(memMb).toBe(Math.floor((await mem()).total / 1024 / 1024));

    // instances_path does not exist: its nearest existing ancestor (the temp dir) is measured.
    const dfBytes = Number(execFileSync('df', ['-B1', '--output=size', dir], { encoding: 'utf8' }).trim().split('\n')[1]);
    expect(inv.DISK_GB?.total).toBe(Math.floor(dfBytes / 1024 ** 3));

    const facts = JSON.parse((await cli(conf, '--facts')).out) as { nic: { status: string; data?: Array<{ name: string }> } };
    const recorded = new Set((facts.nic.data ?? []).map((n) => n.name));
    const physical = readdirSync('/sys/class/net').filter((n) => !realpathSync(join('/sys/class/net', n)).includes('/devices/virtual/'));
    expect(physical.length).toBeGreaterThan(0);
    for (const ifname of physical) {
      const hasProvider = providers.some((p) => p.name === `this-machine:${ifname}`);
      expect([ifname, hasProvider || recorded.has(ifname)]).toEqual([ifname, true]);
    }
    // Virtual interfaces (lo, ifb*, bridges) are neither.
    for (const n of readdirSync('/sys/class/net').filter((x) => !physical.includes(x))) expect(recorded.has(n)).toBe(false);
  });
});
