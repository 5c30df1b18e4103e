// The server actions beyond boot, stop and move, through nova's API on scripts/cloud (nova 31, two
// agents in nova mode, real QEMU), each with its end state checked in nova and in the guest (the
// tick guest, which prints a counter on its serial console):
// - pause and unpause: PAUSED, the count stands still; ACTIVE, it goes on in the same QEMU;
// - suspend and resume across an agent restart: SUSPENDED with no QEMU process, the agent
//   SIGKILLed and started again, then ACTIVE with the count going on from where it was (no second
//   boot); a crash dump (NMI) is accepted and finishes its action without a fault;
// - the agent SIGKILLed in the middle of a suspend (its QEMU frozen, so the save waits), then
//   started again: the suspend completes from the journal, SUSPENDED; resumed, the guest counts on;
// - the agent SIGKILLed in the upload of a snapshot and of a shelve (Glance frozen, so the upload
//   waits), then started again: each completes from the journal, with one active image in Glance,
//   no copy left on the host, and for the shelve no allocation, guest or disk on any host;
// - a snapshot of a running guest (createImage): an active image in Glance with nova's properties,
//   from which a new server boots and counts; backups (createBackup) rotated down to `rotation`;
// - shelve and unshelve of a guest on the tenant network: SHELVED_OFFLOADED on no host, with no
//   allocation, no QEMU and no instance directory on either host, its port kept but unbound; then
//   ACTIVE again on a host, booted from the shelved image, its port bound there, the image gone;
//   its disk put back on its own image, it live-migrates to the other host;
// - shelve on an agent with `shelved_offload_time = -1`: SHELVED on its host, its QEMU gone but its
//   disk and allocation kept; unshelve (nova's conductor casts start_instance) runs it again
//   there, ACTIVE, and the snapshot image is deleted;
// - rescue and unrescue of the net guest: RESCUE, the rescue system reads, on its second disk, the
//   token the guest wrote on its own disk; ACTIVE again, booted from its own disk, token intact;
// - changePassword: the net guest (its image asks for QEMU's guest agent) gets root's new password
//   through qemu-ga, its crypt(3) hash on the console matching the password sent, and a snapshot of
//   it is quiesced (frozen through qemu-ga, then thawed); the tick guest (no agent) is refused with
//   409, left ACTIVE with no task;
// - soft delete through the cloud's soft-deleting nova-api (reclaim_instance_interval): SOFT_DELETED
//   with its QEMU gone and its disk and allocation kept; restored, ACTIVE and booted again; soft-
//   deleted once more, deleted for good by its host once the interval is over (no server, no
//   allocation, no disk).
//
// The cloud is shared with the other files of test/integration/cloud (test/helpers/cloud.ts).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { SharedCloud, type ServerView } from '../../helpers/cloud';
import { neutronUnavailable } from '../../helpers/neutron-cloud';
import { HAVE_QEMU } from '../../helpers/qemu-hosts';
import { diskEvents } from '../../helpers/net-guest';
import { tickImage, ticks } from '../../helpers/tick-guest';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(900_000);
const log = (line: string): boolean => process.stdout.write(`cloud-server-actions: ${line}\n`);

