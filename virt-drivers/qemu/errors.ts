/**
 * Errors of the QEMU driver, one class per failure, each accepting a `cause`. All extend
 * `DriverError`, so the compute manager can treat anything escaping the driver uniformly and
 * branch on the class where it matters (a live migration aborted vs failed vs timed out).
 *
 * Messages are single lines an operator can act on: they name the instance, the file or the
 * option, and end with QEMU's own words when QEMU said something (its stderr tail, a QMP desc).
 */
import { DriverError } from '../errors';

/** Base class of QMP (QEMU Machine Protocol) failures. */
export class QmpError extends DriverError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'QmpError';
  }
}

/** The QMP socket could not be reached (absent, refused, no greeting) within the deadline. */
export class QmpConnectError extends QmpError {
  constructor(readonly path: string, reason: string, options?: { cause?: unknown }) {
    super(`qmp ${path}: cannot connect: ${reason}`, options);
    this.name = 'QmpConnectError';
  }
}

/** The peer sent something that is not QMP (bad JSON, no greeting, a reply without a request). */
export class QmpProtocolError extends QmpError {
  constructor(readonly path: string, detail: string, options?: { cause?: unknown }) {
    super(`qmp ${path}: protocol error: ${detail}`, options);
    this.name = 'QmpProtocolError';
  }
}

/** QEMU answered a command with an error (`{"error": {"class", "desc"}}`). */
export class QmpCommandError extends QmpError {
  constructor(
    readonly command: string,
    readonly errorClass: string,
    readonly desc: string,
  ) {
    super(`qmp ${command}: ${errorClass}: ${desc}`);
    this.name = 'QmpCommandError';
  }
}

/** The connection closed (QEMU quit or died, or the client was closed) before the answer came. */
export class QmpClosedError extends QmpError {
  constructor(readonly path: string, readonly command?: string) {
    super(command ? `qmp ${path}: connection closed before ${command} was answered` : `qmp ${path}: connection closed`);
    this.name = 'QmpClosedError';
  }
}

/** A command (or an awaited event) did not come within its deadline. */
export class QmpTimeoutError extends QmpError {
  constructor(readonly what: string, readonly timeoutMs: number) {
    super(`qmp ${what}: no answer within ${timeoutMs} ms`);
    this.name = 'QmpTimeoutError';
  }
}

/** QEMU could not be started, or exited, or did not answer while an instance was starting. */
export class VmStartError extends DriverError {
  constructor(readonly instance: string, reason: string, options?: { cause?: unknown }) {
    super(`instance ${instance}: qemu did not start: ${reason}`, options);
    this.name = 'VmStartError';
  }
}

/** An instance's image cannot be found or used. */
export class ImageError extends DriverError {
  constructor(readonly imageRef: string, reason: string, options?: { cause?: unknown }) {
    super(`image ${JSON.stringify(imageRef)}: ${reason}`, options);
    this.name = 'ImageError';
  }
}

/**
 * The data Glance served does not match the image's record: its `os_hash_value` (or md5
 * `checksum`). The full values are properties; the message shortens them to 16 hex digits so a
 * fault (nova keeps 255 characters of its message) still names both.
 */
export class ImageChecksumError extends ImageError {
  constructor(
    imageRef: string,
    readonly algorithm: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(imageRef, `checksum mismatch (${algorithm} expected ${short(expected)}, got ${short(actual)})`);
    this.name = 'ImageChecksumError';
  }
}

/** The image could not be had from Glance: missing, no data, Glance down, or the download broke. */
export class ImageDownloadError extends ImageError {
  constructor(imageRef: string, reason: string, options?: { cause?: unknown }) {
    super(imageRef, reason, options);
    this.name = 'ImageDownloadError';
  }
}

function short(hex: string): string {
  return hex.length > 16 ? `${hex.slice(0, 16)}...` : hex;
}

/** An instance's files on disk cannot be read or written. */
export class InstanceFilesError extends DriverError {
  constructor(readonly instance: string, reason: string, options?: { cause?: unknown }) {
    super(`instance ${instance}: ${reason}`, options);
    this.name = 'InstanceFilesError';
  }
}

/** Data handed between migration steps (diskInfo, LiveMigrateData) is missing a field or malformed. */
export class MigrationDataError extends DriverError {
  constructor(readonly field: string, expected: string) {
    super(`migration data field ${field}: expected ${expected}`);
    this.name = 'MigrationDataError';
  }
}

/**
 * A live migration failed. `sourceRunning` says whether the instance still runs on the source (it
 * does unless its own QEMU died meanwhile).
 */
