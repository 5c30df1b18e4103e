/**
 * What the compute manager needs from the rest of the agent, as narrow ports: other compute hosts
 * (agent-to-agent casts and calls, as nova-compute does for resize and live migration), the
 * notification sink (oslo versioned notifications in production), and the durable record store.
 * The RPC layer implements the first two over AMQP; tests use in-process fakes.
 */

/** The request context passed along (nova's RequestContext, the fields the agent uses). */
export interface RequestContext {
  readonly request_id?: string;
  readonly global_request_id?: string;
  readonly project_id?: string;
  readonly user_id?: string;
  readonly [key: string]: unknown;
}

/** The request id Placement is sent with a write: the global one when the request has it, so one user request is traceable across services. */
export function placementRequestId(ctx: RequestContext): string | undefined {
  return ctx.global_request_id ?? ctx.request_id;
}

/** Other compute hosts. */
export interface ComputePeers {
  /** Fire-and-forget to `host`'s compute topic; resolves once the broker has the message. */
  cast(host: string, method: string, args: Readonly<Record<string, unknown>>, ctx: RequestContext, namespace?: string): Promise<void>;
  /** Call and wait for the result. @throws the remote failure, rebuilt, or a timeout */
  call<T>(host: string, method: string, args: Readonly<Record<string, unknown>>, ctx: RequestContext, timeoutMs: number, namespace?: string): Promise<T>;
}

export interface Notification {
  /** e.g. `instance.create.end` */
  readonly event_type: string;
  readonly priority: 'INFO' | 'ERROR';
  /** A NovaObject-style payload (`nova_object.name`, `.data`, ...). */
  readonly payload: Readonly<Record<string, unknown>>;
}

/** Where outcomes of casts are published (casts have no reply). Never throws: a lost notification is logged. */
export interface Notifier {
  notify(n: Notification, ctx: RequestContext): Promise<void>;
}

/** Durable records (the journal's key/value store): written before the side effect they describe. */
export interface RecordStore {
  put(kind: string, key: string, value: unknown): Promise<void>;
  del(kind: string, key: string): Promise<void>;
  get<T>(kind: string, key: string): T | undefined;
  list<T>(kind: string): Array<[string, T]>;
}

/** A Notifier that keeps what it is given (tests, and the agent without a broker). */
export class MemoryNotifier implements Notifier {
  readonly sent: Array<Notification & { ctx: RequestContext }> = [];
  notify(n: Notification, ctx: RequestContext): Promise<void> {
    this.sent.push({ ...n, ctx });
    return Promise.resolve();
  }
}
