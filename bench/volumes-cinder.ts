/**
 * The Cinder of the volumes bench: an in-process stand-in for the calls the attach and detach
 * flows make (`PUT /v3/attachments/{id}` with this host's connector, `os-complete`,
 * `DELETE /v3/attachments/{id}`, `os-roll_detaching`), answering with connection info shaped
 * field for field as Cinder 2025.1's RBD driver and volume manager give it, pointed at the bench's
 * own Ceph, so the qemu driver attaches a real RBD image. Every call is timed, from the flow's call
 * to the settled answer, so the scenario can take Cinder's share out of the flow's time the way
 * the agent's metrics would see a real Cinder's.
 *
 * It is not a model of Cinder: no volume states, no quota, no tokens; a call the two flows never
 * make fails loudly. Its answers cost next to nothing, which is the point: what is left of the
 * flow's time is the agent's.
 */
import { randomUUID } from 'node:crypto';
import type { CinderApi, CinderAttachment, CinderVolume, VolumeConnector } from '../agent/volume/cinder-api';
import type { CinderClients } from '../agent/volume/factory';
import type { RbdTarget } from './volumes-ceph';

/** Cinder's share of one flow. */
export interface CinderShare {
  readonly ms: number;
  readonly calls: readonly string[];
}

export class TimedCinder implements CinderApi {
  /** attachment id -> volume id */
  private readonly attachments = new Map<string, string>();
  private spent = 0;
  private calls: string[] = [];

  constructor(private readonly target: RbdTarget) {}

  /** The clients the manager is given: every request gets this one Cinder. */
  clients(): CinderClients {
    return { configured: true, forRequest: () => this };
  }

  /** nova-api's `attachment_create` (no connector) before it casts attach_volume: not the agent's, not timed. */
  reserve(volumeId: string): string {
    const id = randomUUID();
    this.attachments.set(id, volumeId);
    return id;
  }

  /** What was spent since the last `take`, and starts counting again. */
  take(): CinderShare {
    const share = { ms: this.spent, calls: this.calls };
    this.spent = 0;
    this.calls = [];
    return share;
  }

  private async timed<T>(call: string, answer: () => T): Promise<T> {
    const t0 = performance.now();
    try {
      return await Promise.resolve().then(answer);
    } finally {
      this.spent += performance.now() - t0;
      this.calls.push(call);
    }
  }

  private volumeOf(id: string): string {
    const v = this.attachments.get(id);
    if (v === undefined) throw new Error(`bench Cinder: no attachment ${id}`);
    return v;
  }

  /** The flat attachment Cinder 2025.1 answers with once a connector is set (rbd.py initialize_connection plus the manager's fields). */
  private attachment(id: string, volumeId: string): CinderAttachment {
    const t = this.target;
    return {
      id,
      status: 'attaching',
      volume_id: volumeId,
      instance: null,
      attach_mode: 'rw',
      connection_info: {
        driver_volume_type: 'rbd',
        name: `${t.pool}/volume-${volumeId}`,
        hosts: [t.monHost],
        ports: [t.monPort],
        cluster_name: 'ceph',
        auth_enabled: true,
        auth_username: t.user,
        secret_type: 'ceph',
        secret_uuid: t.secretUuid,
        volume_id: volumeId,
        discard: true,
        access_mode: 'rw',
        encrypted: false,
        qos_specs: null,
        cacheable: false,
        attachment_id: id,
        enforce_multipath: true,
      },
    };
  }

  updateAttachment(id: string, _connector: VolumeConnector): Promise<CinderAttachment> {
    return this.timed('PUT attachment', () => this.attachment(id, this.volumeOf(id)));
  }

  completeAttachment(id: string): Promise<void> {
    return this.timed('os-complete', () => void this.volumeOf(id));
  }

  deleteAttachment(id: string): Promise<boolean> {
    return this.timed('DELETE attachment', () => this.attachments.delete(id));
  }

  rollDetaching(_volumeId: string): Promise<void> {
    return this.timed('os-roll_detaching', () => undefined);
  }

  getVolume(id: string): Promise<CinderVolume> {
    return this.timed('GET volume', () => ({ id, status: 'in-use', size: 1, multiattach: false, bootable: false }));
  }

  createVolume(): Promise<CinderVolume> {
    return Promise.reject(new Error('bench Cinder: the attach and detach flows create no volume'));
  }

  deleteVolume(): Promise<boolean> {
    return Promise.reject(new Error('bench Cinder: the attach and detach flows delete no volume'));
  }

  createAttachment(): Promise<CinderAttachment> {
    return Promise.reject(new Error('bench Cinder: nova-api makes the attachment (reserve), not the agent'));
  }

  getAttachment(): Promise<CinderAttachment> {
    return Promise.reject(new Error('bench Cinder: the attach and detach flows read no attachment'));
  }
}
