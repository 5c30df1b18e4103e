/**
 * A private real Keystone and the Placement behind it, run by `scripts/keystone-stack` on ports and
 * a STACK_DIR of the test's own, with the admin calls tests need (users, application credentials,
 * regions and endpoints, token revocation) and a counting HTTP front, so a test sees exactly the
 * token requests its client made (keystonemiddleware's own requests go to Keystone directly).
 *
 * It is not: a Keystone stand-in. Every answer comes from Debian's Keystone.
 */
import { execFile } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { connect } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { portFree } from './wait';

const REPO = join(__dirname, '..', '..');

/** Credentials `scripts/keystone-stack` bootstraps (its defaults, set explicitly here). */
export const ADMIN_PASSWORD = 'ks-admin-test';
export const SERVICE_PASSWORD = 'ks-service-test';

async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 30000 + Math.floor(Math.random() * 9000);
    if ((await portFree(port)) && (await portFree(port + 1))) return port;
  }
  throw new Error('no free port pair for a private Keystone');
}

export interface KeystoneReply {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
}

/** A request a front saw: method, path, status and (for a token) the token it handed out. */
export interface SeenRequest {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly subjectToken?: string;
}

/** An HTTP front that forwards to `target` and records every request. */
export class CountingFront {
  readonly seen: SeenRequest[] = [];
  private server: Server | undefined;
  port = 0;

