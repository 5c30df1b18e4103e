/**
 * An in-memory Cinder for the volume flows' unit tests: volumes and attachments with the states
 * the real API moves them through (a new volume is `creating` for `creatingLooks` reads, then
 * `available`, or `error` when asked; an attachment reserves its volume, a connector connects it
 * with RBD connection info shaped as Cinder 2025.1's, `os-complete` puts it `in-use`, deleting the
 * last attachment makes it `available` again), the CinderApi port's errors, and a log of the calls
 * (with the token each request carried) for the tests to read; `down` or `failOn` make requests fail
 * as unreachable. Real Cinder behaviour is proven by
 * test/integration/stack/cinder-stack.test.ts; this is its stand-in where a unit test needs one.
 */
import { randomUUID } from 'node:crypto';
import type { CinderApi, CinderAttachment, CinderVolume, VolumeConnector, VolumeSpec } from '../../agent/volume/cinder-api';
import { CinderConflictError, CinderNotFoundError, CinderRefusedError, CinderUnavailableError } from '../../agent/volume/errors';
import type { CinderClients } from '../../agent/volume/factory';
import type { RequestContext } from '../../agent/compute/ports';
import { cinderRbdConnectionInfo } from './cinder-rbd-connection-info';

export interface FakeVolume {
  id: string;
  status: string;
  size: number;
  name: string;
  imageRef?: string;
  /** Reads left before a `creating` volume settles. */
  looksLeft: number;
  /** What it settles on. */
  settlesTo: string;
  /** Cinder's migration of it (`migrating` while Cinder moves it to another volume). */
  migration_status?: string;
}

export interface FakeAttachment {
  id: string;
  volume_id: string;
  instance: string;
  connector: VolumeConnector | null;
  status: string;
}

export class FakeCinder implements CinderApi {
  readonly volumes = new Map<string, FakeVolume>();
  readonly attachments = new Map<string, FakeAttachment>();
  readonly calls: string[] = [];
  /** Reads a created volume stays `creating`. */
  creatingLooks = 1;
  /** The status the next created volumes settle to. */
  settleTo = 'available';
  /** When set, every request fails as unreachable. */
  down = false;

  addVolume(o: Partial<FakeVolume> = {}): FakeVolume {
    const v: FakeVolume = { id: randomUUID(), status: 'available', size: 1, name: '', looksLeft: 0, settlesTo: 'available', ...o };
    this.volumes.set(v.id, v);
    return v;
  }

  /** An attachment as nova-api makes one before it casts (no connector: the volume `reserved`). */
  reserve(volumeId: string, instance: string): FakeAttachment {
    const a: FakeAttachment = { id: randomUUID(), volume_id: volumeId, instance, connector: null, status: 'reserved' };
    this.attachments.set(a.id, a);
    this.vol(volumeId).status = 'reserved';
    return a;
  }

  /** Requests (by the start of their `calls` entry, e.g. `DELETE attachment`) that fail as unreachable, and how many more times. */
  readonly failing = new Map<string, number>();

  /** The next `times` requests starting with `prefix` fail as unreachable (Cinder down for those only). */
  failOn(prefix: string, times = 1): void {
    this.failing.set(prefix, times);
  }

  private gate(what: string): void {
    this.calls.push(what);
    if (this.down) throw new CinderUnavailableError(what, ': connection refused');
    for (const [prefix, left] of this.failing) {
      if (!what.startsWith(prefix) || left <= 0) continue;
      this.failing.set(prefix, left - 1);
      throw new CinderUnavailableError(what, ': connection refused');
    }
  }

  private vol(id: string): FakeVolume {
    const v = this.volumes.get(id);
    if (!v) throw new CinderNotFoundError(`GET /v3/volumes/${id}`);
    return v;
  }

  private view(v: FakeVolume): CinderVolume {
    return { id: v.id, status: v.status, size: v.size, multiattach: false, bootable: v.imageRef !== undefined, ...(v.migration_status !== undefined ? { migration_status: v.migration_status } : {}) };
  }

  private attView(a: FakeAttachment): CinderAttachment {
    const info = a.connector ? cinderRbdConnectionInfo(a.volume_id, { attachmentId: a.id, enforceMultipath: a.connector.enforce_multipath }) : {};
    return { id: a.id, status: a.status, volume_id: a.volume_id, instance: a.instance, attach_mode: 'rw', connection_info: info };
  }

  getVolume(id: string): Promise<CinderVolume> {
    this.gate(`GET volume ${id}`);
    const v = this.vol(id);
    if (v.status === 'creating' && v.looksLeft-- <= 0) v.status = v.settlesTo;
    return Promise.resolve(this.view(v));
  }

  createVolume(spec: VolumeSpec): Promise<CinderVolume> {
    this.gate(`POST volume ${spec.imageRef ? `from image ${spec.imageRef}` : 'blank'}`);
    const v = this.addVolume({ status: 'creating', size: spec.size, name: spec.name ?? '', ...(spec.imageRef ? { imageRef: spec.imageRef } : {}), looksLeft: this.creatingLooks, settlesTo: this.settleTo });
    return Promise.resolve(this.view(v));
  }

