/**
 * The one place bytes go to Placement and keystone: a small JSON-over-HTTP(S) client on
 * node:http/node:https.
 *
 * Why not axios: it would be the agent's largest dependency by resident memory (about 8 MB of the
 * daemon's idle RSS: form-data, mime-db, proxy agents, none of which a JSON client talking to one
 * endpoint needs). This module does exactly what PlacementHttp and KeystoneAuth ask: one request,
 * a deadline, a CA bundle, no redirects, no connection reuse, JSON in and out.
 *
 * It is not a general client: no redirects, no proxies, no streaming; a body over `maxBodyBytes`
 * is an error. Every failure to get an answer rejects with a TransportError carrying the
 * underlying code (ECONNREFUSED, ETIMEDOUT, a TLS verification code...); every answer resolves,
 * whatever its status.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

export interface TransportRequest {
  readonly method: string;
  /** Absolute http:// or https:// URL. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Sent as is (the caller serialises JSON). */
  readonly body?: string;
}

export interface TransportResponse {
  readonly status: number;
  /** Header names in lower case. */
  readonly headers: IncomingHttpHeaders;
  /** The body parsed as JSON when it is JSON, else the text ('' for none). */
  readonly data: unknown;
}

/** Sends one HTTP request. Narrow so tests can hand PlacementHttp a fake. */
export interface HttpTransport {
  send(req: TransportRequest): Promise<TransportResponse>;
}

/** No answer was had: refused, reset, timed out, TLS did not verify, body too large. */
const TLS_FAILURE = /CERT|SELF_SIGNED|UNABLE_TO_|ERR_TLS|DEPTH_ZERO|HOSTNAME_MISMATCH|ERR_SSL/;

/** Whether a transport error code is a certificate or TLS failure (a retry cannot fix it). */
export function isTlsFailure(code: string): boolean {
  return TLS_FAILURE.test(code);
}

export class TransportError extends Error {
  constructor(
    message: string,
    /** The node error code (ECONNREFUSED, ETIMEDOUT, DEPTH_ZERO_SELF_SIGNED_CERT...) or ''. */
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'TransportError';
  }
}

export interface NodeTransportOptions {
  /** Deadline for the whole exchange, connect to last byte. */
  readonly timeoutMs?: number;
  /** PEM bytes of the CA bundle for https URLs (default: the system store). */
  readonly ca?: Buffer;
  readonly maxBodyBytes?: number;
}

export class NodeHttpTransport implements HttpTransport {
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  // Placement behind uwsgi's http-socket closes every connection; reusing one races.
  private readonly httpAgent = new HttpAgent({ keepAlive: false });
  private readonly httpsAgent: HttpsAgent;

  constructor(opts: NodeTransportOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? 30000;
    this.maxBodyBytes = opts.maxBodyBytes ?? 256 * 1024 * 1024;
    this.httpsAgent = new HttpsAgent({ keepAlive: false, ...(opts.ca ? { ca: opts.ca } : {}) });
  }

  send(req: TransportRequest): Promise<TransportResponse> {
    let url: URL;
    try {
      url = new URL(req.url);
    } catch (e) {
      return Promise.reject(new TransportError(`invalid URL ${req.url}`, 'ERR_INVALID_URL', { cause: e }));
    }
    const https = url.protocol === 'https:';
    if (!https && url.protocol !== 'http:') {
      return Promise.reject(new TransportError(`unsupported protocol ${url.protocol} in ${req.url}`, 'ERR_INVALID_PROTOCOL'));
    }
    const headers: Record<string, string | number> = { ...req.headers };
    const body = req.body === undefined ? undefined : Buffer.from(req.body, 'utf8');
    if (body) headers['Content-Length'] = body.length;
    return new Promise<TransportResponse>((resolve, reject) => {
      let settled = false;
      const fail = (message: string, code: string, cause?: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        creq.destroy();
        reject(new TransportError(message, code, { cause }));
      };
      const send = https ? httpsRequest : httpRequest;
      const creq = send(url, { method: req.method, headers, agent: https ? this.httpsAgent : this.httpAgent }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > this.maxBodyBytes) fail(`response body over ${this.maxBodyBytes} bytes`, 'ERR_BODY_TOO_LARGE');
          else chunks.push(c);
        });
        res.on('error', (e: NodeJS.ErrnoException) => fail(e.message, e.code ?? '', e));
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, data: parseBody(Buffer.concat(chunks).toString('utf8')) });
        });
      });
      const timer = setTimeout(() => fail(`timeout of ${this.timeoutMs} ms exceeded`, 'ETIMEDOUT'), this.timeoutMs);
      creq.on('error', (e: NodeJS.ErrnoException) => fail(e.message, e.code ?? '', e));
      creq.end(body);
    });
  }
}

function parseBody(text: string): unknown {
  if (text === '') return '';
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
