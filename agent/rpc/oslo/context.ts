/**
 * Request contexts for what the agent sends: the flat dict nova's `RequestContext.to_dict()`
 * produces (oslo.context keys plus nova's), which the client packs as `_context_<key>`.
 *
 * Rules from nova (`docs/oslo-wire.md#contexts`): `timestamp` is `%Y-%m-%dT%H:%M:%S.%f` (microseconds, UTC,
 * no zone), `is_admin` is always sent, `user` and `user_id` both, `request_id` kept unchanged when
 * acting on behalf of a request. Not here: parsing contexts we receive (they stay plain dicts).
 */
import { randomUUID } from 'node:crypto';
import type { RpcContext } from './messages';

/** nova's context timestamp: UTC with six fractional digits and no zone. */
export function contextTimestamp(d: Date): string {
  return `${d.toISOString().slice(0, 23)}000`;
}

export function newRequestId(): string {
  return `req-${randomUUID()}`;
}

/** An admin service context (the agent acting for itself), with `overrides` applied last. */
export function serviceContext(overrides: RpcContext = {}, now: Date = new Date()): RpcContext {
  const base: Record<string, unknown> = {
    user: null,
    project_id: null,
    system_scope: null,
    project: null,
    domain: null,
    user_domain: null,
    project_domain: null,
    is_admin: true,
    read_only: false,
    show_deleted: false,
    auth_token: null,
    request_id: newRequestId(),
    global_request_id: null,
    resource_uuid: null,
    roles: [],
    user_identity: '- - - - -',
    is_admin_project: true,
    user_id: null,
    read_deleted: 'no',
    remote_address: null,
    timestamp: contextTimestamp(now),
    quota_class: null,
    user_name: null,
    project_name: null,
    service_catalog: [],
  };
  return { ...base, ...overrides };
}
