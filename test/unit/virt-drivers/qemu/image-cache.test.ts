import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { silentLogger } from '../../../../lib/logging/logger';
import type { Clock } from '../../../../lib/clock';
import type { GlanceApi, GlanceImage, ImageData } from '../../../../virt-drivers/glance/api';
import { GlanceNotFoundError, GlanceUnavailableError } from '../../../../virt-drivers/glance/errors';
import { ImageCache } from '../../../../virt-drivers/qemu/image-cache';
import { ImageChecksumError, ImageDownloadError, ImageError } from '../../../../virt-drivers/qemu/errors';

const ID = '11111111-2222-3333-4444-555555555555';
const DAY = 86_400_000;

/** An in-memory Glance serving one image's bytes in small chunks, counting the data calls. */
class FakeGlance implements GlanceApi {
  dataCalls = 0;
  metaCalls = 0;
  /** Bytes served in place of the image's (a corrupted store). */
  served: Buffer | undefined;
  /** Error the stream emits after its first chunk. */
  breakWith: Error | undefined;
  failMeta: Error | undefined;
  /** Resolves the data call's wait, so tests can pile up callers first. */
  gate: Promise<void> = Promise.resolve();

  constructor(
    readonly data: Buffer,
    public image: GlanceImage,
  ) {}

  async getImage(id: string): Promise<GlanceImage> {
    this.metaCalls++;
    if (this.failMeta) throw this.failMeta;
    if (id !== this.image.id) throw new GlanceNotFoundError(`GET /v2/images/${id}`);
    return this.image;
  }

  async openImageData(_id: string): Promise<ImageData> {
    this.dataCalls++;
    await this.gate;
    const bytes = this.served ?? this.data;
    const breakWith = this.breakWith;
    const chunks = Array.from({ length: Math.ceil(bytes.length / 1000) }, (_, i) => bytes.subarray(i * 1000, (i + 1) * 1000));
    const stream = new Readable({
      read(): void {
        const next = chunks.shift();
        if (breakWith && chunks.length < 2) this.destroy(breakWith);
        else this.push(next ?? null);
      },
    });
    return { stream, length: bytes.length };
  }
}

function imageOf(data: Buffer, over: Partial<GlanceImage> = {}): GlanceImage {
  return {
    id: ID,
    status: 'active',
    diskFormat: 'raw',
    size: data.length,
    checksum: createHash('md5').update(data).digest('hex'),
    osHashAlgo: 'sha512',
    osHashValue: createHash('sha512').update(data).digest('hex'),
    ...over,
  };
}

class ManualClock implements Clock {
  constructor(public t: number) {}
  now(): number {
    return this.t;
  }
  sleep(): Promise<void> {
    return Promise.resolve();
  }
}

function setup(over: Partial<GlanceImage> = {}, verify?: (id: string, path: string, format: 'raw' | 'qcow2') => Promise<void>) {
  const dir = join(mkdtempSync(join(tmpdir(), 'image-cache-')), '_base');
  const data = Buffer.alloc(10_000 + 77, 7);
  for (let i = 0; i < data.length; i += 13) data[i] = i % 251;
  const glance = new FakeGlance(data, imageOf(data, over));
  const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
  const cache = new ImageCache({ dir, minAgeMs: DAY }, { glance, clock, logger: silentLogger(), ...(verify ? { verify } : {}) });
  return { dir, data, glance, clock, cache };
}

