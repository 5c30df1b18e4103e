// Builds from Glance images through the agent: one agent with compute_driver = qemu and
// [glance] endpoint_override on a private glance-api (no keystone), the real Placement and
// RabbitMQ. Ten build_and_run_instance casts of one image at once go ACTIVE with real VMs and
// glance-api logs one GET of the image data; a build of an image whose stored bytes were changed
// behind Glance's back ends in instance.create.error with a fault naming the checksum mismatch,
// no allocation and no instance directory.
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Daemon } from '../../../agent/daemon';
import { agentSpec, rootOf, startDaemon, type AgentSpec } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { PrivateGlance } from '../../helpers/glance';
import { deleteTree, placementClient } from '../../helpers/placement';
import { describeWithQemu, reapLeftovers } from '../../helpers/qemu-hosts';
import { lastTick, tickImage } from '../../helpers/tick-guest';

jest.setTimeout(300000);
const api = placementClient();
const FLAVOR = { name: 'tiny', vcpus: 1, memory_mb: 32, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 60000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await Promise.resolve(ok()).catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describeWithQemu('builds from Glance images through the agent', () => {
  const exchange = `test-glance-${randomUUID().slice(0, 8)}`;
  let glance: PrivateGlance;
  let spec: AgentSpec;
  let daemon: Daemon | undefined;
  const cp = new ControlPlane(exchange);

  beforeAll(async () => {
    glance = await PrivateGlance.start();
    spec = agentSpec(`qg-${exchange.slice(-8)}`, exchange);
    const instances = join(spec.dir, 'instances');
    mkdirSync(instances);
    const conf = readFileSync(spec.file, 'utf8')
      .replace(/^compute_driver = .*\n/m, '')
      .replace('[DEFAULT]\n', `[DEFAULT]\ncompute_driver = qemu\ninstances_path = ${instances}\n# Ten one-vCPU guests on a two-core machine.\ncpu_allocation_ratio = 16.0\n`)
      .concat(`[qemu]\naccel = tcg\nshutdown_timeout = 1\ndestroy_timeout = 5\n[glance]\nendpoint_override = ${glance.url}\nnum_retries = 0\n`);
    writeFileSync(spec.file, conf, { mode: 0o600 });
    await cp.start();
    daemon = await startDaemon(spec);
  });

  afterAll(async () => {
    await daemon?.stop('test end');
    await cp.close();
    reapLeftovers(spec.dir);
    if (existsSync(join(spec.dir, 'state', 'compute_id'))) await deleteTree(api, rootOf(spec)).catch(() => undefined);
    await glance?.stop();
  });

  const instance = (uuid: string, image: string): Record<string, unknown> => ({ uuid, display_name: `g-${uuid.slice(0, 6)}`, project_id: 'p', user_id: 'u', flavor: FLAVOR, image_ref: image });
  const holders = async (consumer: string): Promise<string[]> => Object.keys((await api.consumerAllocations(consumer)).allocations);

  test('ten concurrent builds of one image: all ACTIVE on real VMs, one GET of the image data', async () => {
    const image = await glance.upload('tick', tickImage(), 'raw');
    const uuids = Array.from({ length: 10 }, () => randomUUID());
    const t0 = Date.now();
    await Promise.all(uuids.map((u) => cp.cast(spec.host, 'build_and_run_instance', { instance: instance(u, image) })));
    await cp.waitFor('instance.create.end', uuids, 180000);
    const ms = Date.now() - t0;
    expect(glance.dataGets(image)).toBe(1);
    for (const u of uuids) {
      await until(`the counter of ${u} runs`, () => (lastTick(join(spec.dir, 'instances', u, 'console.log')) ?? -1) >= 1);
      expect(await holders(u)).toEqual([rootOf(spec)]);
    }
    expect(readdirSync(join(spec.dir, 'instances', '_base'))).toEqual([`${image}.raw`]);
    console.log(`ten concurrent build_and_run_instance from one Glance image: all instance.create.end in ${ms} ms; ${glance.dataGets(image)} GET of its data`);
    for (const u of uuids) await cp.cast(spec.host, 'terminate_instance', { instance: { uuid: u } });
    await cp.waitFor('instance.delete.end', uuids, 120000);
  });

  test('a corrupted image: instance.create.error with a fault naming the checksum mismatch, nothing left', async () => {
    const image = await glance.upload('corrupt', tickImage(), 'raw');
    const fd = openSync(glance.storedFile(image), 'r+');
    writeSync(fd, Buffer.from([0x42]), 0, 1, 2048);
    closeSync(fd);
    const uuid = randomUUID();
    await cp.cast(spec.host, 'build_and_run_instance', { instance: instance(uuid, image) });
    await cp.waitFor('instance.create.error', [uuid], 60000);
    const event = cp.events.find((e) => e.event_type === 'instance.create.error' && e.uuid === uuid);
    const fault = (event?.data.fault as { 'nova_object.data': { exception_message: string } } | null)?.['nova_object.data'].exception_message;
    expect(fault).toMatch(new RegExp(`^spawn failed: image "${image}": checksum mismatch \\(sha512 expected [0-9a-f]{16}\\.\\.\\., got [0-9a-f]{16}\\.\\.\\.\\)$`));
    await until('the claim is gone', async () => (await holders(uuid)).length === 0);
    expect(existsSync(join(spec.dir, 'instances', uuid))).toBe(false);
    expect(readdirSync(join(spec.dir, 'instances', '_base')).filter((n) => n.includes(image))).toEqual([]);
  });
});
