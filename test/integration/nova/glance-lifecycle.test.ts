// The everyday server lifecycle through nova's API on a real Glance image: a real nova control
// plane (scripts/nova-stack, OPENSTACK_RELEASE) behind a real Keystone (scripts/keystone-stack:
// nova-api passes the user's token on to Glance) looking images up in a real glance-api
// (scripts/glance-stack), two agents with the qemu driver fetching the image into their caches.
// The tick guest (a boot sector that prints a counter on the serial port) is uploaded to Glance;
// POST /servers boots it ACTIVE, the console log through the API shows it counting, then stop,
// start, hard and soft reboot, rebuild from another image, resize to a bigger flavor (to the
// other host, as nova's allow_resize_to_same_host is off by default) with confirm, and delete,
// each checked in GET /servers and in Placement.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { PrivateGlance } from '../../helpers/glance';
import { ADMIN_PASSWORD, PrivateKeystone, SERVICE_PASSWORD } from '../../helpers/keystone';
import { NovaAgent, NovaStack, type Server } from '../../helpers/nova';
import { deleteTree, placementClient } from '../../helpers/placement';
import { HAVE_QEMU, reapLeftovers } from '../../helpers/qemu-hosts';
import { tickImage, ticks } from '../../helpers/tick-guest';

jest.setTimeout(600_000);

const placement = placementClient();
const SMALL = { id: 'ca-img-1', vcpus: 1, ram: 64, disk: 1 };
const BIG = { id: 'ca-img-2', vcpus: 2, ram: 96, disk: 2 };
const resources = (f: typeof SMALL): Record<string, number> => ({ VCPU: f.vcpus, MEMORY_MB: f.ram, DISK_GB: f.disk });

type ServerWithImage = Server & { readonly image: { readonly id: string }; readonly flavor: { readonly id?: string } };

const describeWithQemu = HAVE_QEMU ? describe : describe.skip;

