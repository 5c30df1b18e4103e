/**
 * The Cinder client: the `CinderApi` port over `JsonService` (keystone's token, the catalog's
 * `block-storage` endpoint, the project's one JSON transport), at microversion 3.54 as nova 2025.1
 * speaks it for attachments, with nova's service token beside the user's where one is configured.
 *
 * Retries: a request that got no answer or a 5xx is sent again up to `retries` times with backoff;
 * the POSTs that make a volume or an attachment only when the request never left (a second one
 * would be a second volume). A 401 is retried once with a fresh token. Every other status is
 * classified once (`errors.ts`). Deletes of what is gone already resolve false, as nova takes them.
 */
import { z } from 'zod';
import type { Clock } from '../../lib/clock';
import type { AuthProvider } from '../../tracker/placement/auth';
import type { HttpTransport } from '../../tracker/placement/transport';
import { JsonService, UUID_SEGMENT, type ServiceFailures } from '../openstack/json-service';
import type { CinderApi, CinderAttachment, CinderSnapshot, CinderVolume, VolumeConnector, VolumeSpec } from './cinder-api';
import { CinderAuthError, CinderConflictError, CinderError, CinderNotFoundError, CinderRefusedError, CinderResponseError, CinderUnavailableError } from './errors';

/** The microversion of every request: attachments with `mode` (3.54) and `os-complete` (3.44). */
export const CINDER_MICROVERSION = '3.54';

export interface CinderHttpOptions {
  readonly auth: AuthProvider;
  /** nova's service user: its token goes as `X-Service-Token` with every request. */
  readonly serviceAuth?: AuthProvider;
  readonly transport: HttpTransport;
  /** Extra attempts after no answer or a 5xx (`[cinder] http_retries`). */
  readonly retries: number;
  readonly clock?: Clock;
  readonly retryDelayMs?: number;
  readonly onAnswer?: (method: string, route: string, status: number | 'error', seconds: number) => void;
}

const volume = z.object({
  id: z.string(),
  status: z.string(),
  size: z.number().int(),
  multiattach: z.boolean().default(false),
  bootable: z.union([z.boolean(), z.string()]).default(false).transform((b) => b === true || b === 'true'),
  migration_status: z.string().nullish(),
}) satisfies z.ZodType<CinderVolume, unknown>;

const attachment = z.object({
  id: z.string(),
  status: z.string(),
  volume_id: z.string(),
  instance: z.string().nullable().default(null),
  attach_mode: z.string().default('rw'),
  connection_info: z.record(z.string(), z.unknown()).nullable().default({}).transform((c) => c ?? {}),
}) satisfies z.ZodType<CinderAttachment, unknown>;

const answers = {
  volume: z.object({ volume }),
  attachment: z.object({ attachment }),
  completion: z.object({ save_volume_id: z.string() }),
  snapshot: z.object({ snapshot: z.object({ id: z.string(), status: z.string() }) satisfies z.ZodType<CinderSnapshot, unknown> }),
};

const failures: ServiceFailures = {
  unavailable: (what, detail, cause) => new CinderUnavailableError(what, detail, cause === undefined ? undefined : { cause }),
  auth: (what, detail, cause) => new CinderAuthError(what, detail, cause === undefined ? undefined : { cause }),
  refused: (what, status, detail) =>
    status === 404 ? new CinderNotFoundError(what, detail) : status === 409 ? new CinderConflictError(what, detail) : new CinderRefusedError(what, status, detail),
  response: (what, problem) => new CinderResponseError(what, problem),
};

const ID = /^[A-Za-z0-9_-]{1,64}$/;

export class CinderHttpClient implements CinderApi {
  private readonly service: JsonService;

  constructor(o: CinderHttpOptions) {
    const headers = async (): Promise<Record<string, string>> => ({
      'OpenStack-API-Version': `volume ${CINDER_MICROVERSION}`,
      ...(o.serviceAuth ? { 'X-Service-Token': await o.serviceAuth.token() } : {}),
    });
    this.service = new JsonService({ ...o, name: 'Cinder', failures, message: cinderMessage, headers, route: cinderRoute });
  }

  async getVolume(id: string): Promise<CinderVolume> {
    return (await this.service.json('GET', `/volumes/${seg(id)}`, answers.volume)).volume;
  }

  async getSnapshot(id: string): Promise<CinderSnapshot> {
    return (await this.service.json('GET', `/snapshots/${seg(id)}`, answers.snapshot)).snapshot;
  }

  async createVolume(spec: VolumeSpec): Promise<CinderVolume> {
    if (!Number.isInteger(spec.size) || spec.size < 1) throw new CinderError(`a volume's size must be a whole number of GiB, 1 or more, not ${String(spec.size)}`);
    return (await this.service.json('POST', '/volumes', answers.volume, { volume: spec }, { idempotent: false })).volume;
  }

  deleteVolume(id: string): Promise<boolean> {
    return this.service.remove(`/volumes/${seg(id)}`);
  }

  async createAttachment(volumeId: string, instanceUuid: string, connector: VolumeConnector | null, mode: 'rw' | 'ro'): Promise<CinderAttachment> {
    const body = { attachment: { volume_uuid: volumeId, instance_uuid: instanceUuid, connector, mode } };
    return (await this.service.json('POST', '/attachments', answers.attachment, body, { idempotent: false })).attachment;
  }

  async getAttachment(id: string): Promise<CinderAttachment> {
    return (await this.service.json('GET', `/attachments/${seg(id)}`, answers.attachment)).attachment;
  }

  async updateAttachment(id: string, connector: VolumeConnector): Promise<CinderAttachment> {
    return (await this.service.json('PUT', `/attachments/${seg(id)}`, answers.attachment, { attachment: { connector } })).attachment;
  }

  async completeAttachment(id: string): Promise<void> {
    await this.service.send('POST', `/attachments/${seg(id)}/action`, { 'os-complete': null });
  }

  async rollDetaching(volumeId: string): Promise<void> {
    await this.service.send('POST', `/volumes/${seg(volumeId)}/action`, { 'os-roll_detaching': {} });
  }

  deleteAttachment(id: string): Promise<boolean> {
    return this.service.remove(`/attachments/${seg(id)}`);
  }

  async migrateVolumeCompletion(oldId: string, newId: string, error: boolean): Promise<string> {
    const body = { 'os-migrate_volume_completion': { new_volume: seg(newId), error } };
    return (await this.service.json('POST', `/volumes/${seg(oldId)}/action`, answers.completion, body)).save_volume_id;
  }
}

/** `path` with ids as `{id}`: a metric label of bounded variety. */
export function cinderRoute(path: string): string {
  return (path.split('?')[0] ?? path)
    .split('/')
    .map((p) => (UUID_SEGMENT.test(p) ? '{id}' : p))
    .join('/');
}

/** A path segment, refused when it could change the route. */
function seg(v: string): string {
  if (!ID.test(v)) throw new CinderError(`${JSON.stringify(v).slice(0, 80)} is not a Cinder id (letters, digits, '_', '-')`);
  return v;
}

/** Cinder's own words for a refusal (`{"badRequest": {"message", "code"}}`, `{"itemNotFound": ...}`), as `: kind: message`. */
function cinderMessage(data: unknown): string {
  if (typeof data !== 'object' || data === null) return typeof data === 'string' && data.trim() ? `: ${data.trim().slice(0, 300)}` : '';
  for (const [kind, v] of Object.entries(data as Record<string, unknown>)) {
    if (typeof v === 'object' && v !== null && typeof (v as { message?: unknown }).message === 'string') return `: ${kind}: ${(v as { message: string }).message}`;
  }
  return '';
}
