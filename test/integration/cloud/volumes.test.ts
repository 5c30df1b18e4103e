// Servers and Cinder volumes on Ceph, through nova's and Cinder's own APIs, on the whole small
// cloud of scripts/cloud (Keystone, Placement, Glance, nova 31, Neutron 2025.1, Cinder 2025.1 with
// the RBD driver on a single-node Ceph 18.2, two agents in nova mode). The guest is the net guest,
// whose disk loop reports its virtio disks on the console and keeps a token in each disk's data
// block (docs/net-guest.md, "Disks"):
// - Two servers, each booted from a 1 GiB volume nova asks the agent to make from the test
//   guest's image (block_device_mapping_v2: image → volume, boot index 0), one volume marked
//   delete_on_termination and one not: both ACTIVE, each volume in-use with one attachment on the
//   host the server runs on, its RBD image in the pool; the guest boots from it (QEMU has the rbd
//   node and no local disk) and writes its token on it; the cephx key is on no command line and
//   in no agent log line. A hard reboot of one and a stop/start of the other boot the guest again
//   from the volume, and it reads back the token it wrote.
// - A snapshot of one of them (createImage of a server booted from a volume): the guest, whose
//   image asks for QEMU's guest agent, quiesced through qemu-ga while Cinder snapshots its volume
//   and thawed once the snapshot is taken; the image names the volume snapshot.
// - A 1 GiB data volume attached to the running server on one host appears in its guest, which
//   writes a token; extended to 2 GiB through Cinder (in-use extend, nova's volume-extended
//   event), the guest sees the new size; detached, the guest loses the disk and the volume is
//   available; attached to the server on the other host, that guest reads the same token. Both
//   hosts report COMPUTE_VOLUME_EXTEND.
// - That server, with its root volume and the data volume, live-migrates while its guest writes a
//   sequence to the data volume and reads each number back from the disk: no write lost, the same
//   guest goes on at the destination, each volume attached only there. A cold migration reverted,
//   then one confirmed: each time the attachments follow the guest, whose new boot reads both
//   tokens back.
// - Delete: the delete_on_termination volume is gone from Cinder and Ceph, the other volumes are
//   available with no attachment; no QEMU is left for either server.
// - Shelve of a server with a data volume: offloaded, the volume stays reserved for it (one
//   attachment, on no host); a second volume attached while it is offloaded; unshelved, the guest
//   sees both, reads back the token it wrote on the first, and both are in-use on its new host.
//
// The cloud is shared with the other files of test/integration/cloud (test/helpers/cloud.ts).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runScript } from '../../../bench/cloud-api';
import { SharedCloud, type ServerView } from '../../helpers/cloud';
import { diskEvents, type DiskEvent } from '../../helpers/net-guest';
import { neutronUnavailable } from '../../helpers/neutron-cloud';
import { HAVE_QEMU } from '../../helpers/qemu-hosts';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(1_200_000);
const log = (line: string): boolean => process.stdout.write(`cloud-volumes: ${line}\n`);

