/**
 * The `CinderApi` port: the Block Storage API v3 calls a compute host makes for volumes (nova
 * `volume/cinder.py`), each with its route, its microversion and what it throws.
 *
 * It is: the narrow interface the volume flows will use, so tests hand them a fake or a
 * nock-backed client. It is not: policy (which attachments to delete, when to wait); the flows
 * decide that. Every request carries the user's token and, where configured, nova's service token
 * (`X-Service-Token`): Cinder deletes an instance's in-use attachment only for a caller whose
 * service token has the `service` role (bug 2004555).
 *
 * Every method may throw `CinderUnavailableError` (no answer or 5xx after the retries),
 * `CinderAuthError` and `CinderResponseError`; the others are listed per method.
 */

/** A volume, the fields the agent reads. */
export interface CinderVolume {
  readonly id: string;
  readonly status: string;
  readonly size: number;
  readonly multiattach: boolean;
  readonly bootable: boolean;
  /** Cinder's migration of the volume (`migrating` while Cinder moves it; null when none ran). Optional: older fakes leave it out. */
  readonly migration_status?: string | null;
}

/** What a compute host tells Cinder about itself when it attaches (os-brick's connector properties). */
export interface VolumeConnector {
  readonly platform: string;
  readonly os_type: string;
  readonly ip: string;
  readonly host: string;
  readonly multipath: boolean;
  readonly enforce_multipath: boolean;
  readonly do_local_attach: boolean;
  readonly mountpoint?: string;
  readonly initiator?: string;
}

/** An attachment; `connection_info` is empty until a connector was given. */
export interface CinderAttachment {
  readonly id: string;
  readonly status: string;
  readonly volume_id: string;
  readonly instance: string | null;
  readonly attach_mode: string;
  /** The back end's connection info, flat as Cinder gives it (`driver_volume_type`, `name`, `hosts`, ...). */
  readonly connection_info: Readonly<Record<string, unknown>>;
}

/** A volume to create (`POST /v3/volumes`'s body). */
export interface VolumeSpec {
  readonly size: number;
  readonly name?: string;
  /** The Glance image to write into it. */
  readonly imageRef?: string;
  readonly snapshot_id?: string;
  readonly volume_type?: string;
  readonly availability_zone?: string;
}

export interface CinderApi {
  /** `GET /v3/volumes/{id}`. @throws CinderNotFoundError */
  getVolume(id: string): Promise<CinderVolume>;
  /** `POST /v3/volumes` (sent again only when the request never left). @throws CinderRefusedError (quota, bad size) */
  createVolume(spec: VolumeSpec): Promise<CinderVolume>;
  /** `DELETE /v3/volumes/{id}`: true when deleted, false when it was gone already. @throws CinderConflictError (in use) */
  deleteVolume(id: string): Promise<boolean>;
  /** `POST /v3/attachments` (3.54): reserves the volume for the instance; with a connector, also connects it. @throws CinderNotFoundError, CinderConflictError */
  createAttachment(volumeId: string, instanceUuid: string, connector: VolumeConnector | null, mode: 'rw' | 'ro'): Promise<CinderAttachment>;
  /** `GET /v3/attachments/{id}` (3.54). @throws CinderNotFoundError */
  getAttachment(id: string): Promise<CinderAttachment>;
  /** `PUT /v3/attachments/{id}` (3.54): connects the attachment to this host. @throws CinderNotFoundError */
  updateAttachment(id: string, connector: VolumeConnector): Promise<CinderAttachment>;
  /** `POST /v3/attachments/{id}/action` `os-complete` (3.44): the volume is in use. @throws CinderNotFoundError */
  completeAttachment(id: string): Promise<void>;
  /** `POST /v3/volumes/{id}/action` `os-roll_detaching`: a detach that did not happen puts the volume back in use. @throws CinderNotFoundError */
  rollDetaching(volumeId: string): Promise<void>;
  /** `DELETE /v3/attachments/{id}` (3.54): true when deleted, false when it was gone already. @throws CinderConflictError */
  deleteAttachment(id: string): Promise<boolean>;
  /**
   * `POST /v3/volumes/{old}/action` `os-migrate_volume_completion`: the guest moved (or failed to
   * move, `error`) from volume `oldId` to `newId` in a Cinder migration; answers the id the
   * instance's mapping keeps (`save_volume_id`). Optional: only swap_volume calls it, and the
   * clients that predate it (benchmarks) never swap. @throws CinderNotFoundError, CinderRefusedError
   */
  migrateVolumeCompletion?(oldId: string, newId: string, error: boolean): Promise<string>;
  /**
   * `GET /v3/snapshots/{id}`: a volume snapshot's id and status (`creating` until Cinder has taken
   * it). Optional: only the thaw after a volume-backed snapshot (`unquiesce_instance`) waits on
   * one. @throws CinderNotFoundError
   */
  getSnapshot?(id: string): Promise<CinderSnapshot>;
}

/** A volume snapshot as `unquiesce_instance` reads it. */
export interface CinderSnapshot {
  readonly id: string;
  readonly status: string;
}