describeWithQemu('the server lifecycle through nova on a Glance image (qemu)', () => {
  let glance: PrivateGlance;
  let keystone: PrivateKeystone | undefined;
  let stack: NovaStack;
  const agents: NovaAgent[] = [];
  let image: string;
  let image2: string;
  const root = (x: NovaAgent): string => readFileSync(join(x.dir, 'state', 'compute_id'), 'utf8').trim();
  const agentOn = (host: string | null): NovaAgent => {
    const a = agents.find((x) => x.host === host);
    if (!a) throw new Error(`server is on ${String(host)}, not on one of our agents`);
    return a;
  };
  const allocations = async (id: string): Promise<Record<string, Record<string, number>>> =>
    Object.fromEntries(Object.entries((await placement.consumerAllocations(id)).allocations).map(([rp, v]) => [rp, { ...v.resources }]));
  const settled = (status: string, power: number) => (s: Server | undefined): boolean =>
    s?.status === status && s['OS-EXT-STS:task_state'] === null && s['OS-EXT-STS:power_state'] === power;
  const show = async (id: string): Promise<ServerWithImage> => (await stack.api.ok<{ server: ServerWithImage }>('GET', `/servers/${id}`)).server;

  beforeAll(async () => {
    glance = await PrivateGlance.start();
    image = await glance.upload('tick', tickImage(), 'raw');
    image2 = await glance.upload('tick-again', tickImage(), 'raw');
    keystone = await PrivateKeystone.create();
    await keystone.up();
    const ks = keystone;
    let token: string | undefined;
    stack = new NovaStack({ glanceUrl: glance.url, keystone: { url: ks.url, servicePassword: SERVICE_PASSWORD, token: async () => (token ??= await ks.passwordToken('admin', ADMIN_PASSWORD, 'admin')) } });
    await stack.up();
    for (const name of ['g1', 'g2']) {
      agents.push(
        new NovaAgent(`nova-${name}-${stack.apiPort}`, stack.transportUrl, { vcpus: 4, memory_mb: 4096, disk_gb: 20 }, {
          defaults: 'compute_driver = qemu',
          sections: `[qemu]\naccel = tcg\nshutdown_timeout = 1\ndestroy_timeout = 5\nwait_soft_reboot_seconds = 1\n[glance]\nendpoint_override = ${glance.url}\n`,
          messagingFile: stack.messagingFile,
        }),
      );
    }
    await Promise.all(agents.map((a) => a.start()));
    await stack.discover();
    for (const f of [SMALL, BIG]) await stack.api.ok('POST', '/flavors', { flavor: { id: f.id, name: f.id, vcpus: f.vcpus, ram: f.ram, disk: f.disk } });
  });

  afterAll(async () => {
    for (const a of agents) for (const l of a.problems()) process.stdout.write(`${a.host}: ${l}\n`);
    await Promise.all(agents.map((a) => a.kill('SIGTERM')));
    for (const a of agents) reapLeftovers(a.dir);
    await stack?.down();
    for (const a of agents) await deleteTree(placement, root(a)).catch(() => undefined);
    await glance?.stop();
    await keystone?.down();
  });

  test('boot from the image, console, stop, start, reboot, rebuild, resize with confirm, delete', async () => {
    const first = agents[0]!;
    // An admin may name the host (microversion 2.74): the server starts on the first agent.
    const created = await stack.api.ok<{ server: { id: string } }>(
      'POST', '/servers', { server: { name: 'glance-vm', imageRef: image, flavorRef: SMALL.id, networks: 'none', host: first.host } }, '2.74');
    const id = created.server.id;
    await stack.api.waitFor(id, settled('ACTIVE', 1), 60_000);
    expect((await show(id)).image.id).toBe(image);
    expect(await allocations(id)).toEqual({ [root(first)]: resources(SMALL) });
    expect(glance.dataGets(image)).toBe(1);

    // The guest counts on its serial port; nova's API shows the console log's last lines.
    const consoleTicks = async (): Promise<number[]> =>
      ticks((await stack.api.ok<{ output: string }>('POST', `/servers/${id}/action`, { 'os-getConsoleOutput': { length: 20 } })).output);
    const deadline = Date.now() + 30_000;
    while ((await consoleTicks()).length < 2) {
      if (Date.now() > deadline) throw new Error('the console log shows no counting guest');
      await new Promise((r) => setTimeout(r, 500));
    }

    await stack.api.action(id, { 'os-stop': null });
    await stack.api.waitFor(id, settled('SHUTOFF', 4), 30_000);
    expect(await allocations(id)).toEqual({ [root(first)]: resources(SMALL) });
    await stack.api.action(id, { 'os-start': null });
    await stack.api.waitFor(id, settled('ACTIVE', 1), 30_000);
    await stack.api.action(id, { reboot: { type: 'HARD' } });
    await stack.api.waitFor(id, settled('ACTIVE', 1), 30_000);
    // The tick guest ignores ACPI: the soft reboot becomes hard after wait_soft_reboot_seconds.
    await stack.api.action(id, { reboot: { type: 'SOFT' } });
    await stack.api.waitFor(id, settled('ACTIVE', 1), 30_000);
    expect(await allocations(id)).toEqual({ [root(first)]: resources(SMALL) });

    await stack.api.action(id, { rebuild: { imageRef: image2 } });
    await stack.api.waitFor(id, (s) => settled('ACTIVE', 1)(s) && (s as ServerWithImage).image.id === image2, 60_000);
    expect(glance.dataGets(image2)).toBe(1);
    expect(await allocations(id)).toEqual({ [root(first)]: resources(SMALL) });

    await stack.api.action(id, { resize: { flavorRef: BIG.id } });
    const resized = await stack.api.waitFor(id, settled('VERIFY_RESIZE', 1), 120_000);
    const dest = agentOn(resized?.['OS-EXT-SRV-ATTR:host'] ?? null);
    expect(dest).not.toBe(first);
    await stack.api.action(id, { confirmResize: null });
    await stack.api.waitFor(id, settled('ACTIVE', 1), 60_000);
    expect((await show(id)).flavor.id).toBe(BIG.id);
    // Only the new flavor, only where the server runs: the source's share went with the confirm.
    const want = { [root(dest)]: resources(BIG) };
    const until = Date.now() + 10_000;
    while (!isDeepStrictEqual(await allocations(id), want) && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
    expect(await allocations(id)).toEqual(want);

    await stack.api.ok('DELETE', `/servers/${id}`);
    await stack.api.waitFor(id, (x) => x === undefined, 60_000);
    expect(await allocations(id)).toEqual({});
  });
});