describe('ImageCache', () => {
  test('ten concurrent fetches of one image share one download; the file holds exactly the data', async () => {
    const { dir, data, glance, cache } = setup();
    let open!: () => void;
    glance.gate = new Promise((r) => (open = r));
    const all = Array.from({ length: 10 }, () => cache.fetch(ID));
    open();
    const got = await Promise.all(all);
    expect(glance.dataCalls).toBe(1);
    expect(cache.downloads).toBe(1);
    expect(new Set(got.map((g) => g.path))).toEqual(new Set([join(dir, `${ID}.raw`)]));
    expect(got[0]).toEqual({ id: ID, path: join(dir, `${ID}.raw`), format: 'raw' });
    expect(readFileSync(join(dir, `${ID}.raw`)).equals(data)).toBe(true);
    expect(readdirSync(dir)).toEqual([`${ID}.raw`]);
  });

  test('a cached image is used without asking Glance again, even with Glance down', async () => {
    const { glance, cache } = setup();
    await cache.fetch(ID);
    glance.failMeta = new GlanceUnavailableError(`GET /v2/images/${ID}`, 'ECONNREFUSED');
    await expect(cache.fetch(ID)).resolves.toMatchObject({ format: 'raw' });
    expect(glance.dataCalls).toBe(1);
    expect(glance.metaCalls).toBe(1);
  });

  test('data that does not match os_hash_value fails with both hashes named, and leaves no file', async () => {
    const { dir, data, glance, cache } = setup();
    const bad = Buffer.from(data);
    bad[5000] = (bad[5000] ?? 0) ^ 0xff;
    glance.served = bad;
    const err = await cache.fetch(ID).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageChecksumError);
    const actual = createHash('sha512').update(bad).digest('hex');
    expect((err as ImageChecksumError).expected).toBe(glance.image.osHashValue);
    expect((err as ImageChecksumError).actual).toBe(actual);
    expect((err as Error).message).toBe(`image "${ID}": checksum mismatch (sha512 expected ${glance.image.osHashValue?.slice(0, 16)}..., got ${actual.slice(0, 16)}...)`);
    expect(readdirSync(dir)).toEqual([]);
    // The next caller tries again rather than sharing the failed download.
    glance.served = undefined;
    await expect(cache.fetch(ID)).resolves.toMatchObject({ format: 'raw' });
    expect(glance.dataCalls).toBe(2);
  });

  test('without a multihash the md5 checksum is checked', async () => {
    const { dir, glance, cache } = setup({ osHashAlgo: null, osHashValue: null, checksum: '0'.repeat(32) });
    await expect(cache.fetch(ID)).rejects.toThrow(`image "${ID}": checksum mismatch (md5 expected 0000000000000000..., got `);
    expect(readdirSync(dir)).toEqual([]);
    glance.image = imageOf(glance.data, { osHashAlgo: null, osHashValue: null });
    await expect(cache.fetch(ID)).resolves.toMatchObject({ format: 'raw' });
  });

  test('a short download is a size mismatch; a stream broken midway leaves no partial file', async () => {
    const { dir, data, glance, cache } = setup();
    glance.served = data.subarray(0, 4000);
    await expect(cache.fetch(ID)).rejects.toThrow(`image "${ID}": size mismatch (Glance says ${data.length} bytes, got 4000)`);
    expect(readdirSync(dir)).toEqual([]);
    glance.served = undefined;
    glance.breakWith = new Error('socket hang up');
    const err = await cache.fetch(ID).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageDownloadError);
    expect((err as Error).message).toMatch(new RegExp(`^image "${ID}": download from Glance failed after \\d+ bytes: socket hang up$`));
    expect(readdirSync(dir)).toEqual([]);
  });

  test('a missing image, Glance down, an image not active or of another format fail naming why', async () => {
    const { glance, cache, dir } = setup();
    await expect(cache.fetch('99999999-2222-3333-4444-555555555555')).rejects.toThrow(
      'image "99999999-2222-3333-4444-555555555555": GET /v2/images/99999999-2222-3333-4444-555555555555: not found in Glance (404)',
    );
    glance.failMeta = new GlanceUnavailableError(`GET /v2/images/${ID}`, 'http://127.0.0.1:1: ECONNREFUSED');
    const down = await cache.fetch(ID).catch((e: unknown) => e);
    expect(down).toBeInstanceOf(ImageDownloadError);
    expect((down as Error).message).toBe(`image "${ID}": GET /v2/images/${ID}: Glance unavailable: http://127.0.0.1:1: ECONNREFUSED`);
    glance.failMeta = undefined;
    glance.image = { ...glance.image, status: 'queued' };
    await expect(cache.fetch(ID)).rejects.toThrow(`image "${ID}": Glance image status is queued, not active`);
    glance.image = { ...glance.image, status: 'active', diskFormat: 'vmdk' };
    await expect(cache.fetch(ID)).rejects.toThrow(`image "${ID}": disk_format vmdk is not supported (raw or qcow2)`);
    expect(glance.dataCalls).toBe(0);
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
  });

  test('a download refused by verify never enters the cache; verify sees the finished file', async () => {
    const seen: string[] = [];
    const { dir, data, cache } = setup({ diskFormat: 'qcow2' }, async (id, path, format) => {
      seen.push(`${format} ${readFileSync(path).equals(data)}`);
      throw new ImageError(id, 'Glance says disk_format qcow2, but the data is raw');
    });
    await expect(cache.fetch(ID)).rejects.toThrow(`image "${ID}": Glance says disk_format qcow2, but the data is raw`);
    expect(seen).toEqual(['qcow2 true']);
    expect(readdirSync(dir)).toEqual([]);
  });

  test('prune removes unused images not used for the minimum age, keeps used ones and refreshes their time', async () => {
    const { dir, glance, clock, cache } = setup();
    const other = '22222222-2222-3333-4444-555555555555';
    await cache.fetch(ID);
    glance.image = { ...glance.image, id: other };
    await cache.fetch(other);
    const pathA = join(dir, `${ID}.raw`);
    const pathB = join(dir, `${other}.raw`);
    // A dot-file left by a crashed download goes at once.
    const stray = join(dir, `.${ID}.0a1b2c.part`);
    writeFileSync(stray, 'half');
    clock.t += DAY - 1000;
    expect(await cache.prune(new Set())).toEqual([stray]);
    expect(existsSync(pathA) && existsSync(pathB)).toBe(true);
    clock.t += 2000;
    // A is in use: kept and touched; B is unused and a day old: removed.
    expect(await cache.prune(new Set([pathA]))).toEqual([pathB]);
    expect(statSync(pathA).mtimeMs).toBe(clock.t);
    clock.t += DAY - 1000;
    expect(await cache.prune(new Set())).toEqual([]);
    clock.t += 1000;
    expect(await cache.prune(new Set())).toEqual([pathA]);
    expect(readdirSync(dir)).toEqual([]);
  });

  test('a cache hit counts as a use: its age starts again', async () => {
    const { dir, clock, cache } = setup();
    await cache.fetch(ID);
    const path = join(dir, `${ID}.raw`);
    utimesSync(path, 0, 0);
    clock.t += 5000;
    await cache.fetch(ID);
    expect(statSync(path).mtimeMs).toBe(clock.t);
    expect(await cache.prune(new Set())).toEqual([]);
  });
});
