/**
 * The `HostFs` port: read-only access to the host's /sys and /proc (and filesystem sizes),
 * below a root directory that tests point at a recorded fixture tree.
 *
 * It is: asynchronous (libuv's thread pool), so no read blocks the event loop, and tolerant: a
 * file that does not exist reads as `undefined`, never as an exception, because "absent" is an
 * ordinary answer in sysfs. It is not: a general filesystem API; it never writes.
 *
 * Paths are always absolute host paths ("/sys/class/net"); the root is prepended here and
 * nowhere else. At most `concurrency` operations are in flight at once: a big host has thousands
 * of small sysfs files, and starting every read together makes their completions pile up in one
 * event-loop turn (a 224-CPU host stalled the loop for 20-40 ms that way; bounded, under 5 ms). Symbolic links inside the tree are followed inside the tree: a fixture's
 * `sys/class/net/eth0 -> ../../devices/...` resolves within the fixture.
 */
import { close, open, promises as fsp, read } from 'node:fs';
import { dirname, join, posix, relative, resolve } from 'node:path';

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

/** Admits at most `limit` operations at once; the others wait their turn, in order. */
class Gate {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(op: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active += 1;
    try {
      return await op();
    } finally {
      const next = this.waiting.shift();
      if (next) next(); // the slot passes to the next in line
      else this.active -= 1;
    }
  }
}

/** A whole file through open/read/close callbacks: fewer round trips than `fsp.readFile`. */
function readText(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    open(file, 'r', (err, fd) => {
      if (err) return reject(err);
      const chunks: Buffer[] = [];
      const step = (): void => {
        // sysfs values fit one small read; bigger files (cpuinfo) continue in larger chunks.
        const buf = Buffer.allocUnsafe(chunks.length === 0 ? 4096 : 65536);
        read(fd, buf, 0, buf.length, null, (e, n) => {
          if (e) close(fd, () => reject(e));
          else if (n === 0) close(fd, () => resolve(Buffer.concat(chunks).toString('utf8')));
          else {
            chunks.push(buf.subarray(0, n));
            step();
          }
        });
      };
      step();
    });
  });
}

/** `HostFs` over the real filesystem below `root`. */
export class RootedHostFs implements HostFs {
  private readonly gate: Gate;
  private realRoot: string | undefined;

  constructor(
    readonly root: string = '/',
    concurrency = 16,
  ) {
    this.gate = new Gate(Math.max(1, concurrency));
  }

  protected abs(path: string): string {
    return this.root === '/' ? path : join(this.root, path);
  }

  async read(path: string): Promise<string | undefined> {
    try {
      return await this.gate.run(() => readText(this.abs(path)));
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
      return (await this.gate.run(() => fsp.readdir(this.abs(path)))).sort();
    } catch (e) {
      if (ABSENT.has(codeOf(e))) return [];
      throw new HostReadError(path, codeOf(e), { cause: e });
    }
  }

  async resolveLink(path: string): Promise<string | undefined> {
    try {
      const real = await this.gate.run(() => this.realOrDangling(this.abs(path)));
      if (this.root === '/') return real;
      this.realRoot ??= await fsp.realpath(this.root);
      const realRoot = this.realRoot;
      const rel = relative(realRoot, real);
      return rel.startsWith('..') ? undefined : posix.join('/', rel.split('\\').join('/'));
    } catch (e) {
      if (ABSENT.has(codeOf(e)) || codeOf(e) === 'ELOOP') return undefined;
      throw new HostReadError(path, codeOf(e), { cause: e });
    }
  }

  /**
   * realpath, except that a link whose final target does not exist resolves lexically (the real
   * parent directory joined with the link text): sysfs `driver` links only matter by their name,
   * and a recorded fixture tree cannot keep the empty directories they point at (git drops them).
   */
  private async realOrDangling(abs: string): Promise<string> {
    try {
      return await fsp.realpath(abs);
    } catch (e) {
      if (codeOf(e) !== 'ENOENT') throw e;
      const target = await fsp.readlink(abs);
      return resolve(await fsp.realpath(dirname(abs)), target);
    }
  }

  async exists(path: string): Promise<boolean> {
    try {
      await this.gate.run(() => fsp.stat(this.abs(path)));
      return true;
    } catch {
      return false;
    }
  }

  async isDirectory(path: string): Promise<boolean> {
    try {
      return (await this.gate.run(() => fsp.stat(this.abs(path)))).isDirectory();
    } catch {
      return false;
    }
  }

  async fsSize(path: string): Promise<FsSize> {
    try {
      const s = await this.gate.run(() => fsp.statfs(this.abs(path)));
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