  deleteVolume(id: string): Promise<boolean> {
    this.gate(`DELETE volume ${id}`);
    const v = this.volumes.get(id);
    if (!v) return Promise.resolve(false);
    if ([...this.attachments.values()].some((a) => a.volume_id === id)) throw new CinderConflictError(`DELETE /v3/volumes/${id}`, ': volume has attachments');
    this.volumes.delete(id);
    return Promise.resolve(true);
  }

  createAttachment(volumeId: string, instanceUuid: string, connector: VolumeConnector | null): Promise<CinderAttachment> {
    this.gate(`POST attachment ${volumeId}`);
    const v = this.vol(volumeId);
    // Cinder's _attachment_reserve: a volume not available takes another attachment only for the
    // instance it is attached to already (a move's), and keeps its status then.
    const sameInstance = [...this.attachments.values()].some((x) => x.volume_id === volumeId && x.instance === instanceUuid);
    if (v.status !== 'available' && !sameInstance) throw new CinderConflictError('POST /v3/attachments', `: volume is ${v.status}`);
    const status = v.status;
    const a = this.reserve(volumeId, instanceUuid);
    if (sameInstance) v.status = status;
    if (connector) Object.assign(a, { connector, status: 'attaching' });
    return Promise.resolve(this.attView(a));
  }

  getAttachment(id: string): Promise<CinderAttachment> {
    this.gate(`GET attachment ${id}`);
    const a = this.attachments.get(id);
    if (!a) throw new CinderNotFoundError(`GET /v3/attachments/${id}`);
    return Promise.resolve(this.attView(a));
  }

  updateAttachment(id: string, connector: VolumeConnector): Promise<CinderAttachment> {
    this.gate(`PUT attachment ${id}`);
    const a = this.attachments.get(id);
    if (!a) throw new CinderNotFoundError(`PUT /v3/attachments/${id}`);
    Object.assign(a, { connector, status: 'attaching' });
    this.vol(a.volume_id).status = 'attaching';
    return Promise.resolve(this.attView(a));
  }

  completeAttachment(id: string): Promise<void> {
    this.gate(`complete attachment ${id}`);
    const a = this.attachments.get(id);
    if (!a) throw new CinderNotFoundError(`POST /v3/attachments/${id}/action`);
    a.status = 'attached';
    this.vol(a.volume_id).status = 'in-use';
    return Promise.resolve();
  }

  rollDetaching(volumeId: string): Promise<void> {
    this.gate(`roll detaching ${volumeId}`);
    const v = this.vol(volumeId);
    if (v.status === 'detaching') v.status = 'in-use';
    return Promise.resolve();
  }

  /** nova-api's begin_detaching before it casts detach_volume. */
  beginDetaching(volumeId: string): void {
    this.vol(volumeId).status = 'detaching';
  }

  deleteAttachment(id: string): Promise<boolean> {
    this.gate(`DELETE attachment ${id}`);
    const a = this.attachments.get(id);
    if (!a) return Promise.resolve(false);
    this.attachments.delete(id);
    const v = this.volumes.get(a.volume_id);
    const left = [...this.attachments.values()].filter((x) => x.volume_id === a.volume_id);
    if (v && left.length === 0) v.status = 'available';
    // As Cinder's volume_detached: in-use while an attachment is attached, reserved while the others only hold it.
    else if (v && v.status !== 'detaching') v.status = left.some((x) => x.status === 'attached') ? 'in-use' : 'reserved';
    return Promise.resolve(true);
  }

  /**
   * As Cinder's `_migrate_volume_completion`: refused for a volume not mid-migration; on error the
   * migration ends (`error`) and the old volume stays; on success the new volume's data takes the
   * old id (the new row and the old data go, the new volume's attachments now name the old id).
   * Answers the id the instance keeps: the old one either way.
   */
  migrateVolumeCompletion(oldId: string, newId: string, error: boolean): Promise<string> {
    this.gate(`migrate completion ${oldId} ${newId} error=${String(error)}`);
    const old = this.vol(oldId);
    const next = this.vol(newId);
    if (!old.migration_status) throw new CinderRefusedError(`POST /v3/volumes/${oldId}/action`, 400, ': Source volume not mid-migration.');
    if (error) {
      old.migration_status = 'error';
      return Promise.resolve(oldId);
    }
    for (const a of this.attachments.values()) if (a.volume_id === newId) a.volume_id = oldId;
    this.volumes.delete(newId);
    Object.assign(old, { size: next.size, status: next.status, migration_status: 'success' });
    return Promise.resolve(oldId);
  }
}

/** `CinderClients` over one fake; `tokens` records the user token each request was made for. */
export function fakeCinderClients(cinder: FakeCinder, tokens: Array<string | null> = []): CinderClients {
  return {
    configured: true,
    forRequest: (ctx: RequestContext): CinderApi => {
      tokens.push(typeof ctx['auth_token'] === 'string' ? ctx['auth_token'] : null);
      return cinder;
    },
  };
}
