/**
 * A private Glance for a test: scripts/glance-stack on a free port (or a given one) with its own
 * stack directory (SQLite, file store; no keystone, or keystonemiddleware against a private
 * Keystone), uploads through Image API v2, the count of image-data GETs glance-api logged, and a
 * way to corrupt an image's stored bytes behind Glance's back.
 */
import { execFile } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { portFree } from './wait';

const REPO = join(__dirname, '..', '..');

/** Keystone in front of a private Glance: where it is, the glance user's password, and a token uploads use. */
export interface GlanceKeystone {
  readonly url: string;
  readonly servicePassword: string;
  readonly token: () => Promise<string>;
}

/** A free port in 22000-29999 for a private Glance. */
export async function freeGlancePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 22000 + Math.floor(Math.random() * 8000);
    if (await portFree(port)) return port;
  }
  throw new Error('no free port for a private Glance');
}

export class PrivateGlance {
  readonly dir = mkdtempSync(join(tmpdir(), 'ca-glance-'));

  private constructor(
    readonly port: number,
    private readonly keystone: GlanceKeystone | undefined,
  ) {}

  /** A Glance on `opts.port` (default: a free one), behind `opts.keystone` when given, started. */
  static async start(opts: { readonly port?: number; readonly keystone?: GlanceKeystone } = {}): Promise<PrivateGlance> {
    const g = new PrivateGlance(opts.port ?? (await freeGlancePort()), opts.keystone);
    await g.stack('up');
    return g;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Where glance-api keeps this instance's files. */
  get glanceDir(): string {
    return join(this.dir, `glance-${this.port}`);
  }

  /** Creates an image and uploads `data`; returns its id once it is active. */
  async upload(name: string, data: Buffer, diskFormat: 'raw' | 'qcow2'): Promise<string> {
    const auth = await this.authHeaders();
    const created = await fetch(`${this.url}/v2/images`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...auth },
      body: JSON.stringify({ name, disk_format: diskFormat, container_format: 'bare', visibility: 'public' }),
    });
    if (created.status !== 201) throw new Error(`POST /v2/images: ${created.status} ${await created.text()}`);
    const { id } = (await created.json()) as { id: string };
    const put = await fetch(`${this.url}/v2/images/${id}/file`, { method: 'PUT', headers: { 'Content-Type': 'application/octet-stream', ...auth }, body: data });
    if (put.status !== 204) throw new Error(`PUT /v2/images/${id}/file: ${put.status} ${await put.text()}`);
    return id;
  }

  /** The image record as Glance answers it. */
  async image(id: string): Promise<Record<string, unknown>> {
    const res = await fetch(`${this.url}/v2/images/${id}`, { headers: await this.authHeaders() });
    return (await res.json()) as Record<string, unknown>;
  }

  private async authHeaders(): Promise<Record<string, string>> {
    return this.keystone ? { 'X-Auth-Token': await this.keystone.token() } : {};
  }

  /** How many `GET /v2/images/<id>/file` glance-api's log holds that it answered with the data (200; not a refusal). */
  dataGets(id: string): number {
    const log = readFileSync(join(this.glanceDir, 'glance-api.log'), 'utf8');
    return log.split('\n').filter((l) => new RegExp(`"GET /v2/images/${id}/file HTTP/1\\.[01]" 200 `).test(l)).length;
  }

  /** The file the file store keeps the image's bytes in. */
  storedFile(id: string): string {
    return join(this.glanceDir, 'images', id);
  }

  async stop(): Promise<void> {
    await this.stack('down').catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private stack(cmd: 'up' | 'down'): Promise<void> {
    const ks = this.keystone;
    const auth = ks ? { GLANCE_AUTH: 'keystone', KEYSTONE_URL: ks.url, KEYSTONE_SERVICE_PASSWORD: ks.servicePassword } : {};
    const env = { ...process.env, GLANCE_PORT: String(this.port), STACK_DIR: this.dir, ...auth };
    return new Promise((resolve, reject) => {
      execFile('bash', [join(REPO, 'scripts', 'glance-stack'), cmd], { env, timeout: 180_000 }, (err, _out, stderr) =>
        err ? reject(new Error(`glance-stack ${cmd}: ${err.message}\n${stderr}`)) : resolve(),
      );
    });
  }
}
