/**
 * Durable file replacement, kubelet's FileStore recipe plus the step it skips: write a dot-prefixed
 * temp file in the same directory, fsync it, rename it over the target, then fsync the directory so
 * the rename itself survives a power loss. A crash at any point leaves either the old file or the
 * new one, never a mix; a stray temp file is harmless (readers ignore dot-files).
 */
import { constants } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';

/** Writes `data` to `path` atomically and durably. @throws the underlying fs error */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o640): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  try {
    await fh.writeFile(data);
    await fh.datasync();
  } catch (e) {
    await fh.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw e;
  }
  await fh.close();
  try {
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
  await fsyncDir(dir);
}

/** fsyncs a directory, making renames and creations in it durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const d = await open(dir, constants.O_RDONLY);
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}
