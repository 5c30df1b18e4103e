/**
 * The Glance client: Image API v2 over node:http/node:https, streaming the image data both ways (it
 * never holds an image in memory), with `[glance] num_retries` retries of requests that got no
 * answer or a 5xx, and one retry with a fresh token after a 401; an upload, whose stream cannot be
 * sent twice, is tried once.
 *
 * It is: the `GlanceApi` port's implementation. It is not: a cache or a checksum check (the
 * qemu driver's `../qemu/image-cache.ts` does both while it writes the stream to disk).
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { backoffDelay } from '../../lib/backoff';
import { systemClock, type Clock } from '../../lib/clock';
import type { Readable } from 'node:stream';
import type { GlanceApi, GlanceAuth, GlanceImage, GlanceImageWrites, ImageData, ImagePatchOp, ListedImage } from './api';
import { GlanceAuthError, GlanceError, GlanceNoDataError, GlanceNotFoundError, GlanceResponseError, GlanceUnavailableError } from './errors';
import { parseImage, parseImageList } from './responses';

export interface GlanceHttpOptions {
  readonly auth: GlanceAuth;
  /** Extra attempts after no answer or a 5xx. */
  readonly numRetries: number;
  /** Inactivity deadline (connect, headers, between chunks of a download). */
  readonly timeoutMs: number;
  readonly clock?: Clock;
  /** Backoff between retries (ms); tests shorten it. */
  readonly retryDelayMs?: number;
}

const MAX_JSON_BYTES = 4 * 1024 * 1024;
const IMAGE_ID = /^[A-Za-z0-9-]{1,64}$/;

/** What a request other than a plain GET sends. */
interface RequestBody {
  readonly method: 'PATCH' | 'PUT' | 'DELETE';
  readonly type?: string;
  readonly data?: Buffer | Readable;
  readonly length: number;
}

export class GlanceHttpClient implements GlanceApi, GlanceImageWrites {
  private readonly clock: Clock;

  constructor(private readonly opts: GlanceHttpOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  async getImage(id: string): Promise<GlanceImage> {
    const what = `GET /v2/images/${id}`;
    const res = await this.open(what, `/v2/images/${encodeURIComponent(checkId(what, id))}`, 'application/json');
    const body = await readJson(what, res);
    const parsed = parseImage(body);
    if ('problem' in parsed) throw new GlanceResponseError(what, `the answer does not fit: ${parsed.problem}`);
    return parsed.image;
  }

  async openImageData(id: string): Promise<ImageData> {
    const what = `GET /v2/images/${id}/file`;
    const res = await this.open(what, `/v2/images/${encodeURIComponent(checkId(what, id))}/file`, 'application/octet-stream');
    if (res.statusCode === 204) {
      res.resume();
      throw new GlanceNoDataError(what);
    }
    const len = Number(res.headers['content-length']);
    return { stream: res, length: Number.isSafeInteger(len) && len >= 0 ? len : null };
  }

  async updateImage(id: string, ops: readonly ImagePatchOp[]): Promise<void> {
    const what = `PATCH /v2/images/${id}`;
    const data = Buffer.from(JSON.stringify(ops));
    const res = await this.open(what, `/v2/images/${encodeURIComponent(checkId(what, id))}`, 'application/json', { method: 'PATCH', type: 'application/openstack-images-v2.1-json-patch', data, length: data.length });
    res.resume();
  }

  async uploadImageData(id: string, data: Readable, bytes: number): Promise<void> {
    const what = `PUT /v2/images/${id}/file`;
    const res = await this.open(what, `/v2/images/${encodeURIComponent(checkId(what, id))}/file`, 'application/json', { method: 'PUT', type: 'application/octet-stream', data, length: bytes });
    res.resume();
  }

  async deleteImage(id: string): Promise<void> {
    const what = `DELETE /v2/images/${id}`;
    try {
      const res = await this.open(what, `/v2/images/${encodeURIComponent(checkId(what, id))}`, 'application/json', { method: 'DELETE', length: 0 });
      res.resume();
    } catch (e) {
      if (!(e instanceof GlanceNotFoundError)) throw e;
    }
  }

  async listImages(query: Readonly<Record<string, string>>): Promise<ListedImage[]> {
    const what = 'GET /v2/images';
    const res = await this.open(what, `/v2/images?${new URLSearchParams({ limit: '1000', ...query }).toString()}`, 'application/json');
    const parsed = parseImageList(await readJson(what, res));
    if ('problem' in parsed) throw new GlanceResponseError(what, `the answer does not fit: ${parsed.problem}`);
    return parsed.images;
  }

  /**
   * A 2xx answer to `path` (GET, or `body`'s method), after retries; other statuses are
   * classified. A streamed body is sent once: no retry can replay it.
   */
  private async open(what: string, path: string, accept: string, body?: RequestBody): Promise<IncomingMessage> {
    let reauthed = false;
    const retries = body?.data !== undefined && !Buffer.isBuffer(body.data) ? 0 : this.opts.numRetries;
    for (let attempt = 0; ; attempt++) {
      let res: IncomingMessage;
      try {
        res = await this.send(what, path, accept, body);
      } catch (e) {
        if (!(e instanceof GlanceUnavailableError) || attempt >= retries) throw e;
        await this.clock.sleep(backoffDelay(attempt + 1, { initialMs: this.opts.retryDelayMs ?? 500, maxMs: 10_000 }));
        continue;
      }
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) return res;
      const detail = await errorText(res);
      if (status === 404) throw new GlanceNotFoundError(what);
      if (status === 401 && !reauthed && retries > 0) {
        reauthed = true;
        this.opts.auth.invalidate();
        attempt--;
        continue;
      }
      if (status === 401 || status === 403) throw new GlanceAuthError(what, `Glance refused the token (${status})${detail}`);
      if (status >= 500) {
        if (attempt >= retries) throw new GlanceUnavailableError(what, `status ${status} after ${attempt + 1} attempt(s)${detail}`);
        await this.clock.sleep(backoffDelay(attempt + 1, { initialMs: this.opts.retryDelayMs ?? 500, maxMs: 10_000 }));
        continue;
      }
      throw new GlanceResponseError(what, `unexpected status ${status}${detail}`);
    }
  }

