/**
 * The Glance ports: the two Image API v2 calls the qemu driver's image cache makes, the writes a
 * snapshot makes (the compute manager's), and the auth port the client gets its token and
 * endpoint from.
 *
 * It is: interfaces and the image record the driver reads. It is not: an implementation
 * (`http.ts`), nor keystone (the agent hands in its keystone auth through `GlanceAuth`).
 */
import type { Readable } from 'node:stream';

/** What the cache reads of a Glance image (`GET /v2/images/{id}`). */
export interface GlanceImage {
  readonly id: string;
  /** `active` when the image has data; `queued`, `saving`, `killed`, `deleted`... otherwise. */
  readonly status: string;
  readonly diskFormat: string | null;
  /** Bytes of the image data, as Glance stored them. */
  readonly size: number | null;
  /** md5 of the data, hex. */
  readonly checksum: string | null;
  /** The multihash algorithm (`sha512` by default) and its hex value (Image API 2.7+). */
  readonly osHashAlgo: string | null;
  readonly osHashValue: string | null;
}

/** An open download: the data, to be consumed or destroyed by the caller. */
export interface ImageData {
  readonly stream: Readable;
  /** Content-Length, when Glance sent one. */
  readonly length: number | null;
}

/** Image API v2 (any 2.x: both calls exist since 2.0). */
export interface GlanceApi {
  /**
   * `GET /v2/images/{id}`: the image record.
   * @throws GlanceNotFoundError (404), GlanceUnavailableError (no answer, 5xx, after num_retries),
   *   GlanceAuthError (401/403, or no token/endpoint), GlanceResponseError (another status, a body that does not fit)
   */
  getImage(id: string): Promise<GlanceImage>;
  /**
   * `GET /v2/images/{id}/file`: the image data, streamed. Retries apply to opening it only; a
   * stream that breaks midway emits an error (the caller starts again or gives up).
   * @throws GlanceNotFoundError (404), GlanceNoDataError (204: the image has no data),
   *   GlanceUnavailableError, GlanceAuthError, GlanceResponseError
   */
  openImageData(id: string): Promise<ImageData>;
}

/** One JSON-patch operation of `PATCH /v2/images/{id}` (a property: `/<name>`). */
export interface ImagePatchOp {
  readonly op: 'add' | 'replace' | 'remove';
  readonly path: string;
  readonly value?: string;
}

/** An image as `GET /v2/images` lists it: what a backup rotation reads. */
export interface ListedImage {
  readonly id: string;
  readonly status: string;
  readonly createdAt: string;
}

/** The Image API v2 writes of a snapshot: fill the image nova-api created, and rotate backups. */
export interface GlanceImageWrites {
  /**
   * `PATCH /v2/images/{id}` with `ops` (formats and properties; the formats only while the image is queued).
   * @throws GlanceNotFoundError, GlanceUnavailableError, GlanceAuthError, GlanceResponseError (another status: a 409 or 400 names what Glance refused)
   */
  updateImage(id: string, ops: readonly ImagePatchOp[]): Promise<void>;
  /**
   * `PUT /v2/images/{id}/file`: the image data, streamed from `data` (`bytes` long); Glance
   * makes the image `active`. Tried once (the stream cannot be replayed).
   * @throws GlanceNotFoundError, GlanceUnavailableError, GlanceAuthError, GlanceResponseError, the stream's error
   */
  uploadImageData(id: string, data: Readable, bytes: number): Promise<void>;
  /** `DELETE /v2/images/{id}`; an image gone already is fine. @throws GlanceUnavailableError, GlanceAuthError, GlanceResponseError */
  deleteImage(id: string): Promise<void>;
  /** `GET /v2/images` with `query` (filters such as `instance_uuid=...`, `sort_key`, `sort_dir`; at most 1000). @throws GlanceUnavailableError, GlanceAuthError, GlanceResponseError */
  listImages(query: Readonly<Record<string, string>>): Promise<ListedImage[]>;
}

/** Where Glance is and what token to send; the agent's keystone auth fits it. */
export interface GlanceAuth {
  /** A token for X-Auth-Token, or undefined for a Glance without keystone. */
  token(): Promise<string | undefined>;
  /** The Glance base URL, without a trailing slash. */
  endpoint(): Promise<string>;
  /** Forgets the cached token after a 401. */
  invalidate(): void;
}

/** A fixed endpoint and no token: `[glance] endpoint_override` in front of a Glance without keystone. */
export class StaticGlanceAuth implements GlanceAuth {
  constructor(private readonly url: string) {}
  token(): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }
  endpoint(): Promise<string> {
    return Promise.resolve(this.url.replace(/\/+$/, ''));
  }
  invalidate(): void {}
}
