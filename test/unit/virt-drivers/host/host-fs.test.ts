import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HostReadError, RecordedSizesHostFs, RootedHostFs } from '../../../../virt-drivers/host/host-fs';

function tree(): string {
  const root = mkdtempSync(join(tmpdir(), 'hostfs-'));
  mkdirSync(join(root, 'sys/devices/pci0000:00/0000:00:03.0/net/eth0'), { recursive: true });
  mkdirSync(join(root, 'sys/class/net'), { recursive: true });
  writeFileSync(join(root, 'sys/devices/pci0000:00/0000:00:03.0/net/eth0/speed'), '25000\n');
  symlinkSync('../../devices/pci0000:00/0000:00:03.0/net/eth0', join(root, 'sys/class/net/eth0'));
  symlinkSync('/etc', join(root, 'sys/class/net/escape'));
  return root;
}

describe('RootedHostFs', () => {
  test('reads below the root; absent files are undefined, not errors', async () => {
    const fs = new RootedHostFs(tree());
    expect(await fs.read('/sys/class/net/eth0/speed')).toBe('25000\n');
    expect(await fs.readValue('/sys/class/net/eth0/speed')).toBe('25000');
    expect(await fs.read('/sys/class/net/eth1/speed')).toBeUndefined();
    expect(await fs.readValue('/sys/class/net/eth0/speed/x')).toBeUndefined(); // ENOTDIR
  });

  test('lists directories sorted, and absent ones as empty', async () => {
    const fs = new RootedHostFs(tree());
    expect(await fs.list('/sys/class/net')).toEqual(['escape', 'eth0']);
    expect(await fs.list('/sys/class/drm')).toEqual([]);
  });

  test('resolves links inside the tree to host paths; links leaving the tree resolve to nothing', async () => {
    const fs = new RootedHostFs(tree());
    expect(await fs.resolveLink('/sys/class/net/eth0')).toBe('/sys/devices/pci0000:00/0000:00:03.0/net/eth0');
    expect(await fs.resolveLink('/sys/class/net/escape')).toBeUndefined();
    expect(await fs.resolveLink('/sys/class/net/none')).toBeUndefined();
  });

  test('a read error other than absence is a HostReadError naming the path', async () => {
    const fs = new RootedHostFs(tree());
    const err = await fs.read('/sys/class/net').catch((e: unknown) => e); // EISDIR
    expect(err).toBeInstanceOf(HostReadError);
    expect((err as HostReadError).message).toBe('/sys/class/net: cannot be read (EISDIR)');
  });

  test('the real root measures real filesystems', async () => {
    const size = await new RootedHostFs('/').fsSize('/');
    expect(size.totalBytes).toBeGreaterThan(0);
    expect(size.availableBytes).toBeLessThanOrEqual(size.totalBytes);
  });
});

describe('RecordedSizesHostFs', () => {
  test('answers a path from its longest recorded prefix', async () => {
    const fs = new RecordedSizesHostFs(tree(), {
      '/': { totalBytes: 1, availableBytes: 1 },
      '/var/lib/nova': { totalBytes: 2, availableBytes: 2 },
    });
    expect((await fs.fsSize('/var/lib/nova/instances')).totalBytes).toBe(2);
    expect((await fs.fsSize('/var/lib/novax')).totalBytes).toBe(1);
    expect((await fs.fsSize('/')).totalBytes).toBe(1);
  });
});