const unavailable = HAVE_QEMU ? neutronUnavailable() : 'qemu-system-x86_64 / qemu-img not installed';
if (unavailable) log(`skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describe;

interface Server extends ServerView {
  'os-extended-volumes:volumes_attached': Array<{ id: string; delete_on_termination: boolean }>;
}
interface Volume {
  id: string;
  status: string;
  size: number;
  attachments: Array<{ server_id: string; host_name: string | null; device: string }>;
}

suite('servers booted from Cinder volumes on Ceph through nova’s API (scripts/cloud)', () => {
  let cloud: SharedCloud;
  let network = '';
  let image = '';
  const servers: string[] = [];

  const show = (id: string): Promise<Server | undefined> => cloud.server<Server>(id, '2.79');
  const settled = (id: string, status: string, ms?: number): Promise<Server> => cloud.settled<Server>(id, status, ms, '2.79');
  const volume = async (id: string): Promise<Volume | undefined> => {
    const r = await cloud.call('cinder', 'GET', `/volumes/${id}`);
    return r.status === 404 ? undefined : (r.body.volume as Volume);
  };
  const consoleOf = (id: string): Promise<string> => cloud.consoleOf(id, 200);
  const boots = async (id: string): Promise<number> => (await consoleOf(id)).split('net-guest: init').length - 1;
  const disks = async (id: string): Promise<DiskEvent[]> => diskEvents(await consoleOf(id));
  /** The first disk line of server `id`'s guest that `pick` takes, once there is one. */
  const diskLine = async (what: string, id: string, pick: (e: DiskEvent) => boolean, ms = 120_000): Promise<DiskEvent> => {
    let found: DiskEvent | undefined;
    await waitUntil(what, async () => (found = (await disks(id)).find(pick)) !== undefined, ms);
    return found as DiskEvent;
  };
  /** The token the guest of `id` wrote on, or read from, disk `disk` (the last such line). */
  const tokenOf = async (id: string, disk: string): Promise<DiskEvent | undefined> => (await disks(id)).filter((e) => e.disk === disk && (e.kind === 'wrote' || e.kind === 'read')).at(-1);
  const rbdImages = async (): Promise<string[]> => (await runScript('ceph-stack', ['rbd', 'ls', 'volumes'], 60_000)).split('\n').filter(Boolean);
  const qemuOf = (id: string): string[] => {
    try {
      return execFileSync('pgrep', ['-f', `qemu-system.*${id}`], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
    } catch {
      return [];
    }
  };
  const volumeSettled = async (id: string, status: string, ms = 120_000): Promise<Volume> => {
    let v: Volume | undefined;
    await waitUntil(`volume ${id} is ${status}`, async () => (v = await volume(id))?.status === status, ms);
    return v as Volume;
  };

  async function bootFromVolume(name: string, host: string, deleteOnTermination: boolean): Promise<string> {
    const created = await cloud.must<{ id: string }>('nova', 'POST', '/servers', {
      server: {
        name,
        flavorRef: 'ca-net',
        networks: [{ uuid: network }],
        security_groups: [{ name: 'ca-guests' }],
        host,
        block_device_mapping_v2: [{ source_type: 'image', uuid: image, destination_type: 'volume', volume_size: 1, boot_index: 0, delete_on_termination: deleteOnTermination }],
      },
    }, 'server', '2.74');
    servers.push(created.id);
    return created.id;
  }

  beforeAll(async () => {
    cloud = await SharedCloud.start(log);
    network = (await cloud.must<Array<{ id: string }>>('neutron', 'GET', '/networks?name=private', undefined, 'networks'))[0]?.id ?? '';
    image = (await cloud.must<Array<{ id: string }>>('glance', 'GET', '/v2/images?name=net-guest', undefined, 'images'))[0]?.id ?? '';
    expect(image).not.toBe('');
    expect(network).not.toBe('');
  });

  afterAll(async () => {
    for (const id of servers) await cloud?.call('nova', 'DELETE', `/servers/${id}`).catch(() => undefined);
    for (const id of servers) await waitUntil(`server ${id} is gone`, async () => (await show(id)) === undefined, 120_000).catch(() => undefined);
    if (data) await cloud?.call('cinder', 'DELETE', `/volumes/${data}`).catch(() => undefined);
    await cloud?.stop();
  });

  const GiB = 1024 * 1024 * 1024;
  let gone = '';
  let kept = '';
  const rootVolumes = new Map<string, string>();
  let data = '';

  test('booted from volumes made from the guest’s image: ACTIVE, in-use on their hosts, the guest boots from Ceph and keeps its data over a hard reboot and a stop/start; the key on no command line', async () => {
    const [hostA, hostB] = cloud.hosts;
    if (!hostA || !hostB) throw new Error('the cloud has fewer than two hosts');
    const t0 = Date.now();
    gone = await bootFromVolume('bfv-delete', hostA, true);
    kept = await bootFromVolume('bfv-keep', hostB, false);
    const byId = new Map<string, Server>();
    for (const id of [gone, kept]) byId.set(id, await settled(id, 'ACTIVE'));
    log(`two servers booted from new volumes to ACTIVE: ${((Date.now() - t0) / 1000).toFixed(1)} s`);

    const tokens = new Map<string, string>();
    for (const [id, s] of byId) {
      const attached = s['os-extended-volumes:volumes_attached'];
      expect(attached).toHaveLength(1);
      expect(attached[0]?.delete_on_termination).toBe(id === gone);
      const vid = attached[0]?.id ?? '';
      rootVolumes.set(id, vid);
      const v = await volume(vid);
      expect(v).toMatchObject({ status: 'in-use' });
      expect(v?.attachments).toEqual([expect.objectContaining({ server_id: id, host_name: s['OS-EXT-SRV-ATTR:host'], device: '/dev/vda' })]);
      expect(await rbdImages()).toContain(`volume-${vid}`);
      // The guest booted from the volume and wrote its token on it.
      const root = await diskLine(`the guest of ${id} to see its boot volume`, id, (e) => e.disk === 'vda' && e.kind === 'seen', 180_000);
      expect(root).toMatchObject({ serial: vid.slice(0, 20), bytes: GiB });
      const wrote = await diskLine(`the guest of ${id} to write its token`, id, (e) => e.disk === 'vda' && (e.kind === 'wrote' || e.kind === 'write failed'));
      expect(wrote.kind).toBe('wrote');
      tokens.set(id, (wrote as { token: string }).token);
      // QEMU opens the volume through librbd; the instance has no local disk; the key is a file's only.
      const [pid] = qemuOf(id);
      const cmdline = readFileSync(`/proc/${pid ?? 0}/cmdline`, 'utf8').split('\0').join(' ');
      expect(cmdline).toContain(`"image":"volume-${vid}"`);
      expect(cmdline).not.toContain('disk.qcow2');
      const host = s['OS-EXT-SRV-ATTR:host'] ?? '';
      const secrets = join(cloud.env.CLOUD_DIR ?? '', 'hosts', host, 'secrets');
      const key = readFileSync(join(secrets, readdirSync(secrets).find((f) => f.endsWith('.base64')) ?? ''), 'utf8');
      expect(key.length).toBeGreaterThan(20);
      expect(cmdline).not.toContain(key);
      expect(cloud.agentLog(host)).not.toContain(key);
    }

    // A hard reboot of one and a stop/start of the other, at once: each guest boots again from its
    // volume and reads back the token it wrote before.
    const t1 = Date.now();
    await cloud.must('nova', 'POST', `/servers/${gone}/action`, { reboot: { type: 'HARD' } });
    await cloud.must('nova', 'POST', `/servers/${kept}/action`, { 'os-stop': null });
    await settled(kept, 'SHUTOFF');
    await cloud.must('nova', 'POST', `/servers/${kept}/action`, { 'os-start': null });
    for (const id of [gone, kept]) {
      await waitUntil(`the guest of ${id} booted again`, async () => (await boots(id)) >= 2, 180_000);
      await settled(id, 'ACTIVE');
      await diskLine(`the guest of ${id} to read its token back`, id, (e) => e.disk === 'vda' && e.kind === 'read');
      expect(await tokenOf(id, 'vda')).toEqual({ disk: 'vda', kind: 'read', token: tokens.get(id) });
    }
    log(`hard reboot and stop/start to the tokens read back: ${((Date.now() - t1) / 1000).toFixed(1)} s`);
  });

  test('createImage of a server booted from a volume: its guest quiesced through qemu-ga while Cinder snapshots the volume, thawed once the snapshot is taken', async () => {
    const host = (await show(kept))?.['OS-EXT-SRV-ATTR:host'] ?? '';
    await waitUntil('qemu-ga runs in the guest', async () => ((await consoleOf(kept)).split('net-guest: init').at(-1) ?? '').includes('net-guest: qemu-ga on'), 60_000);
    const created = await cloud.call('nova', 'POST', `/servers/${kept}/action`, { createImage: { name: `bfv-snap-${kept.slice(0, 8)}` } }, '2.45');
    expect(created.status).toBe(202);
    const image = String((created.body as { image_id?: string }).image_id);
    const said = (): string[] =>
      cloud
        .agentLog(host)
        .split('\n')
        .filter((l) => l.includes(kept))
        .map((l) => (JSON.parse(l) as { msg: string }).msg);
    await waitUntil('the agent thaws the guest after the volume snapshot', async () => said().includes('unquiesced after its volume snapshots'), 120_000);
    const msgs = said();
    expect(msgs.indexOf('quiesced for a volume snapshot')).toBeGreaterThanOrEqual(0);
    expect(msgs.indexOf('quiesced for a volume snapshot')).toBeLessThan(msgs.lastIndexOf('unquiesced after its volume snapshots'));
    const img = await cloud.must<{ block_device_mapping?: string }>('glance', 'GET', `/v2/images/${image}`);
    const snapshotId = (JSON.parse(img.block_device_mapping ?? '[]') as Array<{ snapshot_id?: string }>).find((m) => m.snapshot_id)?.snapshot_id ?? '';
    expect(snapshotId).not.toBe('');
    await waitUntil('the volume snapshot is available', async () => (await cloud.must<{ status: string }>('cinder', 'GET', `/snapshots/${snapshotId}`, undefined, 'snapshot')).status === 'available', 60_000);
    expect(await settled(kept, 'ACTIVE')).toBeDefined();
    await cloud.call('glance', 'DELETE', `/v2/images/${image}`);
    await cloud.call('cinder', 'DELETE', `/snapshots/${snapshotId}`);
    await waitUntil('the volume snapshot is deleted', async () => (await cloud.call('cinder', 'GET', `/snapshots/${snapshotId}`)).status === 404, 60_000);
  });

  test('a data volume: attached live it appears in the guest, which writes to it; extended, the guest sees it grow; detached, then attached on the other host, that guest reads the data back', async () => {
    const [hostA, hostB] = cloud.hosts;
    // Both hosts tell the scheduler they can extend an attached volume.
    for (const h of [hostA, hostB]) {
      const rps = await cloud.must<Array<{ uuid: string }>>('placement', 'GET', `/resource_providers?name=${h ?? ''}`, undefined, 'resource_providers', '1.6');
      const traits = await cloud.must<string[]>('placement', 'GET', `/resource_providers/${rps[0]?.uuid ?? ''}/traits`, undefined, 'traits', '1.6');
      expect(traits).toContain('COMPUTE_VOLUME_EXTEND');
    }
    data = (await cloud.must<{ id: string }>('cinder', 'POST', '/volumes', { volume: { size: 1, name: 'ca-data' } }, 'volume')).id;
    await volumeSettled(data, 'available');
    const serial = data.slice(0, 20);

    // Attach to the server on host A: the guest gets a new disk and writes its token.
    let t = Date.now();
    await cloud.must('nova', 'POST', `/servers/${gone}/os-volume_attachments`, { volumeAttachment: { volumeId: data } }, 'volumeAttachment');
    const attached = await volumeSettled(data, 'in-use');
    expect(attached.attachments).toEqual([expect.objectContaining({ server_id: gone, host_name: hostA, device: '/dev/vdb' })]);
    const seen = await diskLine('the guest to see the attached volume', gone, (e) => e.kind === 'seen' && e.serial === serial);
    expect(seen).toMatchObject({ disk: 'vdb', bytes: GiB });
    log(`attach through nova to the guest seeing the disk: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    const wrote = await diskLine('the guest to write its token on the data volume', gone, (e) => e.disk === 'vdb' && (e.kind === 'wrote' || e.kind === 'write failed'));
    expect(wrote.kind).toBe('wrote');
    const token = (wrote as { token: string }).token;

    // Extend while attached (Cinder 3.42): Cinder grows the RBD image, nova casts volume-extended.
    t = Date.now();
    await cloud.must('cinder', 'POST', `/volumes/${data}/action`, { 'os-extend': { new_size: 2 } }, undefined, '3.42');
    await diskLine('the guest to see the volume grow', gone, (e) => e.disk === 'vdb' && e.kind === 'size' && e.bytes === 2 * GiB, 180_000);
    expect(await volumeSettled(data, 'in-use')).toMatchObject({ size: 2 });
    log(`extend through Cinder to the guest seeing the new size: ${((Date.now() - t) / 1000).toFixed(1)} s`);

    // Detach: the guest lets the disk go, the volume is free.
    t = Date.now();
    await cloud.must('nova', 'DELETE', `/servers/${gone}/os-volume_attachments/${data}`);
    expect(await volumeSettled(data, 'available')).toMatchObject({ attachments: [] });
    await diskLine('the guest to lose the disk', gone, (e) => e.disk === 'vdb' && e.kind === 'gone');
    log(`detach through nova to available: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    expect((await show(gone))?.['os-extended-volumes:volumes_attached'].map((v) => v.id)).toEqual([rootVolumes.get(gone)]);

    // The same volume on the server of the other host: its guest reads the token.
    await cloud.must('nova', 'POST', `/servers/${kept}/os-volume_attachments`, { volumeAttachment: { volumeId: data } }, 'volumeAttachment');
    expect((await volumeSettled(data, 'in-use')).attachments).toEqual([expect.objectContaining({ server_id: kept, host_name: hostB })]);
    const there = await diskLine('the other guest to see the volume', kept, (e) => e.kind === 'seen' && e.serial === serial);
    expect(there).toMatchObject({ bytes: 2 * GiB });
    await diskLine('the other guest to read the data block', kept, (e) => e.disk === there.disk && (e.kind === 'read' || e.kind === 'wrote'));
    expect(await tokenOf(kept, there.disk)).toEqual({ disk: there.disk, kind: 'read', token });
  });

  test('moves with a root volume and a data volume: live migration while the guest writes loses nothing; cold migration reverted, then confirmed; attachments only on the host that has the guest', async () => {
    const [hostA, hostB] = cloud.hosts;
    const root = rootVolumes.get(kept) ?? '';
    const dataDisk = (await disks(kept)).find((e) => e.kind === 'seen' && e.serial === data.slice(0, 20))?.disk ?? 'vdb';
    /** Each volume has one attachment, on `host`, to the server. */
    const attachedOn = async (host: string | undefined): Promise<void> => {
      for (const vid of [root, data]) {
        const v = await volumeSettled(vid, 'in-use');
        expect(v.attachments).toEqual([expect.objectContaining({ server_id: kept, host_name: host })]);
      }
    };
    const seqs = async (): Promise<number[]> => (await disks(kept)).flatMap((e) => (e.disk === dataDisk && e.kind === 'seq' ? [e.seq] : []));
    /** The `seq lost` lines; when there are any, the console's disk and boot lines go to the log first, to tell the cause. */
    const lostWrites = async (): Promise<DiskEvent[]> => {
      const text = await consoleOf(kept);
      const lost = diskEvents(text).filter((e) => e.kind === 'seq lost');
      if (lost.length > 0) log(`seq lost; the guest's console (disk and boot lines):\n${text.split('\n').filter((l) => /net-guest: (init|disk|power)/.test(l) && !/ seq \d+\r?$/.test(l)).join('\n')}`);
      return lost;
    };
    // The last boot's lines: a cold migration carries the console along, so look after the last init line.
    const lastBoot = async (): Promise<DiskEvent[]> => diskEvents((await consoleOf(kept)).split('net-guest: init').at(-1) ?? '');
    await attachedOn(hostB);

    // Live migration B -> A while the guest writes its sequence to the data volume every second.
    await waitUntil('the guest to be writing its sequence', async () => (await seqs()).length > 0, 60_000);
    const before = Math.max(...(await seqs()));
    expect(await lostWrites()).toEqual([]);
    let t = Date.now();
    await cloud.must('nova', 'POST', `/servers/${kept}/action`, { 'os-migrateLive': { host: hostA, block_migration: 'auto' } }, undefined, '2.74');
    await waitUntil('the server runs on the destination', async () => {
      const s = await show(kept);
      if (s?.status === 'ERROR') throw new Error(`live migration failed: ${s.fault?.message ?? '(no fault)'}`);
      return s?.status === 'ACTIVE' && s['OS-EXT-STS:task_state'] === null && s['OS-EXT-SRV-ATTR:host'] === hostA;
    }, 300_000);
    log(`live migration with two volumes to ACTIVE: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    // The same guest goes on writing and reading back on the destination: no boot (the console is
    // the destination QEMU's own, so it has no init line), nothing lost.
    await waitUntil('the guest to write 20 more numbers on the destination', async () => (await seqs()).some((n) => n >= before + 20), 120_000);
    const bootsThere = await boots(kept);
    if (bootsThere !== 0) log(`the guest booted on the destination; the console's lines other than its sequence:\n${(await consoleOf(kept)).split('\n').filter((l) => !/ seq \d+\r?$/.test(l)).slice(-40).join('\n')}`);
    expect(bootsThere).toBe(0);
    expect(await lostWrites()).toEqual([]);
    await attachedOn(hostA);
    expect(qemuOf(kept)).toHaveLength(1);

    // Cold migration A -> B, reverted: the guest is back on A with its volumes there.
    t = Date.now();
    await cloud.must('nova', 'POST', `/servers/${kept}/action`, { migrate: { host: hostB } }, undefined, '2.56');
    expect((await settled(kept, 'VERIFY_RESIZE'))['OS-EXT-SRV-ATTR:host']).toBe(hostB);
    await attachedOn(hostB);
    await cloud.must('nova', 'POST', `/servers/${kept}/action`, { revertResize: null });
    expect((await settled(kept, 'ACTIVE'))['OS-EXT-SRV-ATTR:host']).toBe(hostA);
    await attachedOn(hostA);
    log(`cold migration and revert with two volumes: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    // The guest restarted on A reads both tokens back. Waiting for it also lets it boot before the
    // next move: a guest still booting misses the ACPI power button, and the source's power off
    // then waits out the clean-shutdown timeout (60 s) before it stops the guest hard.
    await waitUntil('the guest back on A to read both tokens', async () => (await lastBoot()).filter((e) => e.kind === 'read').length >= 2, 120_000);

    // Cold migration A -> B, confirmed: on B, its guest reads both tokens back.
    t = Date.now();
    await cloud.must('nova', 'POST', `/servers/${kept}/action`, { migrate: { host: hostB } }, undefined, '2.56');
    await settled(kept, 'VERIFY_RESIZE');
    await cloud.must('nova', 'POST', `/servers/${kept}/action`, { confirmResize: null });
    expect((await settled(kept, 'ACTIVE'))['OS-EXT-SRV-ATTR:host']).toBe(hostB);
    await attachedOn(hostB);
    log(`cold migration and confirm with two volumes: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    expect(await boots(kept)).toBeGreaterThanOrEqual(1);
    await waitUntil('the guest on B to read both tokens', async () => (await lastBoot()).filter((e) => e.kind === 'read').length >= 2, 120_000);
    expect((await lastBoot()).filter((e) => e.kind === 'wrote')).toEqual([]);
    expect(await lostWrites()).toEqual([]);
    expect(qemuOf(kept)).toHaveLength(1);
  });

  test('delete: the delete_on_termination volume is gone from Cinder and Ceph, the others are available with no attachment, no QEMU is left', async () => {
    const [hostA, hostB] = cloud.hosts;
    for (const id of [gone, kept]) await cloud.must('nova', 'DELETE', `/servers/${id}`);
    for (const id of [gone, kept]) await waitUntil(`server ${id} is gone`, async () => (await show(id)) === undefined, 120_000);
    const goneVolume = rootVolumes.get(gone) ?? '';
    const keptVolume = rootVolumes.get(kept) ?? '';
    await waitUntil('the delete_on_termination volume is gone from Cinder', async () => (await volume(goneVolume)) === undefined, 120_000);
    expect(await rbdImages()).not.toContain(`volume-${goneVolume}`);
    for (const vid of [keptVolume, data]) {
      expect(await volumeSettled(vid, 'available')).toMatchObject({ attachments: [] });
      expect(await rbdImages()).toContain(`volume-${vid}`);
    }
    for (const id of [gone, kept]) expect(qemuOf(id)).toEqual([]);
    for (const h of [hostA ?? '', hostB ?? '']) for (const id of [gone, kept]) expect(existsSync(join(cloud.env.CLOUD_DIR ?? '', 'hosts', h, 'instances', id))).toBe(false);
    for (const vid of [keptVolume, data]) await cloud.must('cinder', 'DELETE', `/volumes/${vid}`);
  });

  test('shelve with a data volume: offloaded, the volume stays reserved on no host; another attached meanwhile; unshelved, the guest has both and reads its token back', async () => {
    const [hostA = ''] = cloud.hosts;
    const made = await cloud.must<{ id: string }>('nova', 'POST', '/servers', { server: { name: 'vol-shelve', flavorRef: 'ca-net', imageRef: image, networks: 'none', host: hostA } }, 'server', '2.74');
    servers.push(made.id);
    await settled(made.id, 'ACTIVE');
    const vols: string[] = [];
    const newVolume = async (name: string): Promise<string> => {
      const id = (await cloud.must<{ id: string }>('cinder', 'POST', '/volumes', { volume: { size: 1, name } }, 'volume')).id;
      vols.push(id);
      await volumeSettled(id, 'available');
      return id;
    };
    const first = await newVolume('ca-shelve-1');
    await cloud.must('nova', 'POST', `/servers/${made.id}/os-volume_attachments`, { volumeAttachment: { volumeId: first } }, 'volumeAttachment');
    await volumeSettled(first, 'in-use');
    const seen = await diskLine('the guest to see the volume', made.id, (e) => e.kind === 'seen' && e.serial === first.slice(0, 20));
    const wrote = await diskLine('the guest to write its token', made.id, (e) => e.disk === seen.disk && (e.kind === 'wrote' || e.kind === 'write failed'));
    expect(wrote.kind).toBe('wrote');
    const token = (wrote as { token: string }).token;

    let t = Date.now();
    await cloud.must('nova', 'POST', `/servers/${made.id}/action`, { shelve: null });
    expect(await settled(made.id, 'SHELVED_OFFLOADED', 180_000)).toMatchObject({ 'OS-EXT-SRV-ATTR:host': null });
    log(`shelve with a volume to SHELVED_OFFLOADED: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    expect(qemuOf(made.id)).toEqual([]);
    await volumeSettled(first, 'reserved');
    // Cinder's volume view lists only attached attachments; its attachments API lists the reservation.
    const left = await cloud.must<Array<{ instance: string; status: string }>>('cinder', 'GET', `/attachments?volume_id=${first}`, undefined, 'attachments', '3.27');
    expect(left).toEqual([expect.objectContaining({ instance: made.id, status: 'reserved' })]);

    const second = await newVolume('ca-shelve-2');
    await cloud.must('nova', 'POST', `/servers/${made.id}/os-volume_attachments`, { volumeAttachment: { volumeId: second } }, 'volumeAttachment', '2.79');
    // nova-api completes that attachment without a connector (in-use, on no host); unshelve connects it.
    await volumeSettled(second, 'in-use');

    t = Date.now();
    await cloud.must('nova', 'POST', `/servers/${made.id}/action`, { unshelve: null });
    const back = await settled(made.id, 'ACTIVE', 180_000);
    log(`unshelve with two volumes to ACTIVE: ${((Date.now() - t) / 1000).toFixed(1)} s on ${back['OS-EXT-SRV-ATTR:host'] ?? '?'}`);
    const host = back['OS-EXT-SRV-ATTR:host'];
    for (const v of [first, second]) {
      const vol = await volumeSettled(v, 'in-use');
      expect(vol.attachments).toEqual([expect.objectContaining({ server_id: made.id, host_name: host })]);
      expect(vol.attachments[0]?.device).toMatch(/^\/dev\/vd[b-z]$/);
      await diskLine(`the unshelved guest to see volume ${v}`, made.id, (e) => e.kind === 'seen' && e.serial === v.slice(0, 20));
    }
    const again = (await disks(made.id)).filter((e) => e.kind === 'seen' && e.serial === first.slice(0, 20)).at(-1);
    await diskLine('the unshelved guest to read its token', made.id, (e) => e.disk === again?.disk && e.kind === 'read' && (e as { token: string }).token === token);
    expect(back['os-extended-volumes:volumes_attached'].map((v) => v.id).sort()).toEqual([first, second].sort());

    await cloud.must('nova', 'DELETE', `/servers/${made.id}`);
    await waitUntil('the server is gone', async () => (await show(made.id)) === undefined, 120_000);
    for (const v of vols) {
      expect(await volumeSettled(v, 'available')).toMatchObject({ attachments: [] });
      await cloud.must('cinder', 'DELETE', `/volumes/${v}`);
    }
  });
});