const unavailable = HAVE_QEMU ? neutronUnavailable() : 'qemu-system-x86_64 / qemu-img not installed';
if (unavailable) log(`skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describe;

/** The pid of server `id`'s QEMU, or 0 when none runs. */
function qemuPid(id: string): number {
  try {
    return Number(execFileSync('pgrep', ['-f', `qemu-system.*${id}`], { encoding: 'utf8' }).trim().split('\n')[0] ?? 0);
  } catch {
    return 0;
  }
}

suite('server actions through nova’s API on real guests (scripts/cloud)', () => {
  let cloud: SharedCloud;
  let tick = '';
  const servers: string[] = [];
  const images: string[] = [];

  /** The net guest: it powers off on ACPI at once (the tick guest ignores it: a clean power off would wait out shutdown_timeout). */
  let netImage = '';

  /** Server `name` of `image` (the tick guest unless named) on `host`, once ACTIVE; deleted after the file. */
  const boot = async (name: string, host: string, image = tick, networks: unknown = 'none'): Promise<string> => {
    const s = await cloud.must<{ id: string }>('nova', 'POST', '/servers', { server: { name, flavorRef: 'ca-net', imageRef: image, networks, host } }, 'server', '2.74');
    servers.push(s.id);
    await cloud.settled<ServerView>(s.id, 'ACTIVE');
    return s.id;
  };
  /** Until the net guest of server `id` has booted far enough to act on ACPI. */
  const netGuestUp = (id: string): Promise<void> => waitUntil('the guest is up', async () => (await cloud.consoleOf(id, 100)).includes('net-guest: init'), 120_000);
  const count = async (id: string): Promise<number[]> => ticks((await cloud.consoleOf(id, 400)).replace(/\r/g, ''));
  const lastCount = async (id: string): Promise<number> => (await count(id)).at(-1) ?? -1;
  const countsPast = async (id: string, n: number): Promise<number> => {
    let last = -1;
    await waitUntil(`server ${id} counts past ${n}`, async () => (last = await lastCount(id)) > n, 60_000);
    return last;
  };
  const act = (id: string, body: Record<string, unknown>, microversion?: string): Promise<unknown> => cloud.must('nova', 'POST', `/servers/${id}/action`, body, undefined, microversion);
  /** The compute host's action event `event` of server `id`'s latest `action`, once one is recorded. */
  const actionEvent = async (id: string, action: string, event: string): Promise<{ finish_time: string | null; result: string | null } | undefined> => {
    const actions = await cloud.must<Array<{ action: string; request_id: string }>>('nova', 'GET', `/servers/${id}/os-instance-actions`, undefined, 'instanceActions');
    const latest = actions.find((a) => a.action === action);
    if (!latest) return undefined;
    const detail = await cloud.must<{ events?: Array<{ event: string; finish_time: string | null; result: string | null }> }>('nova', 'GET', `/servers/${id}/os-instance-actions/${latest.request_id}`, undefined, 'instanceAction', '2.51');
    return detail.events?.find((e) => e.event === event);
  };

  beforeAll(async () => {
    cloud = await SharedCloud.start(log);
    tick = await cloud.uploadImage(`tick-actions-${Date.now()}`, tickImage(), 'raw');
    netImage = (await cloud.must<Array<{ id: string }>>('glance', 'GET', '/v2/images?name=net-guest', undefined, 'images'))[0]?.id ?? '';
  });

  afterAll(async () => {
    for (const id of servers) await cloud?.call('nova', 'DELETE', `/servers/${id}`).catch(() => undefined);
    for (const id of servers) await waitUntil(`server ${id} is gone`, async () => (await cloud.server(id)) === undefined, 120_000).catch(() => undefined);
    for (const id of [tick, ...images].filter(Boolean)) await cloud?.call('glance', 'DELETE', `/v2/images/${id}`).catch(() => undefined);
    await cloud?.stop();
  });

  test('pause and unpause; suspend, the agent SIGKILLed and restarted, resume: the count stands still and then goes on from where it was; a crash dump is accepted', async () => {
    const [hostA = ''] = cloud.hosts;
    const id = await boot('actions-tick', hostA);
    const pid = qemuPid(id);
    await countsPast(id, 1);

    await act(id, { pause: null });
    expect(await cloud.settled(id, 'PAUSED', 60_000)).toMatchObject({ 'OS-EXT-STS:power_state': 3 });
    const paused = await lastCount(id);
    await new Promise((r) => setTimeout(r, 2000));
    expect(await lastCount(id)).toBe(paused);
    await act(id, { unpause: null });
    await cloud.settled(id, 'ACTIVE', 60_000);
    await countsPast(id, paused);
    expect(qemuPid(id)).toBe(pid);

    const t0 = Date.now();
    await act(id, { suspend: null });
    expect(await cloud.settled(id, 'SUSPENDED', 120_000)).toMatchObject({ 'OS-EXT-STS:power_state': 7 });
    log(`suspend through nova's API: ${Date.now() - t0} ms`);
    const suspended = await lastCount(id);
    expect(qemuPid(id)).toBe(0);
    process.kill(cloud.agentPid(hostA), 'SIGKILL');
    await cloud.restartAgent(hostA);
    expect(await cloud.server(id)).toMatchObject({ status: 'SUSPENDED', 'OS-EXT-STS:task_state': null });
    const t1 = Date.now();
    await act(id, { resume: null });
    expect(await cloud.settled(id, 'ACTIVE', 120_000)).toMatchObject({ 'OS-EXT-STS:power_state': 1 });
    log(`resume through nova's API: ${Date.now() - t1} ms`);
    await countsPast(id, suspended);
    const all = await count(id);
    expect(all.filter((n) => n === 0)).toHaveLength(1); // resumed, never booted again
    expect(all.slice(all.indexOf(suspended)).every((n, i) => n === suspended + i)).toBe(true); // no tick lost or repeated

    // No guest agent in the tick image: nova's 409, the server as it was.
    const refused = await cloud.call('nova', 'POST', `/servers/${id}/action`, { changePassword: { adminPass: 'not-set-1' } });
    expect(refused.status).toBe(409);
    expect(JSON.stringify(refused.body)).toMatch(/Guest agent is not enabled for the instance/);
    expect(await cloud.server(id)).toMatchObject({ status: 'ACTIVE', 'OS-EXT-STS:task_state': null });

    await act(id, { trigger_crash_dump: null }, '2.17');
    await waitUntil('the crash dump action finishes', async () => !!(await actionEvent(id, 'trigger_crash_dump', 'compute_trigger_crash_dump'))?.finish_time, 30_000);
    expect((await actionEvent(id, 'trigger_crash_dump', 'compute_trigger_crash_dump'))?.result).toBe('Success');
    expect(await cloud.server(id)).toMatchObject({ status: 'ACTIVE', 'OS-EXT-STS:task_state': null });
  });

  test('createImage of a running guest: an active qcow2 image with nova’s properties that boots and counts; createBackup twice with rotation 1 keeps one backup', async () => {
    const [hostA = '', hostB = ''] = cloud.hosts;
    const id = await boot('actions-snap', hostA);
    await countsPast(id, 1);
    const t0 = Date.now();
    const created = await cloud.call('nova', 'POST', `/servers/${id}/action`, { createImage: { name: `snap-${id.slice(0, 8)}` } }, '2.45');
    expect(created.status).toBe(202);
    const image = String((created.body as { image_id?: string }).image_id);
    images.push(image);
    await cloud.settled(id, 'ACTIVE', 120_000);
    const img = await cloud.must<Record<string, unknown>>('glance', 'GET', `/v2/images/${image}`);
    log(`snapshot through nova's API to an active image: ${Date.now() - t0} ms, ${String(img.size)} bytes`);
    expect(img).toMatchObject({ status: 'active', disk_format: 'qcow2', container_format: 'bare', image_type: 'snapshot', instance_uuid: id, image_location: 'snapshot', image_state: 'available' });
    expect(await countsPast(id, (await lastCount(id)))).toBeGreaterThan(0); // ran on

    await countsPast(await boot('from-snap', hostB, image), 1);

    const backups: string[] = [];
    for (const n of [1, 2]) {
      const r = await cloud.call('nova', 'POST', `/servers/${id}/action`, { createBackup: { name: `backup-${n}`, backup_type: 'daily', rotation: 1 } }, '2.45');
      expect(r.status).toBe(202);
      backups.push(String((r.body as { image_id?: string }).image_id));
      images.push(backups.at(-1) ?? '');
      await cloud.settled(id, 'ACTIVE', 120_000);
    }
    const left = await cloud.must<Array<{ id: string }>>('glance', 'GET', `/v2/images?instance_uuid=${id}&image_type=backup`, undefined, 'images');
    expect(left.map((i) => i.id)).toEqual([backups[1]]);
  });

  test('shelve and unshelve through nova’s API: offloaded with nothing left on any host and the port unbound; unshelved, booted from the shelved image with the port bound again', async () => {
    const [hostA = ''] = cloud.hosts;
    const network = (await cloud.must<Array<{ id: string }>>('neutron', 'GET', '/networks?name=private', undefined, 'networks'))[0]?.id ?? '';
    const s = { id: await boot('actions-shelve', hostA, netImage, [{ uuid: network }]) };
    const booted = async (): Promise<boolean> => (await cloud.consoleOf(s.id, 100)).includes('net-guest: lease');
    await waitUntil('the guest has its lease', booted, 120_000);
    const port = (await cloud.must<Array<{ id: string }>>('neutron', 'GET', `/ports?device_id=${s.id}`, undefined, 'ports'))[0]?.id ?? '';
    /** The directories named after the server under the agents' instance paths. */
    const dirs = (): string => execFileSync('find', [join(cloud.env.CLOUD_DIR ?? '', 'hosts'), '/var/tmp', '-maxdepth', '4', '-name', `${s.id}*`], { encoding: 'utf8' }).trim();

    const t0 = Date.now();
    await act(s.id, { shelve: null });
    const shelved = await cloud.settled(s.id, 'SHELVED_OFFLOADED', 180_000);
    log(`shelve to SHELVED_OFFLOADED through nova's API: ${Date.now() - t0} ms`);
    expect(shelved['OS-EXT-SRV-ATTR:host']).toBeNull();
    expect(Object.keys(await cloud.must<Record<string, unknown>>('placement', 'GET', `/allocations/${s.id}`, undefined, 'allocations'))).toEqual([]);
    expect(qemuPid(s.id)).toBe(0);
    expect(dirs()).toBe('');
    expect(await cloud.must<Record<string, unknown>>('neutron', 'GET', `/ports/${port}`, undefined, 'port')).toMatchObject({ device_id: s.id, 'binding:host_id': '' });
    const image = (await cloud.must<Array<{ id: string; status: string }>>('glance', 'GET', `/v2/images?instance_uuid=${s.id}&image_type=snapshot`, undefined, 'images'))[0];
    expect(image?.status).toBe('active');
    images.push(image?.id ?? '');

    const t1 = Date.now();
    await act(s.id, { unshelve: null });
    const back = await cloud.settled(s.id, 'ACTIVE', 180_000);
    log(`unshelve to ACTIVE through nova's API: ${Date.now() - t1} ms, on ${back['OS-EXT-SRV-ATTR:host'] ?? '?'}`);
    const host = back['OS-EXT-SRV-ATTR:host'] ?? '';
    expect(cloud.hosts).toContain(host);
    await waitUntil('the unshelved guest booted and has its lease', booted, 120_000);
    expect(await cloud.must<Record<string, unknown>>('neutron', 'GET', `/ports/${port}`, undefined, 'port')).toMatchObject({ device_id: s.id, 'binding:host_id': host });
    await waitUntil('the port is ACTIVE again', async () => (await cloud.must<{ status: string }>('neutron', 'GET', `/ports/${port}`, undefined, 'port')).status === 'ACTIVE', 60_000);
    const held = await cloud.must<Record<string, unknown>>('placement', 'GET', `/allocations/${s.id}`, undefined, 'allocations');
    expect(Object.keys(held)).toHaveLength(1);
    expect((await cloud.call('glance', 'GET', `/v2/images/${image?.id ?? ''}`)).status).toBe(404);

    // Its disk was put back on its own image, so it moves though the snapshot is gone from Glance.
    const other = cloud.hosts.find((h) => h !== host) ?? '';
    await act(s.id, { 'os-migrateLive': { host: other, block_migration: 'auto' } }, '2.74');
    await waitUntil('the live migration ends', async () => (await cloud.server(s.id))?.['OS-EXT-STS:task_state'] === null, 180_000);
    expect(await cloud.settled(s.id, 'ACTIVE', 60_000)).toMatchObject({ 'OS-EXT-SRV-ATTR:host': other });
    expect(qemuPid(s.id)).toBeGreaterThan(0);
  });

  test('rescue and unrescue through nova’s API: the rescue system sees the guest’s own disk as its second disk; unrescued, the guest boots from it again; changePassword sets root’s password through the guest agent; a snapshot is quiesced', async () => {
    const [, hostB = ''] = cloud.hosts;
    const s = { id: await boot('actions-rescue', hostB, netImage) };
    /** The disk events of the guest's last boot, and how many boots the console shows. */
    const lastBoot = async (): Promise<{ boots: number; events: ReturnType<typeof diskEvents> }> => {
      const parts = (await cloud.consoleOf(s.id, 400)).split('net-guest: init');
      return { boots: parts.length - 1, events: diskEvents(parts.at(-1) ?? '') };
    };
    const holds = (events: ReturnType<typeof diskEvents>, disk: string, kind: 'read' | 'wrote', token?: string): string | undefined => {
      for (const e of events) if (e.disk === disk && e.kind === kind && (token === undefined || e.token === token)) return e.token;
      return undefined;
    };
    let token = '';
    await waitUntil('the guest wrote its token on its own disk', async () => (token = holds((await lastBoot()).events, 'vda', 'wrote') ?? '') !== '', 120_000);

    const t0 = Date.now();
    await act(s.id, { rescue: null });
    await cloud.settled(s.id, 'RESCUE', 120_000);
    log(`rescue through nova's API: ${Date.now() - t0} ms`);
    await waitUntil('the rescue system reads the token on its second disk', async () => holds((await lastBoot()).events, 'vdb', 'read', token) !== undefined, 120_000);
    const rescued = (await lastBoot()).boots;

    await act(s.id, { unrescue: null });
    await cloud.settled(s.id, 'ACTIVE', 120_000);
    let after = await lastBoot();
    await waitUntil('the guest boots from its own disk again, the token intact', async () => (after = await lastBoot()).boots > rescued && holds(after.events, 'vda', 'read', token) !== undefined, 120_000);
    expect(after.events.some((e) => e.disk === 'vdb')).toBe(false);

    // The net guest's image sets hw_qemu_guest_agent: qemu-ga runs on its channel after each boot.
    const lastBootText = async (): Promise<string> => (await cloud.consoleOf(s.id, 400)).split('net-guest: init').at(-1) ?? '';
    await waitUntil('qemu-ga runs in the guest', async () => (await lastBootText()).includes('net-guest: qemu-ga on'), 60_000);
    const password = `pw:${Date.now()} wörd`;
    const t1 = Date.now();
    await act(s.id, { changePassword: { adminPass: password } });
    let hash = '';
    await waitUntil('the guest reports its new root password', async () => (hash = /net-guest: password of root set: (\S+)/.exec(await lastBootText())?.[1] ?? '') !== '', 60_000);
    log(`changePassword through nova's API to the guest's /etc/shadow: ${Date.now() - t1} ms`);
    const salt = hash.split('$')[2] ?? '';
    expect(execFileSync('openssl', ['passwd', '-6', '-salt', salt, password], { encoding: 'utf8' }).trim()).toBe(hash);
    expect(await cloud.settled(s.id, 'ACTIVE', 30_000)).toMatchObject({ 'OS-EXT-STS:task_state': null });

    // A snapshot of it is quiesced: its filesystems frozen through qemu-ga for the copy's start, then thawed.
    const created = await cloud.call('nova', 'POST', `/servers/${s.id}/action`, { createImage: { name: `quiesced-${s.id.slice(0, 8)}` } }, '2.45');
    expect(created.status).toBe(202);
    images.push(String((created.body as { image_id?: string }).image_id));
    await cloud.settled(s.id, 'ACTIVE', 120_000);
    const agentSaid = cloud
      .agentLog(hostB)
      .split('\n')
      .filter((l) => l.includes(s.id))
      .map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(agentSaid).toEqual(expect.arrayContaining(['guest filesystems frozen for a snapshot', 'guest filesystems thawed']));
    expect(agentSaid.filter((m) => m === 'root disk copied for a snapshot')).toHaveLength(1);
  });

  test('the agent SIGKILLed in the middle of a suspend and started again: the suspend completes, SUSPENDED; resumed, the guest counts on', async () => {
    const [, hostB = ''] = cloud.hosts;
    const id = await boot('actions-kill', hostB);
    await countsPast(id, 1);
    const pid = qemuPid(id);
    // Frozen, QEMU answers nothing: the agent's suspend waits on it, with the task `suspending`.
    process.kill(pid, 'SIGSTOP');
    try {
      await act(id, { suspend: null });
      await waitUntil('the agent started the suspend', async () => (await actionEvent(id, 'suspend', 'compute_suspend_instance')) !== undefined, 30_000);
      process.kill(cloud.agentPid(hostB), 'SIGKILL');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await cloud.restartAgent(hostB);
    expect(await cloud.settled(id, 'SUSPENDED', 120_000)).toMatchObject({ 'OS-EXT-STS:power_state': 7 });
    expect(qemuPid(id)).toBe(0);
    const suspended = await lastCount(id);
    await act(id, { resume: null });
    await cloud.settled(id, 'ACTIVE', 120_000);
    await countsPast(id, suspended);
    expect((await count(id)).filter((n) => n === 0)).toHaveLength(1);
  });

  /**
   * Runs `start` (an action whose upload goes to an image nova's API made) with Glance frozen, so
   * the agent's upload waits; once nova shows `uploading`, SIGKILLs `host`'s agent, thaws Glance
   * and starts the agent again.
   */
  const killInUpload = async (id: string, host: string, uploading: string, start: () => Promise<void>): Promise<void> => {
    const glance = cloud.glanceApiPid();
    expect(glance).toBeGreaterThan(0);
    let frozen = false;
    try {
      await start();
      process.kill(glance, 'SIGSTOP');
      frozen = true;
      await waitUntil(`server ${id} is ${uploading}`, async () => (await cloud.server(id))?.['OS-EXT-STS:task_state'] === uploading, 120_000);
      await new Promise((r) => setTimeout(r, 500)); // the agent is in its request to Glance
      process.kill(cloud.agentPid(host), 'SIGKILL');
    } finally {
      if (frozen) process.kill(glance, 'SIGCONT');
    }
    await cloud.restartAgent(host);
  };
  const snapshotsOf = (id: string): Promise<Array<{ id: string; status: string }>> => cloud.must('glance', 'GET', `/v2/images?instance_uuid=${id}`, undefined, 'images');
  const copiesOn = (host: string): string[] => {
    const dir = join(cloud.instancesPath(host), 'snapshots');
    return existsSync(dir) ? readdirSync(dir) : [];
  };

  test('the agent SIGKILLed in a snapshot’s upload and started again: the snapshot completes, one active image, no copy left, the guest counts on', async () => {
    const [hostA = ''] = cloud.hosts;
    const id = await boot('actions-kill-snap', hostA);
    await countsPast(id, 1);
    let image = '';
    await killInUpload(id, hostA, 'image_uploading', async () => {
      const created = await cloud.call('nova', 'POST', `/servers/${id}/action`, { createImage: { name: `killed-snap-${id.slice(0, 8)}` } }, '2.45');
      expect(created.status).toBe(202);
      image = String((created.body as { image_id?: string }).image_id);
      images.push(image);
    });
    await cloud.settled(id, 'ACTIVE', 120_000);
    await waitUntil('the image is active', async () => (await cloud.must<{ status: string }>('glance', 'GET', `/v2/images/${image}`)).status === 'active', 60_000);
    expect((await snapshotsOf(id)).map((i) => [i.id, i.status])).toEqual([[image, 'active']]);
    expect(copiesOn(hostA)).toEqual([]);
    await countsPast(id, await lastCount(id));
  });

  test('the agent SIGKILLed in a shelve’s upload and started again: SHELVED_OFFLOADED with one active image, no allocation, and nothing of it on either host', async () => {
    const [, hostB = ''] = cloud.hosts;
    const s = { id: await boot('actions-kill-shelve', hostB, netImage) };
    await netGuestUp(s.id); // so the clean power off is quick
    await killInUpload(s.id, hostB, 'shelving_image_uploading', async () => {
      await act(s.id, { shelve: null });
    });
    expect(await cloud.settled(s.id, 'SHELVED_OFFLOADED', 180_000)).toMatchObject({ 'OS-EXT-SRV-ATTR:host': null });
    const shelvedImages = await snapshotsOf(s.id);
    images.push(...shelvedImages.map((i) => i.id));
    expect(shelvedImages.map((i) => i.status)).toEqual(['active']);
    expect(Object.keys(await cloud.must<Record<string, unknown>>('placement', 'GET', `/allocations/${s.id}`, undefined, 'allocations'))).toEqual([]);
    expect(qemuPid(s.id)).toBe(0);
    for (const host of cloud.hosts) {
      expect(execFileSync('find', [cloud.instancesPath(host), '-maxdepth', '2', '-name', `${s.id}*`], { encoding: 'utf8' }).trim()).toBe('');
      expect(copiesOn(host)).toEqual([]);
    }
  });

  test('shelved_offload_time = -1 on the host: SHELVED there with its disk and allocation; unshelved, it runs again on the same host and the snapshot image is gone', async () => {
    const [hostA = ''] = cloud.hosts;
    const restart = async (env: Record<string, string>): Promise<void> => {
      process.kill(cloud.agentPid(hostA), 'SIGTERM');
      await waitUntil('the agent stopped', async () => cloud.agentPid(hostA) === 0, 60_000);
      await cloud.restartAgent(hostA, env);
    };
    await restart({ COMPUTE_AGENT__DEFAULT__SHELVED_OFFLOAD_TIME: '-1' });
    try {
      const s = { id: await boot('actions-kept', hostA, netImage) };
      await netGuestUp(s.id);
      await act(s.id, { shelve: null });
      expect(await cloud.settled(s.id, 'SHELVED', 180_000)).toMatchObject({ 'OS-EXT-SRV-ATTR:host': hostA, 'OS-EXT-STS:power_state': 4 });
      expect(qemuPid(s.id)).toBe(0);
      expect(existsSync(join(cloud.instancesPath(hostA), s.id))).toBe(true);
      expect(Object.keys(await cloud.must<Record<string, unknown>>('placement', 'GET', `/allocations/${s.id}`, undefined, 'allocations'))).toHaveLength(1);
      const image = (await snapshotsOf(s.id))[0];
      expect(image?.status).toBe('active');

      await act(s.id, { unshelve: null });
      expect(await cloud.settled(s.id, 'ACTIVE', 180_000)).toMatchObject({ 'OS-EXT-SRV-ATTR:host': hostA });
      expect(qemuPid(s.id)).toBeGreaterThan(0);
      await waitUntil('the snapshot image is deleted', async () => (await cloud.call('glance', 'GET', `/v2/images/${image?.id ?? ''}`)).status === 404, 60_000);
    } finally {
      await restart({});
    }
  });

  test('soft delete through a nova-api with reclaim_instance_interval: SOFT_DELETED, QEMU gone, disk and allocation kept; restored, it boots again; soft-deleted again, its host deletes it for good after the interval', async () => {
    const [, hostB = ''] = cloud.hosts;
    const interval = Number(cloud.env.CLOUD_RECLAIM_INTERVAL);
    expect(interval).toBeGreaterThan(0);
    const id = await boot('actions-soft-delete', hostB);
    await countsPast(id, 1);
    const allocations = async (): Promise<number> => Object.keys(await cloud.must<Record<string, unknown>>('placement', 'GET', `/allocations/${id}`, undefined, 'allocations')).length;
    const diskKept = (): boolean => existsSync(join(cloud.instancesPath(hostB), id));

    await cloud.must('nova-soft-delete', 'DELETE', `/servers/${id}`);
    expect(await cloud.settled(id, 'SOFT_DELETED', 60_000)).toMatchObject({ 'OS-EXT-SRV-ATTR:host': hostB, 'OS-EXT-STS:power_state': 4 });
    expect(qemuPid(id)).toBe(0);
    expect(diskKept()).toBe(true);
    expect(await allocations()).toBe(1);

    await act(id, { restore: null });
    expect(await cloud.settled(id, 'ACTIVE', 60_000)).toMatchObject({ 'OS-EXT-SRV-ATTR:host': hostB, 'OS-EXT-STS:power_state': 1 });
    expect(qemuPid(id)).toBeGreaterThan(0);
    // Powered on again (nova's restore without a driver's own): a second boot, counting from 0.
    await waitUntil('the guest boots again and counts', async () => {
      const all = await count(id);
      return all.filter((n) => n === 0).length === 2 && (all.at(-1) ?? 0) > 0;
    }, 120_000);

    await cloud.must('nova-soft-delete', 'DELETE', `/servers/${id}`);
    await cloud.settled(id, 'SOFT_DELETED', 60_000);
    const softDeleted = Date.now();
    expect(qemuPid(id)).toBe(0);
    // The host's reclaim runs every interval (at most every 60 s), so the server goes between one and two intervals later.
    await waitUntil('the host reclaims the server', async () => (await cloud.server(id)) === undefined, (2 * interval + 60) * 1000);
    log(`reclaimed ${Date.now() - softDeleted} ms after it was SOFT_DELETED (reclaim_instance_interval ${interval} s)`);
    expect(Date.now() - softDeleted).toBeGreaterThanOrEqual((interval - 2) * 1000);
    expect(await allocations()).toBe(0);
    expect(diskKept()).toBe(false);
    expect(qemuPid(id)).toBe(0);
  });
});
