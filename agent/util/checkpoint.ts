/**
 * Small state files written atomically, versioned and checksummed, after kubelet's checkpoint
 * manager and `FileStore.writeFile`: write a dot-prefixed temp file in the same directory, fsync
 * it, rename it over the target, then fsync the directory (the step kubelet skips).
 *
 * File form: `{"kind": K, "version": N, "checksum": "sha256:<hex of JSON.stringify(data)>", "data": D}`.
 * A reader that finds another kind, an unknown version or a bad checksum gets a
 * `CheckpointCorruptError`; callers log it and start empty rather than refuse to run.
 *
 * Not here: what the data means, or how often it is written.
 */
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** The file exists but cannot be trusted (torn, edited, another format). */
export class CheckpointCorruptError extends Error {
  constructor(
    readonly path: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`checkpoint ${path}: ${reason}`, options);
    this.name = 'CheckpointCorruptError';
  }
}

/** Reading or writing the file failed at the filesystem level. */
export class CheckpointIoError extends Error {
  constructor(
    readonly path: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`checkpoint ${path}: ${reason}`, options);
    this.name = 'CheckpointIoError';
  }
}

const digest = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

/**
 * One checkpoint file holding data of type T.
 *
 * Concurrency: `write` calls must not overlap (callers serialize them); `read` may run any time.
 */
export class JsonCheckpoint<T> {
  constructor(
    readonly path: string,
    private readonly kind: string,
    private readonly version: number,
    /** Checks the decoded data; returns undefined when it does not have the expected shape. */
    private readonly validate: (data: unknown) => T | undefined,
  ) {}

  /**
   * The stored data, or undefined when there is no file.
   * @throws CheckpointCorruptError, CheckpointIoError
   */
  async read(): Promise<T | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new CheckpointIoError(this.path, `cannot read (${(e as Error).message})`, { cause: e });
    }
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch (e) {
      throw new CheckpointCorruptError(this.path, 'not JSON', { cause: e });
    }
    const d = doc as { kind?: unknown; version?: unknown; checksum?: unknown; data?: unknown };
    if (typeof doc !== 'object' || doc === null || d.kind !== this.kind) throw new CheckpointCorruptError(this.path, `not a ${this.kind} file`);
    if (d.version !== this.version) throw new CheckpointCorruptError(this.path, `version ${String(d.version)} is not ${this.version}`);
    if (d.checksum !== digest(JSON.stringify(d.data))) throw new CheckpointCorruptError(this.path, 'checksum mismatch');
    const data = this.validate(d.data);
    if (data === undefined) throw new CheckpointCorruptError(this.path, 'data has an unexpected shape');
    return data;
  }

  /** Replaces the file atomically and durably. @throws CheckpointIoError */
  async write(data: T): Promise<void> {
    const dir = dirname(this.path);
    const tmp = join(dir, `.${basename(this.path)}.${process.pid}.tmp`);
    const body = JSON.stringify(data);
    const head = `{"kind":${JSON.stringify(this.kind)},"version":${this.version},"checksum":"${digest(body)}","data":`;
    const text = `${head}${body}}\n`;
    try {
      await mkdir(dir, { recursive: true });
      const fh = await open(tmp, 'w', 0o600);
      try {
        await fh.writeFile(text, 'utf8');
        await fh.datasync();
      } finally {
        await fh.close();
      }
      await rename(tmp, this.path);
      const dh = await open(dir, 'r');
      try {
        await dh.sync();
      } finally {
        await dh.close();
      }
    } catch (e) {
      await rm(tmp, { force: true }).catch(() => undefined);
      throw new CheckpointIoError(this.path, `cannot write (${(e as Error).message})`, { cause: e });
    }
  }
}
