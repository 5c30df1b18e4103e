/** `compute-agent discover` end to end through the CLI, on a host file. */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, type CliIo } from '../../../../agent/cli/program';

interface Captured {
  out: string[];
  err: string[];
  io: CliIo;
}

function capture(): Captured {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { out: (l) => out.push(l), err: (l) => err.push(l), env: {}, stopSignal: () => new Promise(() => undefined) },
  };
}

function setup(host: object | string, extra = ''): { conf: string; state: string } {
  const dir = mkdtempSync(join(tmpdir(), 'discover-cli-'));
  const hostFile = join(dir, 'host.yaml');
  writeFileSync(hostFile, typeof host === 'string' ? host : JSON.stringify(host));
  const state = join(dir, 'state');
  const conf = join(dir, 'agent.conf');
  writeFileSync(
    conf,
    `[DEFAULT]\nhost = cli-host\ncompute_driver = fake\nstate_path = ${state}\nreserved_host_memory_mb = 1024\n\n[fake]\nhost_file = ${hostFile}\n\n[network]\nphysical_device_mappings = physnet1:ens1f0\n${extra}`,
  );
  return { conf, state };
}

const HOST = {
  cpu: { sockets: 1, cores_per_socket: 4, threads_per_core: 2, vendor: 'GenuineIntel', flags: ['avx2'] },
  memory: { total_mb: 32768 },
  disk: { total_gb: 400 },
  gpus: [{ address: '0000:3b:00.0', vendor_id: '10de', device_id: '2330', model: 'NVIDIA H100 80GB HBM3', memory_mb: 81559 }],
  nics: [{ name: 'ens1f0', address: '0000:5e:00.0', speed_mbps: 25000, sriov_totalvfs: 64 }],
};

describe('compute-agent discover', () => {
  test("--json prints exactly Placement's fields, parents first, root uuid from state_path/compute_id", async () => {
    const { conf, state } = setup(HOST);
    const c = capture();
    expect(await runCli(['--config-file', conf, 'discover', '--json'], c.io)).toBe(0);
    const doc = JSON.parse(c.out.join('\n')) as { providers: Array<Record<string, unknown>> };
    expect(Object.keys(doc)).toEqual(['providers']);
    for (const p of doc.providers) {
      expect(Object.keys(p)).toEqual(['uuid', 'name', 'parent_provider_uuid', 'inventories', 'traits', 'aggregates']);
      for (const rec of Object.values(p.inventories as Record<string, object>)) {
        expect(Object.keys(rec)).toEqual(['total', 'reserved', 'min_unit', 'max_unit', 'step_size', 'allocation_ratio']);
      }
    }
    const [root, ...children] = doc.providers;
    expect(root).toMatchObject({ name: 'cli-host', parent_provider_uuid: null, uuid: readFileSync(join(state, 'compute_id'), 'utf8').trim() });
    expect(root?.inventories).toEqual({
      DISK_GB: { total: 400, reserved: 0, min_unit: 1, max_unit: 400, step_size: 1, allocation_ratio: 1 },
      MEMORY_MB: { total: 32768, reserved: 1024, min_unit: 1, max_unit: 32768, step_size: 1, allocation_ratio: 1 },
      VCPU: { total: 8, reserved: 0, min_unit: 1, max_unit: 8, step_size: 1, allocation_ratio: 4 },
    });
    expect(children.map((p) => [p.name, p.parent_provider_uuid])).toEqual([
      ['cli-host_pci_0000_3b_00_0', root?.uuid],
      ['cli-host:ens1f0', root?.uuid],
    ]);
    expect(children[1]?.traits).toEqual(['CUSTOM_PHYSNET_PHYSNET1', 'HW_NIC_SRIOV']);
    expect(c.err).toEqual([]);

    const again = capture();
    await runCli(['--config-file', conf, 'discover', '--json'], again.io);
    expect(JSON.parse(again.out.join('\n'))).toEqual(doc); // same uuids on every run
  });

  test('the readable tree shows inventories, ratios and traits, children indented', async () => {
    const { conf } = setup(HOST);
    const c = capture();
    expect(await runCli(['--config-file', conf, 'discover'], c.io)).toBe(0);
    const text = c.out.join('\n');
    expect(text).toMatch(/^cli-host {2}\([0-9a-f-]{36}\)$/m);
    expect(text).toMatch(/^ {2}VCPU +total +8 +reserved +0 +ratio 4\.0 \(initial; Placement keeps its own\)$/m);
    expect(text).toMatch(/^ {4}└─ cli-host:ens1f0 {2}\([0-9a-f-]{36}\)$/m);
    expect(text).toMatch(/^ {9}SRIOV_NET_VF +total +64 +reserved +0 +ratio 1\.0$/m);
    expect(text).toContain('traits: CUSTOM_PHYSNET_PHYSNET1, HW_NIC_SRIOV');
  });

  test('--facts prints what the probes (here: the host file) found', async () => {
    const { conf } = setup(HOST);
    const c = capture();
    expect(await runCli(['--config-file', conf, 'discover', '--facts'], c.io)).toBe(0);
    const facts = JSON.parse(c.out.join('\n')) as Record<string, { status: string }>;
    expect(Object.keys(facts)).toEqual(['cpu', 'memory', 'disk', 'gpu', 'nic']);
    expect(facts.nic).toMatchObject({ status: 'detected', data: [{ name: 'ens1f0', sriovTotalVfs: 64 }] });
  });

  test('a malformed host file: exit 2, one line per problem, no stack trace', async () => {
    const { conf } = setup({ cpu: { sockets: 'two', cores_per_socket: 1, threads_per_core: 1 }, nics: [{ nam: 'x' }] });
    const c = capture();
    expect(await runCli(['--config-file', conf, 'discover', '--json'], c.io)).toBe(2);
    expect(c.out).toEqual([]);
    expect(c.err).toEqual([
      expect.stringMatching(/host\.yaml: cpu\.sockets: expected a socket count \(a whole number >= 1\)$/),
      expect.stringMatching(/host\.yaml: nics\[0\]\.name: expected an interface name \(a string\)$/),
      expect.stringMatching(/host\.yaml: nics\[0\]: unknown field\(s\) nam$/),
    ]);
    expect(c.err.join('\n')).not.toMatch(/\n\s+at /);
  });

  test('an unknown driver: exit 2 naming the registered ones', async () => {
    const { conf } = setup(HOST, '\n[DEFAULT]\ncompute_driver = libvirt\n');
    const c = capture();
    expect(await runCli(['--config-file', conf, 'discover'], c.io)).toBe(2);
    expect(c.err).toEqual(['no virt driver named "libvirt"; registered: fake, qemu']);
  });

  test('a malformed compute_id: exit 1 with the reason', async () => {
    const { conf, state } = setup(HOST);
    mkdirSync(state, { recursive: true });
    writeFileSync(join(state, 'compute_id'), 'garbage\n');
    const c = capture();
    expect(await runCli(['--config-file', conf, 'discover'], c.io)).toBe(1);
    expect(c.err[0]).toMatch(/compute_id: does not hold a uuid/);
  });
});
