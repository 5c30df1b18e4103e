/**
 * Cinder volumes as the qemu driver's guest disks: from nova's block device info (`AttachedVolume`,
 * Cinder's connection_info inside) to the `RbdVolumeDefinition`s an instance's `VmDefinition`
 * keeps, checking every field QEMU will be given.
 *
 * Only `rbd` is supported: QEMU opens the image itself with librbd (as nova's libvirt driver has
 * libvirt do it), so nothing is attached on the host. The connection_info is Cinder's RBD driver's:
 * `name` (`pool/image`), `hosts` and `ports` (the monitors, strings), `auth_enabled`,
 * `auth_username`, `secret_uuid`, `discard`, `access_mode`; the cephx key is never in it (the
 * host holds it, see `rbd-secrets.ts`).
 *
 * It is: pure mapping and validation. It is not: the command line (`cmdline.ts`), the key files,
 * hot plug.
 */
import { join } from 'node:path';
import type { AttachedVolume } from '../types';
import { VolumeConnectionError } from './errors';
import { UUID_PATTERN, type RbdVolumeDefinition } from './instance-files';

/** How many volumes an instance may have (root ports made on q35; PCI slots reserved elsewhere). */
export const VOLUME_SLOTS = 8;

const SECRET_UUID = new RegExp(`^${UUID_PATTERN}$`);
/** Cinder's volume ids are UUIDs; anything in this set is safe as a QEMU serial and in messages. */
const VOLUME_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
/** A cephx id as `ceph auth` names users, without `client.`. */
const CEPH_USER = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;

/** The key file of `secretUuid` in `dir` (libvirt keeps `/etc/libvirt/secrets/<uuid>.base64` alike). */
export function rbdSecretFile(dir: string, secretUuid: string): string {
  return join(dir, `${secretUuid}.base64`);
}

