// The qemu driver boots a guest from a Cinder RBD volume on a real single-node Ceph 18.2 (scripts/
// ceph-stack from the 2025.1 root, on a monitor port and STACK_DIR of this test's own): the tick
// guest is `rbd import`ed as Cinder's user, its cephx key is written as `ceph auth get-key` prints
// it into a secrets directory, and an instance with no image_ref and a volume with boot_index 0
// (connection_info shaped like Cinder's) boots from it through QEMU's librbd. The key is on no
// QEMU command line; a driver restart adopts the VM and a hard reboot starts it again from the
// record; a live migration to a second host opens the same volume there and the counter goes on.
// A key file open to others fails the spawn with one clear line and leaves no QEMU. Hot plug, on
// the net guest (a Linux guest whose disk loop reports its virtio disks on the console): a 1 GiB
// volume attached to a running guest appears in it and gets a pattern written, is extended and
// the guest sees the new size, is detached with the guest's consent (DEVICE_DELETED) leaving no
// node in QEMU, and attached to a guest on the other host reads the pattern back.
//
// Skipped, with the reason, only where the 2025.1 root cannot be had (as test/integration/stack/ceph-stack.test.ts).
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { shellAssignments } from '../../../../bench/cloud-api';
import { VolumeSecretError } from '../../../../virt-drivers/qemu/errors';
import type { InstanceSpec } from '../../../../virt-drivers/types';
import { consolePath, HAVE_QEMU, instanceSpec, processAlive, QemuTestBed, qemuPid, reapLeftovers, waitFor, waitTick, type TestHost } from '../../../helpers/qemu-hosts';
import { buildNetGuest, diskEvents, netGuestUnavailableReason, type DiskEvent } from '../../../helpers/net-guest';
import { rbdVolume } from '../../../helpers/rbd-volume';
import { release2025Unavailable } from '../../../helpers/release';
import { lastTick, tickImage } from '../../../helpers/tick-guest';
import { portFree } from '../../../helpers/wait';

jest.setTimeout(600_000);
const log = (line: string): boolean => process.stdout.write(`rbd-volumes: ${line}\n`);

