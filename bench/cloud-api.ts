/**
 * The whole small cloud of scripts/cloud as its admin sees it: the script's environment (where
 * each service listens), a Keystone token, and one HTTP request at a time to nova, Neutron,
 * Placement or Glance. The bench's network scenario and the cloud test suites use it.
 *
 * It is not: a stack manager (scripts/cloud is) nor an OpenStack client library: each call is one
 * request, its answer checked by the caller.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** The checkout: this file runs from `bench/` under ts-jest and from `dist/bench/` when built. */
const REPO = [join(__dirname, '..'), join(__dirname, '..', '..')].find((d) => existsSync(join(d, 'scripts', 'cloud'))) ?? join(__dirname, '..', '..');
const script = (name: string): string => join(REPO, 'scripts', name);

/** The cloud's services: nova's compute API (and the same API soft-deleting: scripts/cloud), Neutron (under /v2.0), Placement, Glance, Cinder. */
export type Service = 'nova' | 'nova-soft-delete' | 'neutron' | 'placement' | 'glance' | 'cinder';

export interface CloudReply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** Runs scripts/`name`; resolves its stdout, rejects with the tail of its stderr. */
export function runScript(name: string, args: readonly string[], timeoutMs = 900_000, env: Readonly<Record<string, string>> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', [script(name), ...args], { timeout: timeoutMs, maxBuffer: 1 << 24, env: { ...process.env, ...env } }, (err, stdout, stderr) =>
      err ? reject(new Error(`${name} ${args.join(' ')}: ${err.message}\n${stderr.split('\n').slice(-15).join('\n')}`)) : resolve(stdout),
    );
  });
}

/** A stack script's `env` output (`NAME=value` lines, a value maybe in one pair of quotes) as a map. */
export function shellAssignments(out: string): Record<string, string> {
  return Object.fromEntries(out.trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1).replace(/^(["'])(.*)\1$/, '$2')]));
}

/** `scripts/cloud env` as a map. */
export function cloudEnv(): Record<string, string> {
  return shellAssignments(execFileSync('bash', [script('cloud'), 'env'], { encoding: 'utf8' }));
}

/** Whether scripts/cloud reports every part running. */
export function cloudRunning(): Promise<boolean> {
  return runScript('cloud', ['status'], 120_000).then(
    () => true,
    () => false,
  );
}

export class CloudApi {
  private token = '';

  protected constructor(readonly env: Record<string, string>) {}

  /** The running cloud's API, logged in as its admin. */
  static async connect(): Promise<CloudApi> {
    const api = new CloudApi(cloudEnv());
    await api.login();
    return api;
  }

  get hosts(): string[] {
    return (this.env.CLOUD_HOSTS ?? '').split(' ').filter(Boolean);
  }

  /** `host`'s agent metrics endpoint (`http://.../metrics`). */
  metricsUrl(host: string): string {
    return `http://${this.env[`CLOUD_METRICS_${host.replace(/-/g, '_')}`] ?? ''}/metrics`;
  }

  /** One request to a service of the cloud as its admin. */
  async call(service: Service, method: string, path: string, body?: unknown, microversion?: string): Promise<CloudReply> {
    const base = { nova: this.env.NOVA_API_URL, 'nova-soft-delete': this.env.NOVA_SOFT_DELETE_API_URL, neutron: `${this.env.NEUTRON_URL}/v2.0`, placement: this.env.PLACEMENT_URL, glance: this.env.GLANCE_URL, cinder: this.env.CINDER_URL }[service];
    const headers: Record<string, string> = { 'Content-Type': 'application/json', 'X-Auth-Token': this.token };
    if (microversion) {
      if (service === 'nova' || service === 'nova-soft-delete') headers['X-OpenStack-Nova-API-Version'] = microversion;
      else headers['OpenStack-API-Version'] = `${service === 'cinder' ? 'volume' : service} ${microversion}`;
    }
    const res = await fetch(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await res.text();
    let parsed: Record<string, unknown> = {};
    try {
      parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      parsed = { text };
    }
    return { status: res.status, body: parsed };
  }

  /** An image in Glance, active, with `data` as its file. @returns its id */
  async uploadImage(name: string, data: Buffer, diskFormat: string): Promise<string> {
    const image = await this.must<{ id: string }>('glance', 'POST', '/v2/images', { name, disk_format: diskFormat, container_format: 'bare', visibility: 'public' });
    const res = await fetch(`${this.env.GLANCE_URL}/v2/images/${image.id}/file`, { method: 'PUT', headers: { 'Content-Type': 'application/octet-stream', 'X-Auth-Token': this.token }, body: data });
    if (res.status !== 204) throw new Error(`glance PUT /v2/images/${image.id}/file: ${res.status} ${await res.text()}`);
    return image.id;
  }

  /** A request that must answer 2xx; resolves the body's `key` (the whole body without one). */
  async must<T>(service: Service, method: string, path: string, body?: unknown, key?: string, microversion?: string): Promise<T> {
    const r = await this.call(service, method, path, body, microversion);
    if (r.status < 200 || r.status > 299) throw new Error(`${service} ${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return (key === undefined ? r.body : r.body[key]) as T;
  }

  protected async login(): Promise<void> {
    const res = await fetch(`${this.env.KEYSTONE_URL}/auth/tokens`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        auth: {
          identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: this.env.KEYSTONE_ADMIN_PASSWORD } } },
          scope: { project: { name: 'admin', domain: { id: 'default' } } },
        },
      }),
    });
    const t = res.headers.get('x-subject-token');
    if (res.status !== 201 || !t) throw new Error(`keystone: ${res.status} ${await res.text()}`);
    this.token = t;
  }
}
