/**
 * Small state files written atomically, versioned and checksummed, after kubelet's checkpoint
 * manager: written with `writeFileAtomic` (temp file, fsync, rename, fsync of the directory).
 *
 * File form: `{"kind": K, "version": N, "checksum": "sha256:<hex of JSON.stringify(data)>", "data": D}`.
 * A reader that finds another kind, an unknown version or a bad checksum gets a
 * `CheckpointCorruptError`; callers log it and start empty rather than refuse to run.
 *
 * Not here: what the data means, or how often it is written.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { writeFileAtomic } from './atomic-file';

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

  /** Replaces the file atomically and durably (`writeFileAtomic`). @throws CheckpointIoError */
  async write(data: T): Promise<void> {
    const body = JSON.stringify(data);
    const text = `{"kind":${JSON.stringify(this.kind)},"version":${this.version},"checksum":"${digest(body)}","data":${body}}\n`;
    try {
      await writeFileAtomic(this.path, text, 0o600);
    } catch (e) {
      throw new CheckpointIoError(this.path, `cannot write (${(e as Error).message})`, { cause: e });
    }
  }
}

/** A checkpoint described by a spec: the form the journal log and the ownership record use. */
export interface CheckpointSpec<T> {
  readonly path: string;
  readonly kind: string;
  readonly version: number;
  readonly validate: (data: unknown) => data is T;
}

const fromSpec = <T>(spec: CheckpointSpec<T>): JsonCheckpoint<T> =>
  new JsonCheckpoint<T>(spec.path, spec.kind, spec.version, (d) => (spec.validate(d) ? d : undefined));

/** Writes the checkpoint atomically. @throws CheckpointIoError */
export function writeCheckpoint<T>(spec: CheckpointSpec<T>, data: T): Promise<void> {
  return fromSpec(spec).write(data);
}

/** Reads the checkpoint: undefined when there is no file. @throws CheckpointCorruptError, CheckpointIoError */
export function readCheckpoint<T>(spec: CheckpointSpec<T>): Promise<T | undefined> {
  return fromSpec(spec).read();
}
