// The qemu driver's images from a real Glance (Debian's glance-api, private port, no keystone):
// ten concurrent builds of one image download it once (glance-api's log holds one GET of its
// data), a guest boots from a Glance qcow2 image through the host's cache, a corrupted image
// (the file store's bytes changed behind Glance's back) fails the build with a fault naming the
// checksum mismatch and leaves nothing, as do a missing image and a Glance that is down; unused
// cached images go when the cache manager runs; a cold migration fetches the image on the destination.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImageChecksumError, ImageDownloadError } from '../../../../virt-drivers/qemu/errors';
import { PrivateGlance } from '../../../helpers/glance';
import { tickImage } from '../../../helpers/tick-guest';
import { consolePath, describeWithQemu, instanceSpec, migration, QemuTestBed, waitTick, type TestHost } from '../../../helpers/qemu-hosts';

const uuidN = (n: number): string => `9a1ce000-0000-4000-8000-${String(n).padStart(12, '0')}`;

describeWithQemu('qemu driver: images from Glance', () => {
  let glance: PrivateGlance;
  let bed: QemuTestBed;
  let a: TestHost;
  let rawId: string;
  let qcowId: string;
  const work = mkdtempSync(join(tmpdir(), 'ca-glance-img-'));

  beforeAll(async () => {
    glance = await PrivateGlance.start();
    rawId = await glance.upload('tick-raw', tickImage(), 'raw');
    const rawFile = join(work, 'tick.img');
    const qcowFile = join(work, 'tick.qcow2');
    writeFileSync(rawFile, tickImage());
    execFileSync('qemu-img', ['convert', '-q', '-f', 'raw', '-O', 'qcow2', rawFile, qcowFile]);
    qcowId = await glance.upload('tick-qcow2', readFileSync(qcowFile), 'qcow2');
    bed = new QemuTestBed();
    a = bed.host('glance-a', { 'glance.endpoint_override': glance.url, 'glance.num_retries': '0', 'image_cache.manager_interval': '-1', 'image_cache.remove_unused_original_minimum_age_seconds': '0' });
    await a.driver.init('glance-a');
  });

  afterAll(async () => {
    await a?.driver.cleanupHost('glance-a');
    bed?.cleanup();
    await glance?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const base = (): string => join(a.instancesPath, '_base');

  test('ten concurrent builds of one image: one GET of its data, ten overlays on the one cached file', async () => {
    expect(await glance.image(rawId)).toMatchObject({ status: 'active', os_hash_algo: 'sha512' });
    const uuids = Array.from({ length: 10 }, (_, i) => uuidN(i + 1));
    const t0 = Date.now();
    await Promise.all(uuids.map((u) => a.driver.spawn(instanceSpec(u, { image: rawId }), { powerOn: false })));
    const ms = Date.now() - t0;
    const cached = join(base(), `${rawId}.raw`);
    expect(glance.dataGets(rawId)).toBe(1);
    expect(readdirSync(base())).toEqual([`${rawId}.raw`]);
    expect(readFileSync(cached).equals(tickImage())).toBe(true);
    for (const u of uuids) {
      const info = JSON.parse(execFileSync('qemu-img', ['info', '-U', '--output=json', join(a.instancesPath, u, 'disk.qcow2')], { encoding: 'utf8' })) as Record<string, unknown>;
      expect(info['backing-filename']).toBe(cached);
      expect(info['backing-filename-format']).toBe('raw');
    }
    // An eleventh build later uses the cache: no new GET.
    await a.driver.spawn(instanceSpec(uuidN(11), { image: rawId }), { powerOn: false });
    expect(glance.dataGets(rawId)).toBe(1);
    for (const u of [...uuids, uuidN(11)]) await a.driver.destroy({ uuid: u, name: '' });
    console.log(`ten concurrent builds from Glance image ${rawId}: ${ms} ms, ${glance.dataGets(rawId)} GET of /v2/images/${rawId}/file`);
  });

  test('a guest boots from a Glance qcow2 image through the cache', async () => {
    const uuid = uuidN(20);
    await a.driver.spawn(instanceSpec(uuid, { image: qcowId }));
    await waitTick(consolePath(a, uuid), 1, 30_000);
    const qmp = await a.driver.monitor({ uuid, name: '' });
    const block = (await qmp.execute('query-block')) as Array<{ inserted?: { backing_file?: string } }>;
    expect(block[0]?.inserted?.backing_file).toBe(join(base(), `${qcowId}.qcow2`));
    expect(glance.dataGets(qcowId)).toBe(1);
    await a.driver.destroy({ uuid, name: '' });
  });

  test('a download of a large image is streamed and timed', async () => {
    const big = randomBytes(64 * 1024 * 1024);
    const id = await glance.upload('big-raw', big, 'raw');
    const uuid = uuidN(30);
    const t0 = Date.now();
    await a.driver.spawn(instanceSpec(uuid, { image: id }), { powerOn: false });
    const ms = Date.now() - t0;
    expect(readFileSync(join(base(), `${id}.raw`)).equals(big)).toBe(true);
    await a.driver.destroy({ uuid, name: '' });
    console.log(`64 MiB raw image: build (download, sha512, fsync, overlay) in ${ms} ms, ${((64 / ms) * 1000).toFixed(0)} MiB/s`);
  });

  test('a corrupted image fails the build with a fault naming the checksum mismatch, and leaves nothing', async () => {
    const id = await glance.upload('to-corrupt', tickImage(), 'raw');
    // Same size, one byte changed in Glance's file store: Glance serves bytes that do not match os_hash_value.
    const fd = openSync(glance.storedFile(id), 'r+');
    writeSync(fd, Buffer.from([0x42]), 0, 1, 4096);
    closeSync(fd);
    const uuid = uuidN(40);
    const err = await a.driver.spawn(instanceSpec(uuid, { image: id })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageChecksumError);
    const expected = String((await glance.image(id)).os_hash_value);
    expect((err as Error).message).toMatch(new RegExp(`^image "${id}": checksum mismatch \\(sha512 expected ${expected.slice(0, 16)}\\.\\.\\., got [0-9a-f]{16}\\.\\.\\.\\)$`));
    expect((err as ImageChecksumError).expected).toBe(expected);
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);
    expect(readdirSync(base()).filter((n) => n.includes(id))).toEqual([]);
  });

  test('a missing image and a Glance that is down fail naming why, and leave nothing', async () => {
    const missing = '0badbad0-0000-4000-8000-000000000000';
    const uuid = uuidN(50);
    const err = await a.driver.spawn(instanceSpec(uuid, { image: missing })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDownloadError);
    expect((err as Error).message).toBe(`image "${missing}": GET /v2/images/${missing}: not found in Glance (404)`);
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);

    const down = bed.host('glance-down', { 'glance.endpoint_override': 'http://127.0.0.1:9', 'glance.num_retries': '1', 'image_cache.manager_interval': '-1' });
    await down.driver.init('glance-down');
    const err2 = await down.driver.spawn(instanceSpec(uuid, { image: rawId })).catch((e: unknown) => e);
    expect(err2).toBeInstanceOf(ImageDownloadError);
    expect((err2 as Error).message).toBe(`image "${rawId}": GET /v2/images/${rawId}: Glance unavailable: http://127.0.0.1:9: ECONNREFUSED`);
    expect(existsSync(join(down.instancesPath, uuid))).toBe(false);
    expect(existsSync(join(down.instancesPath, '_base')) ? readdirSync(join(down.instancesPath, '_base')) : []).toEqual([]);
    await down.driver.cleanupHost('glance-down');
  });

  test('the cache manager keeps images in use and removes unused ones; local images_path files still work', async () => {
    const uuid = uuidN(60);
    await a.driver.spawn(instanceSpec(uuid, { image: rawId }), { powerOn: false });
    await a.driver.pruneImageCache();
    expect(existsSync(join(base(), `${rawId}.raw`))).toBe(true);
    expect(existsSync(join(base(), `${qcowId}.qcow2`))).toBe(false);
    await a.driver.destroy({ uuid, name: '' });
    await a.driver.pruneImageCache();
    expect(readdirSync(base())).toEqual([]);
    // A plain file name still means [qemu] images_path.
    await a.driver.spawn(instanceSpec(uuid, { image: 'tick.img' }), { powerOn: false });
    await a.driver.destroy({ uuid, name: '' });
  });

  test('a cold migration of a Glance-image instance: the destination fetches the image into its own cache', async () => {
    const b = bed.host('glance-b', { 'glance.endpoint_override': glance.url, 'glance.num_retries': '0', 'image_cache.manager_interval': '-1' });
    await b.driver.init('glance-b');
    const uuid = uuidN(70);
    const spec = instanceSpec(uuid, { image: qcowId });
    await a.driver.spawn(spec);
    await waitTick(consolePath(a, uuid), 0, 30_000);
    const gets = glance.dataGets(qcowId);
    const m = migration('d0d0d0d0-0000-4000-8000-000000000070', a, b);
    const disk = await a.driver.migrateDiskAndPowerOff(spec, m, spec.flavor);
    await b.driver.finishMigration(spec, m, disk);
    await waitTick(consolePath(b, uuid), 1, 30_000);
    const info = JSON.parse(execFileSync('qemu-img', ['info', '-U', '--output=json', join(b.instancesPath, uuid, 'disk.qcow2')], { encoding: 'utf8' })) as Record<string, unknown>;
    expect(info['backing-filename']).toBe(join(b.instancesPath, '_base', `${qcowId}.qcow2`));
    expect(glance.dataGets(qcowId)).toBe(gets + 1);
    await a.driver.confirmMigration(spec, m);
    expect(existsSync(join(a.instancesPath, `${uuid}_resize`))).toBe(false);
    await b.driver.destroy({ uuid, name: '' });
    await b.driver.cleanupHost('glance-b');
  });
});