  constructor(private readonly target: number) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const up = httpRequest({ hostname: '127.0.0.1', port: this.target, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        const subject = answer.headers['x-subject-token'];
        this.seen.push({
          method: req.method ?? '',
          path: req.url ?? '',
          status: answer.statusCode ?? 0,
          ...(typeof subject === 'string' ? { subjectToken: subject } : {}),
        });
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const addr = this.server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : 0;
    return this;
  }

  /** Token requests (`POST /v3/auth/tokens`) seen so far. */
  tokenRequests(): SeenRequest[] {
    return this.seen.filter((r) => r.method === 'POST' && r.path.replace(/\?.*$/, '').endsWith('/v3/auth/tokens'));
  }

  close(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** A TLS front: terminates TLS with `cert` and passes the bytes to a plain port on 127.0.0.1. */
export async function tlsFront(target: number, cert: { cert: string; key: string }): Promise<{ url: string; close: () => Promise<void> }> {
  const server: TlsServer = createTlsServer({ cert: readFileSync(cert.cert), key: readFileSync(cert.key) }, (client) => {
    const upstream = connect(target, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    const done = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', done).on('close', done);
    upstream.on('error', done).on('close', done);
  });
  // A client that refuses the certificate aborts the handshake: not the front's failure.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { url: `https://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

export class PrivateKeystone {
  readonly dir = mkdtempSync(join(tmpdir(), 'ca-keystone-'));
  private adminToken: string | undefined;

  private constructor(
    readonly port: number,
    readonly placementPort: number,
    private readonly tokenSeconds: number,
    private readonly glancePort: number,
  ) {}

  /**
   * A Keystone on free ports; tokens live `tokenSeconds`. Its catalog's image endpoint is
   * 127.0.0.1:`glancePort` (a private Glance started there later), or a port nothing listens on.
   */
  static async create(tokenSeconds = 3600, glancePort = 1): Promise<PrivateKeystone> {
    const port = await freePort();
    return new PrivateKeystone(port, port + 1, tokenSeconds, glancePort);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/v3`;
  }

  get placementUrl(): string {
    return `http://127.0.0.1:${this.placementPort}`;
  }

  up(): Promise<string> {
    return this.stack('up');
  }

  down(): Promise<string> {
    return this.stack('down');
  }

  private stack(cmd: 'up' | 'down'): Promise<string> {
    const env = {
      ...process.env,
      KEYSTONE_PORT: String(this.port),
      KEYSTONE_PLACEMENT_PORT: String(this.placementPort),
      // Registered in the catalog only: Glance is started, if at all, by PrivateGlance.
      GLANCE_PORT: String(this.glancePort),
      STACK_DIR: this.dir,
      KEYSTONE_ADMIN_PASSWORD: ADMIN_PASSWORD,
      KEYSTONE_SERVICE_PASSWORD: SERVICE_PASSWORD,
      KEYSTONE_TOKEN_EXPIRATION: String(this.tokenSeconds),
    };
    return new Promise((resolve, reject) => {
      execFile('bash', [join(REPO, 'scripts', 'keystone-stack'), cmd], { env, timeout: 240000 }, (err, _out, stderr) =>
        err ? reject(new Error(`keystone-stack ${cmd}: ${err.message}\n${stderr}`)) : resolve(stderr),
      );
    });
  }

  /** One call to Keystone's API; `token` defaults to an admin token. */
  async call(method: string, path: string, body?: unknown, token?: string, extra: Record<string, string> = {}): Promise<KeystoneReply> {
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers: { 'Content-Type': 'application/json', 'X-Auth-Token': token ?? (await this.admin()), ...extra },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as unknown) : undefined };
  }

  /** Like `call`, but fails unless the status is one of `ok`. */
  async must<T>(method: string, path: string, body?: unknown, ok: readonly number[] = [200, 201, 204], token?: string): Promise<T> {
    const r = await this.call(method, path, body, token);
    if (!ok.includes(r.status)) throw new Error(`keystone ${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body as T;
  }

  /** A project-scoped token for a user of the Default domain, by password. */
  async passwordToken(user: string, password: string, project: string): Promise<string> {
    const res = await fetch(`${this.url}/auth/tokens`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        auth: {
          identity: { methods: ['password'], password: { user: { name: user, domain: { id: 'default' }, password } } },
          scope: { project: { name: project, domain: { id: 'default' } } },
        },
      }),
    });
    const token = res.headers.get('x-subject-token');
    if (res.status !== 201 || !token) throw new Error(`keystone refused ${user}: ${res.status} ${await res.text()}`);
    return token;
  }

  private async admin(): Promise<string> {
    this.adminToken ??= await this.passwordToken('admin', ADMIN_PASSWORD, 'admin');
    return this.adminToken;
  }

  /** A user of the Default domain with the admin role on the `service` project (as nova's user has). */
  async createServiceUser(name: string, password: string): Promise<string> {
    const project = (await this.must<{ projects: Array<{ id: string }> }>('GET', '/projects?name=service')).projects[0];
    const role = (await this.must<{ roles: Array<{ id: string }> }>('GET', '/roles?name=admin')).roles[0];
    if (!project || !role) throw new Error('keystone-stack did not bootstrap the service project and admin role');
    const user = await this.must<{ user: { id: string } }>('POST', '/users', { user: { name, password, domain_id: 'default' } });
    await this.must('PUT', `/projects/${project.id}/users/${user.user.id}/roles/${role.id}`);
    return user.user.id;
  }

  /** An application credential the user makes for itself (its roles on `service`). */
  async createApplicationCredential(userId: string, user: string, password: string, name: string): Promise<{ id: string; secret: string }> {
    const token = await this.passwordToken(user, password, 'service');
    const r = await this.must<{ application_credential: { id: string; secret: string } }>(
      'POST',
      `/users/${userId}/application_credentials`,
      { application_credential: { name } },
      [201],
      token,
    );
    return { id: r.application_credential.id, secret: r.application_credential.secret };
  }

  /** Revokes one token (`DELETE /v3/auth/tokens` as the admin). */
  async revokeToken(token: string): Promise<void> {
    const r = await this.call('DELETE', '/auth/tokens', undefined, undefined, { 'X-Subject-Token': token });
    if (r.status !== 204) throw new Error(`revoking a token: ${r.status} ${JSON.stringify(r.body)}`);
  }
}
