/**
 * Fetching a cold-migrated instance's files from the source host into a local directory.
 *
 * The destination pulls: it knows its own instances_path, and `diskInfo` says where the files
 * are on the source. Two ways:
 * - local: the source directory is visible here, at the path the source reported, because
 *   instances_path is on shared storage, or both agents run on one machine. Files are copied
 *   (reflinked where the filesystem can).
 * - rsync: `rsync -a --sparse` over ssh from the source host (`address`, else its name), which
 *   needs ssh keys between compute hosts, as nova's libvirt driver does for its ssh/rsync
 *   transports. `--timeout` fails a stalled transfer.
 * `auto` picks local when the source directory exists here and holds this migration's record.
 *
 * It is: moving bytes. It is not: deciding which files make an instance (`diskInfo` lists them).
 */
import { constants } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Exec } from '../host/exec';
import { DiskTransferError } from './errors';
import { readRecord } from './instance-files';

/** One fetch of an instance's files. */
export interface FetchRequest {
  readonly uuid: string;
  readonly migration: string;
  /** Absolute path of the instance directory on the source. */
  readonly sourceDir: string;
  /** How to reach the source host over ssh. */
  readonly sourceAddress: string;
  /** File names in `sourceDir` to fetch. */
  readonly files: readonly string[];
  /** Local directory to fetch into (exists, empty). */
  readonly into: string;
}

/** Whether the source directory is visible here and holds this migration's source copy. */
export async function visibleLocally(req: Pick<FetchRequest, 'uuid' | 'migration' | 'sourceDir'>): Promise<boolean> {
  try {
    const rec = await readRecord(req.sourceDir);
    return rec?.uuid === req.uuid && rec.migration === req.migration && rec.task === 'resized-away';
  } catch {
    return false;
  }
}

/** Copies the files from a directory visible here. @throws DiskTransferError */
export async function fetchLocal(req: FetchRequest): Promise<void> {
  for (const f of req.files) {
    try {
      await copyFile(join(req.sourceDir, f), join(req.into, f), constants.COPYFILE_FICLONE);
    } catch (e) {
      throw new DiskTransferError(req.uuid, `copying ${join(req.sourceDir, f)}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`, { cause: e });
    }
  }
}

/** The rsync command line of a fetch (exported for tests). */
export function rsyncArgs(req: FetchRequest): string[] {
  const host = req.sourceAddress.includes(':') ? `[${req.sourceAddress}]` : req.sourceAddress;
  return [
    '-a',
    '--sparse',
    '--timeout=120',
    '-e',
    'ssh -o BatchMode=yes',
    ...req.files.map((f) => `--include=/${f}`),
    '--exclude=*',
    `${host}:${req.sourceDir}/`,
    `${req.into}/`,
  ];
}

/** Pulls the files with rsync over ssh. @throws DiskTransferError */
export async function fetchRsync(exec: Exec, req: FetchRequest): Promise<void> {
  try {
    await exec.run('rsync', rsyncArgs(req), { timeoutMs: 6 * 3600 * 1000 });
  } catch (e) {
    throw new DiskTransferError(req.uuid, `rsync from ${req.sourceAddress}: ${(e as Error).message}`, { cause: e });
  }
}

/** Fetches with the configured transport. @throws DiskTransferError */
export async function fetchInstanceFiles(exec: Exec, mode: 'auto' | 'local' | 'rsync', req: FetchRequest): Promise<'local' | 'rsync'> {
  const local = mode === 'local' || (mode === 'auto' && (await visibleLocally(req)));
  if (local) await fetchLocal(req);
  else await fetchRsync(exec, req);
  return local ? 'local' : 'rsync';
}
