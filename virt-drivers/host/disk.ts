/**
 * Disk probe: the size of the filesystem holding `[DEFAULT] instances_path` (DISK_GB).
 *
 * Source: statfs(2) through `HostFs.fsSize` (Node's asynchronous `fs.promises.statfs`). When
 * instances_path does not exist yet (a fresh host), its nearest existing ancestor is measured:
 * that is the filesystem the directory will be created on. systeminformation's `fsSize()` is not
 * used: it runs `df` and reads /proc/mounts with execSync, and lists every mount instead of
 * answering for one path.
 */
import { posix } from 'node:path';
import type { DiskFacts } from './facts';
import type { HostFs } from './host-fs';
import type { Probe, ProbeResult } from './probe';

const GIB = 1024 ** 3;

/** `path` itself when it exists, else its nearest existing ancestor. */
export async function nearestExisting(fs: HostFs, path: string): Promise<string> {
  let cur = posix.normalize(path);
  while (cur !== '/' && !(await fs.isDirectory(cur))) cur = posix.dirname(cur);
  return cur;
}

export const diskProbe: Probe<DiskFacts> = {
  name: 'disk',
  async run({ fs, options }): Promise<ProbeResult<DiskFacts>> {
    const path = options.instancesPath;
    const measuredPath = await nearestExisting(fs, path);
    const size = await fs.fsSize(measuredPath);
    const totalGb = Math.floor(size.totalBytes / GIB);
    if (totalGb < 1) return { detected: false, reason: `the filesystem of ${measuredPath} is smaller than 1 GiB` };
    return { detected: true, data: { path, measuredPath, totalGb, availableGb: Math.floor(size.availableBytes / GIB) } };
  },
};
