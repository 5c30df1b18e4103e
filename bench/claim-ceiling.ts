/**
 * Placement's own ceiling for the one write an unclaimed spawn makes: `PUT /allocations/{consumer}`
 * with the body a scheduler writes (one provider, the flavor's resources, consumer_generation
 * null), sent by a plain node:http client with `concurrency` requests in flight, against the same
 * Placement and the same root provider the agent claims on. The compute scenario runs it in the
 * same run as its spawns, so their ratio says how much of Placement's rate the spawn path keeps;
 * a rate typed in from another day would say nothing (the shared stack's load moves it).
 *
 * Every consumer written is deleted afterwards (not timed), so the spawns that follow find the
 * host as empty as before.
 */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { median, percentile, pool, round } from './lib';

export interface ClaimCeilingOptions {
  readonly placementUrl: string;
  /** The provider every claim goes to (the agent's root). */
  readonly provider: string;
  readonly resources: Readonly<Record<string, number>>;
  readonly writes: number;
  readonly concurrency: number;
}

export interface ClaimCeiling {
  readonly concurrency: number;
  /** Writes answered 204. */
  readonly claimed: number;
  /** Writes answered otherwise, or not at all. */
  readonly failed: number;
  readonly seconds: number;
  readonly perSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

interface Answer {
  readonly status: number | 'error';
  readonly ms: number;
}

/** One request; resolves with its status (or 'error'), never rejects. */
function send(agent: Agent, base: URL, method: 'PUT' | 'DELETE', path: string, body?: string): Promise<Answer> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const headers: Record<string, string> = { 'OpenStack-API-Version': 'placement 1.28', 'X-Auth-Token': 'admin', Accept: 'application/json' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(body));
    }
    const req = request({ agent, host: base.hostname, port: base.port, method, path: `${base.pathname.replace(/\/$/, '')}${path}`, headers, timeout: 60000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0 }));
      res.on('error', () => resolve({ status: 'error', ms: performance.now() - t0 }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 'error', ms: performance.now() - t0 }));
    req.end(body);
  });
}

/** Measures the claim-write rate, then deletes what it wrote. */
export async function measureClaimCeiling(o: ClaimCeilingOptions): Promise<ClaimCeiling> {
  const base = new URL(o.placementUrl);
  // No connection reuse, as the agent's transport: uwsgi's http-socket closes after each answer anyway.
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const project = randomUUID();
  const user = randomUUID();
  const consumers = Array.from({ length: o.writes }, () => randomUUID());
  const answers: Answer[] = [];
  const body = JSON.stringify({ allocations: { [o.provider]: { resources: o.resources } }, project_id: project, user_id: user, consumer_generation: null });
  const t0 = performance.now();
  try {
    await pool(consumers, o.concurrency, async (c) => {
      answers.push(await send(agent, base, 'PUT', `/allocations/${c}`, body));
    });
    const seconds = (performance.now() - t0) / 1000;
    const claimed = answers.filter((a) => a.status === 204).length;
    const ms = answers.map((a) => a.ms);
    return {
      concurrency: o.concurrency,
      claimed,
      failed: answers.length - claimed,
      seconds: round(seconds, 2),
      perSecond: round(claimed / seconds),
      p50Ms: round(median(ms)),
      p99Ms: round(percentile(ms, 99)),
    };
  } finally {
    await pool(consumers, 8, async (c) => {
      await send(agent, base, 'DELETE', `/allocations/${c}`);
    });
    agent.destroy();
  }
}
