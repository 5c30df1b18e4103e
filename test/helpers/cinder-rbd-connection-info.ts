/**
 * The one fixture of Cinder 2025.1's RBD connection info, in the two forms tests need: flat, as
 * Cinder's attachment API answers it (`cinderRbdConnectionInfo`), and nested, as nova keeps it in a
 * block device mapping and hands it to a virt driver (`novaRbdConnectionInfo`). The fake Cinder,
 * the Cinder HTTP client's test and the qemu driver's tests all take it from here, so the shape is
 * stated once.
 *
 * It is not captured (the project holds no captured Cinder exchange). It is written from the
 * stable/2025.1 sources, field for field and in Cinder's order:
 * - `cinder/volume/drivers/rbd.py` `initialize_connection`: `name` (`<rbd_pool>/volume-<id>`),
 *   `hosts`/`ports` (strings from `ceph mon dump`), `cluster_name`, `auth_enabled` (`rbd_user`
 *   set), `auth_username`, `secret_type`, `secret_uuid` (`rbd_secret_uuid`, else the cluster
 *   fsid), `volume_id`, `discard: true`; no `keyring` (cinderlib only);
 * - `cinder/volume/manager.py` `_parse_connection_options`: `qos_specs` (null without front-end
 *   QoS), `access_mode`, `encrypted`, `cacheable` (every volume has a type since the default type);
 * - `_connection_create`: the `data` dict flattened with `driver_volume_type`, then
 *   `attachment_id` and `enforce_multipath` (the connector's, false when it has none);
 * - nova `volume/cinder.py` `_translate_attachment_ref`: drops `attachment_id`, nests the rest
 *   under `data`; `virt/block_device.py` adds `serial` (the volume id) before saving it.
 * It is not: a fake Cinder (`fake-cinder.ts`) nor an `AttachedVolume` (`rbd-volume.ts`).
 */
import type { VolumeConnectionInfo } from '../../model/block-device';

/** The `rbd_secret_uuid` of the fixture's back end; tests write the cephx key file under this name. */
export const RBD_SECRET_UUID = '5b6e1a2c-7f3d-4a8e-9c01-2d3e4f5a6b7c';
/** The attachment id the fixture carries when a test names none. */
export const RBD_ATTACHMENT_ID = 'a77ac4e0-0000-4000-8000-000000000001';

export interface RbdConnectionOptions {
  /** `rbd_pool` (default `volumes`). */
  readonly pool?: string;
  /** The image in the pool (default `volume-<id>`, Cinder's `volume.name`). */
  readonly image?: string;
  readonly hosts?: readonly string[];
  readonly ports?: readonly string[];
  /** `rbd_user`; null: a cluster without cephx (`auth_enabled` false, no secret). */
  readonly user?: string | null;
  readonly secretUuid?: string;
  readonly accessMode?: 'rw' | 'ro';
  readonly discard?: boolean;
  readonly attachmentId?: string;
  /** The connector's `enforce_multipath` (os-brick's default for nova is true). */
  readonly enforceMultipath?: boolean;
}

/** The connection info of volume `volumeId` flat, as `POST`/`PUT /v3/attachments` answer it. */
export function cinderRbdConnectionInfo(volumeId: string, o: RbdConnectionOptions = {}): Record<string, unknown> {
  const user = o.user === undefined ? 'cinder' : o.user;
  return {
    name: `${o.pool ?? 'volumes'}/${o.image ?? `volume-${volumeId}`}`,
    hosts: [...(o.hosts ?? ['127.0.0.1'])],
    ports: [...(o.ports ?? ['3301'])],
    cluster_name: 'ceph',
    auth_enabled: user !== null,
    auth_username: user,
    secret_type: 'ceph',
    // With no rbd_user Cinder still names a secret (the fsid); nothing reads it then.
    secret_uuid: o.secretUuid ?? RBD_SECRET_UUID,
    volume_id: volumeId,
    discard: o.discard ?? true,
    qos_specs: null,
    access_mode: o.accessMode ?? 'rw',
    encrypted: false,
    cacheable: false,
    driver_volume_type: 'rbd',
    attachment_id: o.attachmentId ?? RBD_ATTACHMENT_ID,
    enforce_multipath: o.enforceMultipath ?? true,
  };
}

/** The same connection info as nova stores it in the block device mapping (`{driver_volume_type, data, serial}`). */
export function novaRbdConnectionInfo(volumeId: string, o: RbdConnectionOptions = {}): VolumeConnectionInfo & { readonly serial: string } {
  const { driver_volume_type: type, attachment_id: _attachment, ...data } = cinderRbdConnectionInfo(volumeId, o);
  return { driver_volume_type: String(type), data, serial: volumeId };
}
