/**
 * The `HostFs` port: read-only access to the host's /sys and /proc (and filesystem sizes),
 * below a root directory that tests point at a recorded fixture tree.
 *
 * It is: asynchronous (libuv's thread pool), so no read blocks the event loop, and tolerant: a
 * file that does not exist reads as `undefined`, never as an exception, because "absent" is an
 * ordinary answer in sysfs. It is not: a general filesystem API; it never writes.
 *
 * Paths are always absolute host paths ("/sys/class/net"); the root is prepended here and
 * nowhere else. Symbolic links inside the tree are followed inside the tree: a fixture's
 * `sys/class/net/eth0 -> ../../devices/...` resolves within the fixture.
 */
import { promises as fsp } from 'node:fs';
import { join, posix, relative } from 'node:path';

/** Size of a filesystem, in bytes. */
export interface FsSize {
  readonly totalBytes: number;
  readonly availableBytes: number;
}

/** A read failed for a reason other than absence (EACCES, EIO, EINVAL, ...). */
export class HostReadError extends Error {
  constructor(
    readonly path: string,
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(`${path}: cannot be read (${code})`, options);
    this.name = 'HostReadError';
  }
}

/**
 * Reads host state. Every method takes an absolute host path.
 * Absent files resolve to `undefined` (or `[]`); other errors reject with `HostReadError`.
 */
export interface HostFs {
  /** The directory host paths are resolved against ("/" on a real host). */
  readonly root: string;
  /** File content, or undefined when absent. @throws HostReadError */
  read(path: string): Promise<string | undefined>;
  /** Trimmed file content, or undefined when absent or unreadable for EINVAL/ENODEV (sysfs "no value"). */
  readValue(path: string): Promise<string | undefined>;
  /** Entry names of a directory, sorted; [] when absent. @throws HostReadError */
  list(path: string): Promise<string[]>;
  /** The host path `path` resolves to once every link is followed; undefined when absent or outside the root. */
  resolveLink(path: string): Promise<string | undefined>;
  /** Whether the path exists (links followed). */
  exists(path: string): Promise<boolean>;
  /** Whether the path is a directory. */
  isDirectory(path: string): Promise<boolean>;
  /** Size of the filesystem holding `path`. @throws HostReadError */
  fsSize(path: string): Promise<FsSize>;
}

const ABSENT = new Set(['ENOENT', 'ENOTDIR']);
/** sysfs answers EINVAL (speed of a down link) or ENODEV for "no value right now". */
const NO_VALUE = new Set(['EINVAL', 'ENODEV', 'ENOTSUP', 'EOPNOTSUPP', 'ENXIO', 'ENODATA']);

function codeOf(e: unknown): string {
  return (e as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
}

/** `HostFs` over the real filesystem below `root`. */
export class RootedHostFs implements HostFs {
  constructor(readonly root: string = '/') {}

  protected abs(path: string): string {
    return this.root === '/' ? path : join(this.root, path);
  }

  async read(path: string): Promise<string | undefined> {
    try {
      return await fsp.readFile(this.abs(path), 'utf8');
    } catch (e) {
      if (ABSENT.has(codeOf(e))) return undefined;
      throw new HostReadError(path, codeOf(e), { cause: e });
    }
  }

  async readValue(path: string): Promise<string | undefined> {
    try {
      return (await this.read(path))?.trim();
    } catch (e) {
      if (e instanceof HostReadError && NO_VALUE.has(e.code)) return undefined;
      throw e;
    }
  }

  async list(path: string): Promise<string[]> {
    try {
      return (await fsp.readdir(this.abs(path))).sort();
    } catch (e) {
      if (ABSENT.has(codeOf(e))) return [];
      throw new HostReadError(path, codeOf(e), { cause: e });
    }
  }

  async resolveLink(path: string): Promise<string | undefined> {
    try {
      const real = await fsp.realpath(this.abs(path));
      if (this.root === '/') return real;
      const realRoot = await fsp.realpath(this.root);
      const rel = relative(realRoot, real);
      return rel.startsWith('..') ? undefined : posix.join('/', rel.split('\\').join('/'));
    } catch (e) {
      if (ABSENT.has(codeOf(e)) || codeOf(e) === 'ELOOP') return undefined;
      throw new HostReadError(path, codeOf(e), { cause: e });
    }
  }

  async exists(path: string): Promise<boolean> {
    try {
      await fsp.stat(this.abs(path));
      return true;
    } catch {
      return false;
    }
  }

  async isDirectory(path: string): Promise<boolean> {
    try {
      return (await fsp.stat(this.abs(path))).isDirectory();
    } catch {
      return false;
    }
  }

  async fsSize(path: string): Promise<FsSize> {
    try {
      const s = await fsp.statfs(this.abs(path));
      return { totalBytes: s.blocks * s.bsize, availableBytes: s.bavail * s.bsize };
    } catch (e) {
      throw new HostReadError(path, codeOf(e), { cause: e });
    }
  }
}

/**
 * A `RootedHostFs` whose filesystem sizes come from a table (recorded with `stat -f`), for
 * fixture trees: statfs on a fixture directory would report the test machine's disk.
 * A path is answered by its longest recorded prefix.
 */
export class RecordedSizesHostFs extends RootedHostFs {
  constructor(
    root: string,
    private readonly sizes: Readonly<Record<string, FsSize>>,
  ) {
    super(root);
  }

  override async fsSize(path: string): Promise<FsSize> {
    const match = Object.keys(this.sizes)
      .filter((p) => p === '/' || path === p || path.startsWith(`${p}/`))
      .sort((a, b) => b.length - a.length)[0];
    const size = match === undefined ? undefined : this.sizes[match];
    if (!size) throw new HostReadError(path, 'ENOENT');
    return size;
  }
}