const unavailable = HAVE_QEMU ? release2025Unavailable() : 'qemu-system-x86_64 / qemu-img not installed';
if (unavailable) log(`skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describe;

const REPO = join(__dirname, '..', '..', '..', '..');
const VOLUME = 'b007b007-0000-4000-8000-000000000001';

suite('qemu driver: booting from a Cinder RBD volume on a real Ceph', () => {
  const dir = mkdtempSync('/tmp/ca-rbdvol-');
  const secrets = join(dir, 'secrets');
  let port = 0;
  let env: Record<string, string> = {};
  let key = '';
  let bed: QemuTestBed;
  let a: TestHost;
  let b: TestHost;

  const ceph = (args: readonly string[], timeoutMs = 300_000): Promise<string> =>
    new Promise((resolve, reject) => {
      execFile('bash', [join(REPO, 'scripts', 'ceph-stack'), ...args], { env: { ...process.env, OPENSTACK_RELEASE: '2025.1', STACK_DIR: dir, CEPH_MON_PORT: String(port) }, timeout: timeoutMs }, (err, stdout, stderr) =>
        err ? reject(new Error(`ceph-stack ${args.join(' ')}: ${err.message}\n${stderr.split('\n').slice(-10).join('\n')}`)) : resolve(stdout),
      );
    });
  /** The root's rbd as Cinder's user, as cinder-volume would run it. */
  const asCinder = (...args: string[]): string =>
    execFileSync('bash', [join(REPO, 'scripts', 'release-root'), 'exec', '2025.1', 'rbd', '--conf', env.CEPH_CONF ?? '', '--id', 'cinder', '--keyring', env.CEPH_CINDER_KEYRING ?? '', ...args], {
      env: { ...process.env, STACK_DIR: dir },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  /** The spec nova would send: no image, the volume first in the boot order, as Cinder connects it (msgr1 port). */
  const bootFromVolume = (uuid: string): InstanceSpec => ({
    ...instanceSpec(uuid, { rootGb: 0 }),
    volumes: [rbdVolume(VOLUME, { pool: env.CEPH_POOL ?? 'volumes', ports: [String(port + 1)], secretUuid: env.CEPH_FSID ?? '', bootIndex: 0 })],
  });

  beforeAll(async () => {
    // Ports of this test's own (never Ceph's 3300/3301: a CI run on this machine may use them).
    for (const p of [3390, 3392, 3394, 3396, 3398]) {
      if ((await portFree(p)) && (await portFree(p + 1))) {
        port = p;
        break;
      }
    }
    if (port === 0) throw new Error('no free monitor port pair in 3390-3399');
    const t0 = Date.now();
    await ceph(['up']);
    log(`ceph-stack up on ${port}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    env = shellAssignments(await ceph(['env']));

    const image = join(dir, 'tick.img');
    writeFileSync(image, tickImage());
    asCinder('import', image, `${env.CEPH_POOL}/volume-${VOLUME}`);
    // The key exactly as `ceph auth get-key` prints it, named after the secret uuid Cinder sends
    // (its rbd_secret_uuid; the cluster's fsid when that is unset).
    key = await ceph(['ceph', 'auth', 'get-key', 'client.cinder']);
    expect(key).toMatch(/^[A-Za-z0-9+/]+=*$/);
    mkdirSync(secrets, { mode: 0o700 });
    writeFileSync(join(secrets, `${env.CEPH_FSID}.base64`), key, { mode: 0o600 });

    bed = new QemuTestBed();
    a = bed.host('host-a', { 'qemu.rbd_secrets_dir': secrets });
    b = bed.host('host-b', { 'qemu.rbd_secrets_dir': secrets });
    await a.driver.init('host-a');
    await b.driver.init('host-b');
  });

  afterAll(async () => {
    if (bed) {
      await a.driver.cleanupHost('host-a').catch(() => undefined);
      await b.driver.cleanupHost('host-b').catch(() => undefined);
      bed.cleanup();
    }
    if (port) await ceph(['reset']).catch((e: Error) => log(e.message));
    rmSync(dir, { recursive: true, force: true });
  });

  test('no image_ref, a volume with boot_index 0: the guest boots from RBD, the key is on no command line; restart, reboot and live migration keep the volume', async () => {
    const uuid = 'b007b007-1111-4111-8111-111111111111';
    const spec = bootFromVolume(uuid);
    const t0 = Date.now();
    await a.driver.spawn(spec);
    log(`spawn from an RBD volume: ${Date.now() - t0} ms`);
    expect(existsSync(join(a.instancesPath, uuid, 'disk.qcow2'))).toBe(false);
    // The tick guest's boot sector printing on COM1 is only on the RBD image.
    const t1 = Date.now();
    await waitTick(consolePath(a, uuid), 1, 60_000);
    log(`first ticks from the RBD boot disk: ${Date.now() - t1} ms after spawn`);

    const pid = qemuPid(a, uuid) as number;
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    expect(cmdline).toContain(`file=${secrets}/${env.CEPH_FSID}.base64,format=base64`);
    expect(cmdline).toContain('"driver":"rbd"');
    expect(cmdline).not.toContain(key);
    expect(cmdline).not.toContain(key.slice(0, 20));
    expect(cmdline).not.toContain('-drive');
    const qmp = await a.driver.monitor({ uuid, name: '' });
    const nodes = (await qmp.execute('query-named-block-nodes')) as Array<{ 'node-name': string; drv: string; image: { filename: string } }>;
    expect(nodes.find((n) => n['node-name'] === 'vol0-storage')).toMatchObject({ drv: 'rbd', image: { filename: expect.stringContaining(`volume-${VOLUME}`) } });

    // A new driver (an agent restart) adopts the VM; a hard reboot starts QEMU from the record.
    await a.driver.cleanupHost('host-a'); // the agent's stop: QMP let go, the VM left running
    const t3 = Date.now();
    a.restart();
    await a.driver.init('host-a');
    log(`restart and adoption: ${Date.now() - t3} ms`);
    expect(a.driver.recoveryReport()).toEqual([expect.objectContaining({ uuid, outcome: 'adopted' })]);
    const before = lastTick(consolePath(a, uuid)) ?? 0;
    const t4 = Date.now();
    await a.driver.reboot({ uuid, name: '' }, 'hard');
    log(`hard reboot: ${Date.now() - t4} ms`);
    expect(qemuPid(a, uuid)).not.toBe(pid);
    await waitFor('the counter to start again after the reboot', () => (lastTick(consolePath(a, uuid)) ?? before) < before, 30_000);
    await waitTick(consolePath(a, uuid), 1, 60_000);
    log(`hard reboot to the second tick from RBD: ${Date.now() - t4} ms`);

    // Live migration: the destination opens the same RBD image (no disk copy); the counter goes on.
    const d1 = await b.driver.checkCanLiveMigrateDestination(spec, a.ref);
    const d2 = await a.driver.checkCanLiveMigrateSource(spec, d1);
    expect(d2.block_migration).toBe(false);
    const d3 = await b.driver.preLiveMigration(spec, d2);
    expect(d3.nbd_port).toBeNull();
    const at = lastTick(consolePath(a, uuid)) ?? 0;
    const t2 = Date.now();
    await a.driver.liveMigration(spec, b.ref, d3);
    log(`live migration with the RBD volume: ${Date.now() - t2} ms`);
    await a.driver.postLiveMigration(spec, d3);
    await b.driver.postLiveMigrationAtDestination(spec, d3);
    const fresh = await waitTick(consolePath(b, uuid), 0, 30_000);
    expect(fresh).toBeGreaterThanOrEqual(at);
    expect(readFileSync(`/proc/${qemuPid(b, uuid) as number}/cmdline`, 'utf8')).not.toContain(key);

    const t5 = Date.now();
    await b.driver.destroy({ uuid, name: '' });
    log(`destroy: ${Date.now() - t5} ms`);
    expect(processAlive(qemuPid(b, uuid))).toBe(false);
    expect(reapLeftovers(bed.root)).toBe(0);
  });

  test('a key file readable by others fails the spawn with one line naming it, and no QEMU is left', async () => {
    const file = join(secrets, `${env.CEPH_FSID}.base64`);
    execFileSync('chmod', ['644', file]);
    const uuid = 'b007b007-2222-4222-8222-222222222222';
    try {
      const err = await a.driver.spawn(bootFromVolume(uuid)).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(VolumeSecretError);
      expect((err as Error).message).toBe(`instance ${uuid}: cephx key file ${file} is open to other users (mode 0644); chmod 600 ${file}`);
      expect((err as Error).message).not.toContain(key);
    } finally {
      execFileSync('chmod', ['600', file]);
    }
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);
    expect(reapLeftovers(bed.root)).toBe(0);
    expect(await a.driver.listInstances()).toEqual([]);
  });

  const hotplugSkip = netGuestUnavailableReason();
  (hotplugSkip ? test.skip : test)('hot plug into a Linux guest: attach, write, extend, detach; attach on the other host reads the data back', async () => {
    const DATA = 'da7ada7a-0000-4000-8000-000000000002';
    copyFileSync(buildNetGuest().image, join(bed.images, 'net-guest.qcow2'));
    asCinder('create', '--size', '1024', `${env.CEPH_POOL}/volume-${DATA}`);
    const data = (): ReturnType<typeof rbdVolume> => rbdVolume(DATA, { pool: env.CEPH_POOL ?? 'volumes', ports: [String(port + 1)], secretUuid: env.CEPH_FSID ?? '', deviceName: '/dev/vdb' });
    const guest = (uuid: string): InstanceSpec => instanceSpec(uuid, { image: 'net-guest.qcow2', memoryMb: 128 });
    const disks = (host: TestHost, uuid: string): DiskEvent[] => (existsSync(consolePath(host, uuid)) ? diskEvents(readFileSync(consolePath(host, uuid), 'utf8')) : []);
    const until = async (what: string, host: TestHost, uuid: string, pick: (e: DiskEvent) => boolean, timeoutMs = 60_000): Promise<DiskEvent> => {
      let found: DiskEvent | undefined;
      await waitFor(what, () => (found = disks(host, uuid).find(pick)) !== undefined, timeoutMs);
      return found as DiskEvent;
    };
    const serial = DATA.slice(0, 20);
    const volumeNodes = async (host: TestHost, uuid: string): Promise<string[]> => {
      const nodes = (await (await host.driver.monitor({ uuid, name: '' })).execute('query-named-block-nodes')) as Array<{ 'node-name': string }>;
      return nodes.map((n) => n['node-name']).filter((n) => n.startsWith('vol'));
    };

    const one = 'da7a0001-1111-4111-8111-111111111111';
    await a.driver.spawn(guest(one));
    await until('the guest to report its boot disk', a, one, (e) => e.disk === 'vda' && e.kind === 'seen', 120_000);
    let t = Date.now();
    await a.driver.attachVolume({ uuid: one, name: '' }, data());
    log(`attach (driver): ${Date.now() - t} ms`);
    const seen = await until('the guest to see the hot-plugged volume', a, one, (e) => e.kind === 'seen' && e.serial === serial);
    expect(seen).toMatchObject({ bytes: 1024 * 1024 * 1024 });
    log(`attach to the guest seeing it: ${Date.now() - t} ms`);
    const wrote = await until('the guest to write its pattern', a, one, (e) => e.disk === seen.disk && (e.kind === 'wrote' || e.kind === 'write failed'));
    expect(wrote.kind).toBe('wrote');
    const token = (wrote as { token: string }).token;
    expect(await volumeNodes(a, one)).toEqual(expect.arrayContaining(['vol0-storage', 'vol0-format']));
    expect(readFileSync(`/proc/${qemuPid(a, one) as number}/cmdline`, 'utf8')).not.toContain(DATA);

    // Extend: Cinder grows the image first, then nova's volume-extended event resizes the node.
    asCinder('resize', '--size', '2048', `${env.CEPH_POOL}/volume-${DATA}`);
    await a.driver.extendVolume({ uuid: one, name: '' }, DATA, 2 * 1024 * 1024 * 1024);
    await until('the guest to see the new size', a, one, (e) => e.disk === seen.disk && e.kind === 'size' && e.bytes === 2 * 1024 * 1024 * 1024);

    t = Date.now();
    await a.driver.detachVolume({ uuid: one, name: '' }, DATA);
    log(`detach (driver, the guest's DEVICE_DELETED included): ${Date.now() - t} ms`);
    await until('the guest to lose the disk', a, one, (e) => e.disk === seen.disk && e.kind === 'gone');
    expect(await volumeNodes(a, one)).toEqual([]);

    // The same volume in a guest on the other host: the pattern is there.
    const two = 'da7a0002-2222-4222-8222-222222222222';
    await b.driver.spawn(guest(two));
    await until('the second guest to report its boot disk', b, two, (e) => e.disk === 'vda' && e.kind === 'seen', 120_000);
    await b.driver.attachVolume({ uuid: two, name: '' }, data());
    const there = await until('the second guest to see the volume', b, two, (e) => e.kind === 'seen' && e.serial === serial);
    expect(there).toMatchObject({ bytes: 2 * 1024 * 1024 * 1024 });
    const back = await until('the second guest to read the data block', b, two, (e) => e.disk === there.disk && (e.kind === 'read' || e.kind === 'wrote'));
    expect(back).toEqual({ disk: there.disk, kind: 'read', token });

    await a.driver.destroy({ uuid: one, name: '' });
    await b.driver.destroy({ uuid: two, name: '' });
    expect(reapLeftovers(bed.root)).toBe(0);
  });
  // swap_volume's driver part: the disk a running guest wrote its pattern to is copied onto a new
  // RBD image while the guest runs; the guest's device ends on the slot's nodes over the new image
  // and no temporary node is left; the new volume, attached to a guest on the other host, has the data.
  (hotplugSkip ? test.skip : test)('swap a running guest’s volume onto another RBD image; the other host reads the data from the new one', async () => {
    const SRC = 'da7ada7a-0000-4000-8000-000000000003';
    const DST = 'da7ada7a-0000-4000-8000-000000000004';
    copyFileSync(buildNetGuest().image, join(bed.images, 'net-guest.qcow2'));
    asCinder('create', '--size', '1024', `${env.CEPH_POOL}/volume-${SRC}`);
    asCinder('create', '--size', '1024', `${env.CEPH_POOL}/volume-${DST}`);
    const vol = (id: string): ReturnType<typeof rbdVolume> => rbdVolume(id, { pool: env.CEPH_POOL ?? 'volumes', ports: [String(port + 1)], secretUuid: env.CEPH_FSID ?? '', deviceName: '/dev/vdb' });
    const guest = (uuid: string): InstanceSpec => instanceSpec(uuid, { image: 'net-guest.qcow2', memoryMb: 128 });
    const until = async (what: string, host: TestHost, uuid: string, pick: (e: DiskEvent) => boolean, timeoutMs = 60_000): Promise<DiskEvent> => {
      let found: DiskEvent | undefined;
      await waitFor(what, () => (found = (existsSync(consolePath(host, uuid)) ? diskEvents(readFileSync(consolePath(host, uuid), 'utf8')) : []).find(pick)) !== undefined, timeoutMs);
      return found as DiskEvent;
    };
    const volumeNodes = async (uuid: string): Promise<Array<[string, string]>> => {
      const nodes = (await (await a.driver.monitor({ uuid, name: '' })).execute('query-named-block-nodes')) as Array<{ 'node-name': string; file: string }>;
      return nodes.filter((n) => n['node-name'].startsWith('vol')).map((n) => [n['node-name'], n.file]);
    };
    const one = 'da7a0003-3333-4333-8333-333333333333';
    await a.driver.spawn(guest(one));
    await until('the guest to report its boot disk', a, one, (e) => e.disk === 'vda' && e.kind === 'seen', 120_000);
    await a.driver.attachVolume({ uuid: one, name: '' }, vol(SRC));
    const seen = await until('the guest to see the volume', a, one, (e) => e.kind === 'seen' && e.serial === SRC.slice(0, 20));
    const wrote = await until('the guest to write its pattern', a, one, (e) => e.disk === seen.disk && (e.kind === 'wrote' || e.kind === 'write failed'));
    expect(wrote.kind).toBe('wrote');
    const t = Date.now();
    await a.driver.swapVolume({ uuid: one, name: '' }, SRC, vol(DST));
    log(`swap (driver, a full copy of 1 GiB included): ${Date.now() - t} ms`);
    const nodes = await volumeNodes(one);
    expect(nodes.map(([n]) => n).sort()).toEqual(['vol0-format', 'vol0-storage']);
    expect(nodes.every(([, file]) => file.includes(`volume-${DST}`))).toBe(true);
    expect(processAlive(qemuPid(a, one))).toBe(true);
    await a.driver.detachVolume({ uuid: one, name: '' }, DST);
    expect(await volumeNodes(one)).toEqual([]);

    const two = 'da7a0004-4444-4444-8444-444444444444';
    await b.driver.spawn(guest(two));
    await until('the second guest to report its boot disk', b, two, (e) => e.disk === 'vda' && e.kind === 'seen', 120_000);
    await b.driver.attachVolume({ uuid: two, name: '' }, vol(DST));
    const there = await until('the second guest to see the new volume', b, two, (e) => e.kind === 'seen' && e.serial === DST.slice(0, 20));
    const back = await until('the second guest to read the data block', b, two, (e) => e.disk === there.disk && (e.kind === 'read' || e.kind === 'wrote'));
    expect(back).toEqual({ disk: there.disk, kind: 'read', token: (wrote as { token: string }).token });
    await a.driver.destroy({ uuid: one, name: '' });
    await b.driver.destroy({ uuid: two, name: '' });
    expect(reapLeftovers(bed.root)).toBe(0);
  });
});
