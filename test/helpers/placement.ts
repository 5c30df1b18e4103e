/** Real-Placement helpers for integration tests: a client on the dev stack, and a capturing logger. */
import { randomUUID } from 'node:crypto';
import { createLogger, type Logger } from '../../lib/logging/logger';
import { NoAuth } from '../../tracker/placement/auth';
import { PlacementClient } from '../../tracker/placement/client';
import { PlacementHttp, RequestCounter } from '../../tracker/placement/http';
import { PLACEMENT_URL } from './stack';

export function placementClient(counter = new RequestCounter(), url = PLACEMENT_URL): PlacementClient {
  return new PlacementClient(new PlacementHttp({ auth: new NoAuth(url), counter }));
}

export interface CapturedLog {
  readonly logger: Logger;
  readonly lines: () => Array<Record<string, unknown>>;
}

export function captureLog(level: 'debug' | 'info' = 'info'): CapturedLog {
  const raw: string[] = [];
  const { logger } = createLogger({ level, sink: { write: (l) => raw.push(l) } });
  return { logger, lines: () => raw.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** A host name unique to one test, so tests never see each other's providers. */
export function uniqueHost(prefix: string): { name: string; uuid: string } {
  const uuid = randomUUID();
  return { name: `${prefix}-${uuid.slice(0, 8)}`, uuid };
}

/** Deletes a whole tree bottom-up, allocations first; for test cleanup. */
export async function deleteTree(api: PlacementClient, rootUuid: string): Promise<void> {
  const providers = await api.providersInTree(rootUuid).catch(() => []);
  for (const p of providers) {
    const allocs = await api.providerAllocations(p.uuid);
    for (const c of Object.keys(allocs.allocations)) await api.deleteAllocations(c);
  }
  for (const p of [...providers].reverse()) await api.deleteProvider(p.uuid);
}
