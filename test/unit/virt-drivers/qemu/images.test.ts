import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeExec } from '../../../helpers/fake-exec';
import { ImageError, InstanceFilesError } from '../../../../virt-drivers/qemu/errors';
import { Images } from '../../../../virt-drivers/qemu/images';
import type { ImageCache } from '../../../../virt-drivers/qemu/image-cache';

const GIB = 1024 ** 3;

describe('images', () => {
  const dir = mkdtempSync(join(tmpdir(), 'qemu-img-'));
  const raw = join(dir, 'tick.img');
  const vmdk = join(dir, 'odd.vmdk');
  writeFileSync(raw, 'x');
  writeFileSync(vmdk, 'x');
  const info = (path: string, doc: object): [string, { stdout: string }] => [`qemu-img info -U --output=json ${path}`, { stdout: JSON.stringify(doc) }];

  function images(withPath = true): { images: Images; exec: FakeExec } {
    const exec = new FakeExec(Object.fromEntries([info(raw, { format: 'raw', 'virtual-size': 1048576 }), info(vmdk, { format: 'vmdk', 'virtual-size': 1 })]));
    return { images: new Images({ qemuImg: 'qemu-img', ...(withPath ? { imagesPath: dir } : {}) }, exec), exec };
  }

  test('image_ref is an absolute path, or a plain name under images_path', async () => {
    expect(await images().images.resolve('tick.img')).toEqual({ path: raw, format: 'raw', virtualSize: 1048576 });
    expect(await images(false).images.resolve(raw)).toEqual({ path: raw, format: 'raw', virtualSize: 1048576 });
    await expect(images(false).images.resolve('tick.img')).rejects.toThrow('image "tick.img": not an absolute path, and [qemu] images_path is not set');
    await expect(images().images.resolve('../tick.img')).rejects.toThrow(/not a file name under \[qemu\] images_path/);
    await expect(images().images.resolve('absent.img')).rejects.toThrow(/absent.img cannot be read \(ENOENT\)/);
    await expect(images().images.resolve(dir)).rejects.toThrow(/is not a regular file/);
    await expect(images().images.resolve('odd.vmdk')).rejects.toThrow('image "odd.vmdk": format vmdk is not supported (raw or qcow2)');
  });

  test('an overlay names its backing format and the flavor size; a flavor disk smaller than the image is refused', async () => {
    const { images: im, exec } = images();
    const image = await im.resolve('tick.img');
    exec.set(`qemu-img create -q -f qcow2 -b ${raw} -F raw /i/disk.qcow2 ${2 * GIB}`, { stdout: '' });
    await im.createOverlay('/i/disk.qcow2', image, 2);
    exec.set(`qemu-img create -q -f qcow2 -b ${raw} -F raw /i/disk.qcow2`, { stdout: '' });
    await im.createOverlay('/i/disk.qcow2', image, 0);
    await expect(im.createOverlay('/i/disk.qcow2', { ...image, virtualSize: 3 * GIB }, 2)).rejects.toThrow(ImageError);
    await expect(im.rebase('/i/disk.qcow2', image)).rejects.toThrow(InstanceFilesError);
    expect(exec.calls.at(-1)?.args).toEqual(['rebase', '-u', '-f', 'qcow2', '-b', raw, '-F', 'raw', '/i/disk.qcow2']);
  });

  test('growTo grows, never shrinks', async () => {
    const { images: im, exec } = images();
    exec.set('qemu-img info -U --output=json /i/disk.qcow2', { stdout: JSON.stringify({ format: 'qcow2', 'virtual-size': GIB, 'full-backing-filename': raw }) });
    expect(await im.info('/i/disk.qcow2')).toEqual({ format: 'qcow2', virtualSize: GIB, backingFile: raw });
    exec.set(`qemu-img resize -q -f qcow2 /i/disk.qcow2 ${2 * GIB}`, { stdout: '' });
    await im.growTo('/i/disk.qcow2', 2);
    await im.growTo('/i/disk.qcow2', 1);
    await im.growTo('/i/disk.qcow2', 0);
    expect(exec.calls.filter((c) => c.args[0] === 'resize')).toHaveLength(1);
  });

  test('a Glance image id comes from the cache when Glance is configured; other refs stay local files', async () => {
    const id = '11111111-2222-3333-4444-555555555555';
    const cached = join(dir, `${id}.qcow2`);
    const fetched: string[] = [];
    const cache = { fetch: async (ref: string) => (fetched.push(ref), { id: ref, path: cached, format: 'qcow2' as const }) } as unknown as ImageCache;
    const exec = new FakeExec(Object.fromEntries([info(cached, { format: 'qcow2', 'virtual-size': 5 * GIB }), info(raw, { format: 'raw', 'virtual-size': 1048576 })]));
    const im = new Images({ qemuImg: 'qemu-img', imagesPath: dir }, exec, cache);
    expect(await im.resolve(id)).toEqual({ path: cached, format: 'qcow2', virtualSize: 5 * GIB });
    expect(await im.resolve('tick.img')).toEqual({ path: raw, format: 'raw', virtualSize: 1048576 });
    expect(fetched).toEqual([id]);
    // Without a cache a UUID is a file name under images_path, as before.
    await expect(new Images({ qemuImg: 'qemu-img', imagesPath: dir }, exec).resolve(id)).rejects.toThrow(
      /cannot be read \(ENOENT\); Glance is not configured: set \[glance\] endpoint_override, or keystone auth in \[placement\]$/,
    );
  });

  test('a download must be the format Glance declared, and a qcow2 may not name a backing file', async () => {
    const exec = new FakeExec(
      Object.fromEntries([
        info('/c/.a.part', { format: 'raw', 'virtual-size': 1 }),
        info('/c/.b.part', { format: 'qcow2', 'virtual-size': 1 }),
        info('/c/.c.part', { format: 'qcow2', 'virtual-size': 1, 'backing-filename': '/etc/shadow' }),
      ]),
    );
    const im = new Images({ qemuImg: 'qemu-img' }, exec);
    await expect(im.checkDownloaded('a', '/c/.a.part', 'raw')).resolves.toBeUndefined();
    await expect(im.checkDownloaded('b', '/c/.b.part', 'raw')).rejects.toThrow('image "b": Glance says disk_format raw, but the data is qcow2');
    await expect(im.checkDownloaded('c', '/c/.c.part', 'qcow2')).rejects.toThrow('image "c": the qcow2 image names a backing file (/etc/shadow); refused');
  });
});
