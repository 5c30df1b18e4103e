/**
 * The operator's HTTP endpoint, on `[metrics] listen` (default 127.0.0.1:9180): `/metrics` in
 * Prometheus text format and `/healthz`, 200 when every check passes and 503 otherwise, with a
 * JSON body naming each check and why it failed. Anything else is 404. No framework: two routes.
 */
import { createServer, type Server } from 'node:http';
import type { Logger } from '../../lib/logging/logger';
import type { AgentMetrics } from './metrics';

export interface CheckResult {
  readonly ok: boolean;
  readonly detail?: string;
  readonly [key: string]: unknown;
}

/** Named checks; each is asked on every /healthz request and must answer quickly (use caches). */
export type HealthChecks = Readonly<Record<string, () => CheckResult | Promise<CheckResult>>>;

export interface HealthReport {
  readonly status: 'ok' | 'unhealthy';
  readonly checks: Readonly<Record<string, CheckResult>>;
}

export async function evaluateHealth(checks: HealthChecks): Promise<HealthReport> {
  const out: Record<string, CheckResult> = {};
  for (const [name, check] of Object.entries(checks)) {
    try {
      out[name] = await check();
    } catch (e) {
      out[name] = { ok: false, detail: e instanceof Error ? e.message : String(e) };
    }
  }
  return { status: Object.values(out).every((c) => c.ok) ? 'ok' : 'unhealthy', checks: out };
}

/** `host:port` or `[v6]:port`. @throws Error naming the expected form */
export function parseListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(listen.trim());
  const port = Number(m?.[3]);
  if (!m || port < 0 || port > 65535) throw new Error(`"${listen}" is not host:port (e.g. 127.0.0.1:9180)`);
  return { host: m[1] ?? m[2] ?? '127.0.0.1', port };
}

export class OpsServer {
  private server: Server | undefined;

  constructor(
    private readonly opts: { listen: string; metrics: AgentMetrics; checks: HealthChecks; logger: Logger },
  ) {}

  /** Starts listening; resolves with the bound address. @throws on bind failure (port taken) */
  start(): Promise<{ host: string; port: number }> {
    const { host, port } = parseListen(this.opts.listen);
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      const send = (status: number, type: string, body: string): void => {
        res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' });
        res.end(body);
      };
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'text/plain', 'method not allowed\n');
      if (path === '/metrics') {
        this.opts.metrics.render().then(
          (m) => send(200, m.contentType, m.body),
          (e: unknown) => send(500, 'text/plain', `metrics failed: ${String(e)}\n`),
        );
      } else if (path === '/healthz') {
        void evaluateHealth(this.opts.checks).then((h) => send(h.status === 'ok' ? 200 : 503, 'application/json', `${JSON.stringify(h)}\n`));
      } else {
        send(404, 'text/plain', 'not found: try /metrics or /healthz\n');
      }
    });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        const a = server.address();
        const bound = a && typeof a === 'object' ? { host: a.address, port: a.port } : { host, port };
        this.opts.logger.info({ listen: `${bound.host}:${bound.port}` }, 'metrics and health endpoint listening');
        resolve(bound);
      });
    });
  }

  stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return Promise.resolve();
    return new Promise((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }
}
