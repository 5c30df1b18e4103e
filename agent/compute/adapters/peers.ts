/**
 * Agent-to-agent messages (the compute manager's `ComputePeers` port) over the RPC client: casts
 * and calls to `compute.<host>` on the control exchange, exactly as nova-compute sends them to
 * another nova-compute, with the request context passed along.
 */
import type { ComputePeers, RequestContext } from '../ports';
import type { RpcClient } from '../../rpc/endpoint/client';
import { COMPUTE_TOPIC } from '../method-table';

/** Versions the agent sends: nova's compute API, and the agent's own namespace. */
const VERSION_BY_NAMESPACE = (ns: string | undefined): string => (ns ? '1.0' : '6.0');

export class RpcComputePeers implements ComputePeers {
  constructor(private readonly client: RpcClient) {}

  cast(host: string, method: string, args: Readonly<Record<string, unknown>>, ctx: RequestContext, namespace?: string): Promise<void> {
    return this.client.cast({ topic: COMPUTE_TOPIC, server: host, namespace: namespace ?? null, version: VERSION_BY_NAMESPACE(namespace) }, method, args, { context: ctx });
  }

  async call<T>(host: string, method: string, args: Readonly<Record<string, unknown>>, ctx: RequestContext, timeoutMs: number, namespace?: string): Promise<T> {
    const target = { topic: COMPUTE_TOPIC, server: host, namespace: namespace ?? null, version: VERSION_BY_NAMESPACE(namespace) };
    return (await this.client.call(target, method, args, { context: ctx, timeoutMs, callMonitorTimeout: Math.max(1, Math.floor(timeoutMs / 4000)) })) as T;
  }
}