  private async send(what: string, path: string, accept: string, body?: RequestBody): Promise<IncomingMessage> {
    let base: string;
    let token: string | undefined;
    try {
      base = await this.opts.auth.endpoint();
      token = await this.opts.auth.token();
    } catch (e) {
      if (e instanceof GlanceError) throw e;
      throw new GlanceAuthError(what, `no Glance endpoint or token: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    const url = new URL(base.replace(/\/+$/, '') + path);
    const headers: Record<string, string> = {
      Accept: accept,
      ...(token === undefined ? {} : { 'X-Auth-Token': token }),
      ...(body?.type ? { 'Content-Type': body.type } : {}),
      ...(body ? { 'Content-Length': String(body.length) } : {}),
    };
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = send(url, { method: body?.method ?? 'GET', headers, agent: false }, (res) => {
        req.setTimeout(0);
        resolve(res);
      });
      // The inactivity deadline also covers an upload whose reader stalls.
      req.setTimeout(this.opts.timeoutMs, () => req.destroy(Object.assign(new Error(`no answer within ${this.opts.timeoutMs} ms`), { code: 'ETIMEDOUT' })));
      req.on('error', (e: NodeJS.ErrnoException) => reject(new GlanceUnavailableError(what, `${url.origin}: ${e.code ?? e.message}`, { cause: e })));
      if (!body || body.data === undefined) req.end();
      else if (Buffer.isBuffer(body.data)) req.end(body.data);
      else {
        body.data.once('error', (e) => req.destroy(e));
        body.data.pipe(req);
      }
    }).then((res) => {
      // A download that stalls: no byte for timeoutMs breaks the stream with an error.
      res.socket.setTimeout(this.opts.timeoutMs, () => res.destroy(new GlanceUnavailableError(what, `no data for ${this.opts.timeoutMs} ms`)));
      return res;
    });
  }
}

function checkId(what: string, id: string): string {
  if (!IMAGE_ID.test(id)) throw new GlanceResponseError(what, 'not an image id (letters, digits and -)');
  return id;
}

/** The body of an answer as JSON; @throws GlanceResponseError, GlanceUnavailableError */
async function readJson(what: string, res: IncomingMessage): Promise<unknown> {
  const text = await readText(what, res, MAX_JSON_BYTES);
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new GlanceResponseError(what, 'the answer is not JSON', { cause: e });
  }
}

/** ": <first 200 characters of the body>" of an error answer, or ''. */
async function errorText(res: IncomingMessage): Promise<string> {
  const text = await readText('', res, 64 * 1024).catch(() => '');
  const flat = text.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
  return flat ? `: ${flat.slice(0, 200)}` : '';
}

function readText(what: string, res: IncomingMessage, max: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) res.destroy(new GlanceResponseError(what, `answer over ${max} bytes`));
      else chunks.push(c);
    });
    res.on('error', (e) => reject(e instanceof GlanceError ? e : new GlanceUnavailableError(what, `answer cut off: ${e.message}`, { cause: e })));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}
