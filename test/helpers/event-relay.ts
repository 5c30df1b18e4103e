/**
 * The part of nova-api that Neutron's notifier talks to, for tests in standalone mode: Neutron's
 * real `[nova]` notifier POSTs `/v2.1/os-server-external-events` to the compute endpoint of the
 * catalog, and this relay casts each event to the agent that has the instance, as nova-api does
 * (`external_instance_event` with InstanceExternalEvent-shaped events), answering Neutron with a
 * code per event (200, or 404 for an instance it was not told about, as nova-api answers).
 *
 * It is not: nova-api. It knows only the instances a test hands it (`place`), and never
 * authenticates the token it is sent.
 */
import { createServer, type Server } from 'node:http';

/** One event as Neutron's notifier sends it. */
export interface NovaEvent {
  readonly name: string;
  readonly server_uuid: string;
  readonly tag?: string;
  readonly status?: string;
}

export type Cast = (host: string, method: string, args: Record<string, unknown>) => Promise<void>;

export class EventRelay {
  /** Every event Neutron sent, in order, with the time it arrived. */
  readonly received: Array<NovaEvent & { at: number }> = [];
  private readonly hosts = new Map<string, string>();
  private server: Server | undefined;
  port = 0;

  constructor(private readonly cast: Cast) {}

  /** Instance `uuid` lives on agent `host` (nova-api's instance.host). */
  place(uuid: string, host: string): void {
    this.hosts.set(uuid, host);
  }

  /** The events Neutron sent about `uuid`. */
  eventsOf(uuid: string): NovaEvent[] {
    return this.received.filter((e) => e.server_uuid === uuid);
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void this.answer(req.method ?? '', req.url ?? '', Buffer.concat(chunks).toString('utf8')).then(({ status, body }) => {
          res.writeHead(status, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify(body));
        });
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const addr = this.server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : 0;
    return this;
  }

  /** Stops listening and drops the connections Neutron's notifier keeps open. */
  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  private async answer(method: string, url: string, text: string): Promise<{ status: number; body: unknown }> {
    if (method === 'GET') return { status: 200, body: { version: { id: 'v2.1', status: 'CURRENT', version: '2.93', min_version: '2.1' } } };
    if (method !== 'POST' || !url.endsWith('/os-server-external-events')) return { status: 404, body: { itemNotFound: { message: `no ${method} ${url} here` } } };
    const { events } = JSON.parse(text) as { events: NovaEvent[] };
    const byHost = new Map<string, NovaEvent[]>();
    const answered = events.map((e) => {
      this.received.push({ ...e, at: Date.now() });
      const host = this.hosts.get(e.server_uuid);
      if (!host) return { ...e, code: 404 };
      byHost.set(host, [...(byHost.get(host) ?? []), e]);
      return { ...e, code: 200, status: e.status ?? 'completed' };
    });
    try {
      for (const [host, evs] of byHost) {
        await this.cast(host, 'external_instance_event', {
          instances: [...new Set(evs.map((e) => e.server_uuid))].map((uuid) => ({ uuid })),
          events: evs.map((e) => ({ instance_uuid: e.server_uuid, name: e.name, status: e.status ?? 'completed', tag: e.tag ?? null })),
        });
      }
    } catch (e) {
      // nova-api answers 500 when it cannot cast; Neutron's notifier logs it and drops the batch.
      return { status: 500, body: { computeFault: { message: (e as Error).message } } };
    }
    return { status: answered.some((a) => a.code === 200) ? 200 : 404, body: { events: answered } };
  }
}
