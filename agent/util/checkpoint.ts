/**
 * Versioned, checksummed JSON checkpoints (kubelet's checkpoint manager, in miniature).
 *
 * A checkpoint file is `{"kind", "version", "checksum", "data"}`; the checksum is a CRC-32 of the
 * JSON text of `data`. Reading verifies kind, version and checksum, so a torn or hand-edited file is
 * reported as corrupt instead of being half-believed. Writes go through `writeFileAtomic`.
 */
import { readFile } from 'node:fs/promises';
import { writeFileAtomic } from './atomic-file';

/** The file exists but cannot be trusted. */
export class CheckpointCorruptError extends Error {
  constructor(readonly path: string, reason: string) {
    super(`checkpoint ${path} is unusable: ${reason}`);
    this.name = 'CheckpointCorruptError';
  }
}

const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE) of a UTF-8 string. */
export function crc32(text: string): number {
  let c = 0xffffffff;
  for (const byte of Buffer.from(text, 'utf8')) c = (TABLE[(c ^ byte) & 0xff] ?? 0) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export interface CheckpointSpec<T> {
  readonly path: string;
  readonly kind: string;
  readonly version: number;
  /** Validates the decoded data; returns an error reason or undefined. */
  readonly validate: (data: unknown) => data is T;
}

/** Writes the checkpoint atomically. */
export async function writeCheckpoint<T>(spec: CheckpointSpec<T>, data: T): Promise<void> {
  const text = JSON.stringify(data);
  const body = `{"kind":${JSON.stringify(spec.kind)},"version":${spec.version},"checksum":${crc32(text)},"data":${text}}\n`;
  await writeFileAtomic(spec.path, body);
}

/**
 * Reads the checkpoint: undefined when the file does not exist.
 * @throws CheckpointCorruptError when it exists but fails any check
 */
export async function readCheckpoint<T>(spec: CheckpointSpec<T>): Promise<T | undefined> {
  let text: string;
  try {
    text = await readFile(spec.path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CheckpointCorruptError(spec.path, (e as Error).message);
  }
  let outer: { kind?: unknown; version?: unknown; checksum?: unknown; data?: unknown };
  try {
    outer = JSON.parse(text) as typeof outer;
  } catch {
    throw new CheckpointCorruptError(spec.path, 'not JSON (torn write?)');
  }
  if (outer.kind !== spec.kind) throw new CheckpointCorruptError(spec.path, `kind ${String(outer.kind)}, expected ${spec.kind}`);
  if (outer.version !== spec.version) throw new CheckpointCorruptError(spec.path, `version ${String(outer.version)}, expected ${spec.version}`);
  if (outer.checksum !== crc32(JSON.stringify(outer.data))) throw new CheckpointCorruptError(spec.path, 'checksum mismatch');
  if (!spec.validate(outer.data)) throw new CheckpointCorruptError(spec.path, 'unexpected content');
  return outer.data;
}
