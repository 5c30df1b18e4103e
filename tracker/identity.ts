/**
 * The compute node's identity: the uuid of its root provider, read from `<state_path>/compute_id`
 * or created there once, as nova does since 2023.1 (`nova/virt/node.py`), so a host keeps its
 * provider (and its instances' allocations) when its hostname changes.
 *
 * It is: create-once. The file is written to a temporary name, fsynced, then linked into place
 * with `link(2)`, which fails if another process created the file first (then that uuid wins);
 * the directory is fsynced afterwards. A plain rename would silently replace a uuid another
 * process had just written. It is not: ever rewritten; a malformed file is an error for the
 * operator, never replaced, because a new uuid would orphan the host's allocations.
 */
import { randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';

export const COMPUTE_ID_FILE = 'compute_id';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The compute_id file cannot be read, created, or does not hold a uuid. */
export class ComputeIdError extends Error {
  constructor(
    readonly path: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${path}: ${message}`, options);
    this.name = 'ComputeIdError';
  }
}

async function readId(path: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await fsp.readFile(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined; // creating it will say what is wrong
    throw new ComputeIdError(path, `cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`, { cause: e });
  }
  const id = text.trim();
  if (!UUID.test(id)) {
    throw new ComputeIdError(path, `does not hold a uuid (got ${JSON.stringify(id.slice(0, 40))}); fix or remove it by hand, knowing that a new uuid makes a new compute node`);
  }
  return id.toLowerCase();
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * The uuid in `<statePath>/compute_id`, creating the directory and the file when absent (with
 * `preferred`, e.g. the uuid nova already has for this compute node, or a new one).
 * @throws ComputeIdError when the file is unreadable, malformed, or cannot be created
 */
export async function loadOrCreateComputeId(statePath: string, preferred?: string): Promise<string> {
  const path = join(statePath, COMPUTE_ID_FILE);
  const existing = await readId(path);
  if (existing) return existing;

  const id = preferred && UUID.test(preferred) ? preferred.toLowerCase() : randomUUID();
  const tmp = join(statePath, `.${COMPUTE_ID_FILE}.${process.pid}.${randomUUID().slice(0, 8)}.tmp`);
  try {
    await fsp.mkdir(statePath, { recursive: true, mode: 0o755 });
    const handle = await fsp.open(tmp, 'wx', 0o644);
    try {
      await handle.writeFile(`${id}\n`, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fsp.link(tmp, path);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return (await readId(path)) as string; // another process won; use its uuid
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw e;
      await fsp.rename(tmp, path); // a filesystem without hard links
    }
    await fsyncDir(statePath);
    return id;
  } catch (e) {
    if (e instanceof ComputeIdError) throw e;
    throw new ComputeIdError(path, `cannot be created (${(e as NodeJS.ErrnoException).code ?? String(e)})`, { cause: e });
  } finally {
    await fsp.unlink(tmp).catch(() => undefined);
  }
}