/** A plain object, not an array or null. */
function isRecord(v: unknown): v is Readonly<Record<string, unknown>> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The definition of one volume in `slot`. @throws VolumeConnectionError naming the field */
export function rbdVolumeDefinition(instance: string, volume: AttachedVolume, slot: number): RbdVolumeDefinition {
  const raw = volume as Partial<AttachedVolume> | undefined;
  const volumeId = raw?.volume_id;
  if (typeof volumeId !== 'string' || !VOLUME_ID.test(volumeId)) throw new VolumeConnectionError(instance, undefined, `volumes[${slot}].volume_id`, 'the Cinder volume id (a UUID)');
  const bad = (field: string, expected: string): VolumeConnectionError => new VolumeConnectionError(instance, volumeId, field, expected);

  const bootIndex = raw?.boot_index ?? null;
  if (bootIndex !== null && (typeof bootIndex !== 'number' || !Number.isInteger(bootIndex))) throw bad('boot_index', 'an integer or null');
  const info = raw?.connection_info;
  if (!isRecord(info)) throw bad('connection_info', 'an object {driver_volume_type, data}');
  if (info.driver_volume_type !== 'rbd') {
    const got = typeof info.driver_volume_type === 'string' ? JSON.stringify(info.driver_volume_type.slice(0, 32)) : 'missing';
    throw bad('connection_info.driver_volume_type', `"rbd", the only back end the qemu driver attaches (got ${got})`);
  }
  const data = info.data;
  if (!isRecord(data)) throw bad('connection_info.data', 'an object');

  const name = data.name;
  const cut = typeof name === 'string' ? name.indexOf('/') : -1;
  if (typeof name !== 'string' || cut < 1 || cut === name.length - 1) throw bad('connection_info.data.name', '"<pool>/<image>", e.g. "volumes/volume-<uuid>"');

  const { hosts, ports } = data;
  if (!Array.isArray(hosts) || hosts.length === 0 || !hosts.every((h) => typeof h === 'string' && h !== '' && !/[\s,;]/.test(h))) {
    throw bad('connection_info.data.hosts', 'a non-empty list of monitor addresses (strings)');
  }
  const portText = (p: unknown): string | undefined => {
    const s = typeof p === 'number' ? String(p) : p;
    return typeof s === 'string' && /^\d{1,5}$/.test(s) && Number(s) >= 1 && Number(s) <= 65535 ? s : undefined;
  };
  if (!Array.isArray(ports) || ports.length !== hosts.length || ports.some((p) => portText(p) === undefined)) {
    throw bad('connection_info.data.ports', 'a list of ports (strings such as "6789"), one per host');
  }
  const servers = hosts.map((host: string, i) => ({ host, port: portText(ports[i]) as string }));

  const auth = data.auth_enabled ?? false;
  if (typeof auth !== 'boolean') throw bad('connection_info.data.auth_enabled', 'true or false');
  let user: string | null = null;
  let secretUuid: string | null = null;
  if (auth) {
    if (typeof data.auth_username !== 'string' || !CEPH_USER.test(data.auth_username)) throw bad('connection_info.data.auth_username', 'the cephx user without "client." (e.g. "cinder") when auth_enabled is true');
    if (typeof data.secret_uuid !== 'string' || !SECRET_UUID.test(data.secret_uuid)) throw bad('connection_info.data.secret_uuid', 'a UUID (the name of the host\'s key file) when auth_enabled is true');
    if (data.secret_type !== undefined && data.secret_type !== null && data.secret_type !== 'ceph') throw bad('connection_info.data.secret_type', '"ceph"');
    user = data.auth_username;
    secretUuid = data.secret_uuid;
  }

  const access = data.access_mode ?? 'rw';
  if (access !== 'rw' && access !== 'ro') throw bad('connection_info.data.access_mode', '"rw" or "ro"');
  const discard = data.discard ?? false;
  if (typeof discard !== 'boolean') throw bad('connection_info.data.discard', 'true or false');
  // An encrypted volume would need LUKS keys from Barbican; given as is, the guest would see ciphertext.
  if (data.encrypted === true) throw bad('connection_info.data.encrypted', 'false (the qemu driver does not attach encrypted volumes)');

  return {
    slot,
    volumeId,
    pool: name.slice(0, cut),
    image: name.slice(cut + 1),
    servers,
    user,
    secretUuid,
    readOnly: access === 'ro',
    discard,
    // nova: a negative boot_index (-1) means "not a boot device", as null does.
    bootIndex: bootIndex === null || bootIndex < 0 ? null : bootIndex,
  };
}

/**
 * The volumes of a new guest: one per attached volume, in the given order, slots 0, 1, ...
 * @throws VolumeConnectionError (a bad field, too many volumes, a volume or boot index given twice)
 */
export function volumeDefinitions(instance: string, volumes: readonly AttachedVolume[]): RbdVolumeDefinition[] {
  const given: unknown = volumes; // from RPC: checked, not trusted to be the declared type
  if (!Array.isArray(given)) throw new VolumeConnectionError(instance, undefined, 'volumes', 'a list');
  if (volumes.length > VOLUME_SLOTS) throw new VolumeConnectionError(instance, undefined, 'volumes', `a list of at most ${VOLUME_SLOTS} volumes (got ${volumes.length})`);
  const defs = volumes.map((v, slot) => rbdVolumeDefinition(instance, v, slot));
  defs.forEach((d, i) => {
    if (defs.findIndex((o) => o.volumeId === d.volumeId) !== i) throw new VolumeConnectionError(instance, d.volumeId, 'volume_id', 'attached once (it is listed twice)');
    if (d.bootIndex !== null && defs.findIndex((o) => o.bootIndex === d.bootIndex) !== i) throw new VolumeConnectionError(instance, d.volumeId, 'boot_index', `unique (${d.bootIndex} is given to two volumes)`);
  });
  return defs;
}

/** The key files (secret uuids) the definition's volumes need, each once. */
export function neededSecrets(volumes: readonly RbdVolumeDefinition[] | undefined): string[] {
  return [...new Set((volumes ?? []).flatMap((v) => (v.secretUuid === null ? [] : [v.secretUuid])))];
}