export class LiveMigrationError extends DriverError {
  constructor(
    readonly instance: string,
    readonly dest: string,
    reason: string,
    options?: { cause?: unknown },
    readonly sourceRunning = true,
  ) {
    super(`live migration of ${instance} to ${dest} failed: ${reason}; ${sourceRunning ? 'the instance still runs here' : "the instance's QEMU here is gone too"}`, options);
    this.name = 'LiveMigrationError';
  }
}

/** A live migration was aborted (`liveMigrationAbort`); the instance still runs on the source. */
export class LiveMigrationAbortedError extends LiveMigrationError {
  constructor(instance: string, dest: string) {
    super(instance, dest, 'aborted on request');
    this.name = 'LiveMigrationAbortedError';
  }
}

/** A live migration ran past its completion timeout and was aborted; the instance still runs on the source. */
export class LiveMigrationTimeoutError extends LiveMigrationError {
  constructor(instance: string, dest: string, readonly timeoutMs: number) {
    super(instance, dest, `not complete after ${Math.round(timeoutMs / 1000)} s (live_migration_completion_timeout), aborted`);
    this.name = 'LiveMigrationTimeoutError';
  }
}

/** The instance files of a cold migration could not be fetched from the source. */
export class DiskTransferError extends DriverError {
  constructor(readonly instance: string, reason: string, options?: { cause?: unknown }) {
    super(`instance ${instance}: cannot fetch its files from the source: ${reason}`, options);
    this.name = 'DiskTransferError';
  }
}

/**
 * A volume the instance should have cannot be given to QEMU as described: a back end other than
 * rbd, or a connection_info field missing or malformed. `field` is the path within the volume
 * (`connection_info.data.hosts`), or within the spec when no volume id is known (`volumes[2].volume_id`);
 * the message names it and the form expected, never the data itself (connection_info may carry
 * credentials of other back ends).
 */
export class VolumeConnectionError extends DriverError {
  constructor(
    readonly instance: string,
    readonly volume: string | undefined,
    readonly field: string,
    expected: string,
  ) {
    super(`instance ${instance}: ${volume === undefined ? '' : `volume ${volume}: `}${field} must be ${expected}`);
    this.name = 'VolumeConnectionError';
  }
}

/**
 * The cephx key file a volume needs (`[qemu] rbd_secrets_dir/<secret_uuid>.base64`) is missing,
 * unreadable, open to other users or not a base64 key. The message names the file and what to do,
 * never its content.
 */
export class VolumeSecretError extends DriverError {
  constructor(
    readonly instance: string,
    readonly file: string,
    problem: string,
    options?: { cause?: unknown },
  ) {
    super(`instance ${instance}: cephx key file ${file} ${problem}`, options);
    this.name = 'VolumeSecretError';
  }
}

/** Why `cause` happened, in its own words. */
function said(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}

/**
 * Taking a volume's device out of a running guest failed before the guest could answer: QEMU
 * refused `device_del` (anything but "no such device"), or the monitor went away meanwhile. The
 * disk stays in the guest, its nodes in QEMU.
 */
export class VolumeUnplugError extends DriverError {
  constructor(
    readonly instance: string,
    readonly volume: string,
    readonly device: string,
    cause: unknown,
  ) {
    super(`instance ${instance}: unplugging volume ${volume} (${device}) failed: ${said(cause)}; it stays attached`, { cause });
    this.name = 'VolumeUnplugError';
  }
}

/**
 * QEMU took `device_del` but the guest did not release the disk (no `DEVICE_DELETED`) within the
 * timeout: it still uses it, so its nodes and secret stay in QEMU. It may let go later (then a
 * detach again finishes the job).
 */
export class VolumeReleaseTimeoutError extends DriverError {
  constructor(
    readonly instance: string,
    readonly volume: string,
    readonly device: string,
    readonly timeoutMs: number,
    options?: { cause?: unknown },
  ) {
    super(`instance ${instance}: the guest did not release volume ${volume} (${device}) within ${timeoutMs} ms of requests; it stays attached`, options);
    this.name = 'VolumeReleaseTimeoutError';
  }
}

/**
 * A hot-plugged volume could not be recorded in the instance's definition (`cause`), and taking it
 * out of the guest again failed too (`undoError`): the guest has a disk that neither the
 * definition nor, once the caller gives the attachment up, Cinder knows of. An operator has to
 * detach it in the guest or restart the instance (a restart drops it: QEMU starts from the definition).
 */
export class VolumeAttachUndoError extends DriverError {
  constructor(
    readonly instance: string,
    readonly volume: string,
    readonly device: string,
    cause: unknown,
    readonly undoError: unknown,
  ) {
    super(
      `instance ${instance}: volume ${volume} was plugged but its definition could not be saved (${said(cause)}), and unplugging it again failed (${said(undoError)}); device ${device} is in the guest but not recorded until the guest releases it or the instance restarts`,
      { cause },
    );
    this.name = 'VolumeAttachUndoError';
  }
}
