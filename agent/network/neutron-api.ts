/**
 * The `NeutronApi` port: the Networking API v2.0 calls a compute host makes (nova
 * `network/neutron.py`), each with the route it sends and what it throws.
 *
 * It is: the narrow interface the network flows use, so tests hand them a fake or a nock-backed
 * client. It is not: policy (which token, which ports to delete); `network-api.ts` decides that.
 *
 * Every method may throw `NeutronUnavailableError` (no answer or 5xx after `[neutron]
 * http_retries`), `NeutronAuthError` and `NeutronResponseError`; the others are listed per method.
 * Bodies are Neutron's, field names and all (`binding:host_id`, ...).
 */

/** One fixed IP of a port. */
export interface FixedIp {
  readonly subnet_id: string;
  readonly ip_address: string;
}

/** A port, the fields the agent reads. */
export interface NeutronPort {
  readonly id: string;
  readonly network_id: string;
  readonly mac_address: string;
  readonly fixed_ips: readonly FixedIp[];
  readonly device_id: string;
  readonly device_owner: string;
  readonly status: string;
  readonly admin_state_up: boolean;
  readonly tenant_id: string;
  readonly 'binding:host_id': string;
  readonly 'binding:vif_type': string;
  readonly 'binding:vif_details': Readonly<Record<string, unknown>>;
  readonly 'binding:vnic_type': string;
  readonly 'binding:profile': Readonly<Record<string, unknown>>;
  /** Admin-only: the port's resource request (minimum bandwidth QoS), when it has one. */
  readonly resource_request?: unknown;
}

/** A network, the fields the agent reads. */
export interface NeutronNetwork {
  readonly id: string;
  readonly name: string;
  readonly tenant_id: string;
  readonly mtu?: number;
  readonly subnets: readonly string[];
  readonly port_security_enabled?: boolean;
  readonly 'provider:physical_network'?: string | null;
  readonly 'provider:network_type'?: string | null;
}

/** A subnet, the fields the agent reads. */
export interface NeutronSubnet {
  readonly id: string;
  readonly network_id: string;
  readonly cidr: string;
  readonly ip_version: 4 | 6;
  readonly gateway_ip: string | null;
  readonly enable_dhcp: boolean;
  readonly dns_nameservers: readonly string[];
  readonly host_routes: readonly { readonly destination: string; readonly nexthop: string }[];
}

/** A floating IP mapped to a port. */
export interface NeutronFloatingIp {
  readonly floating_ip_address: string;
  readonly fixed_ip_address: string | null;
  readonly port_id: string | null;
}

/** A port binding of the `binding-extended` extension (live migration). */
export interface NeutronBinding {
  readonly host: string;
  readonly vif_type: string;
  readonly vif_details: Readonly<Record<string, unknown>>;
  readonly vnic_type: string;
  readonly profile: Readonly<Record<string, unknown>>;
  readonly status: 'ACTIVE' | 'INACTIVE' | (string & {});
}

/** Query filters: a value list sends the key once per value (`?id=a&id=b`). */
export type Filters = Readonly<Record<string, string | readonly string[]>>;

export interface NeutronApi {
  /** `GET /v2.0/extensions`: the aliases of the loaded extensions. */
  extensions(): Promise<ReadonlySet<string>>;
  /** `GET /v2.0/ports/{id}`. @throws NeutronNotFoundError */
  getPort(id: string): Promise<NeutronPort>;
  /** `GET /v2.0/ports?...`. */
  listPorts(filters: Filters): Promise<NeutronPort[]>;
  /** `POST /v2.0/ports` with `{port: body}`. @throws NeutronRefusedError, NeutronConflictError, NeutronNotFoundError (network) */
  createPort(body: Readonly<Record<string, unknown>>): Promise<NeutronPort>;
  /** `PUT /v2.0/ports/{id}` with `{port: body}`. @throws NeutronNotFoundError, NeutronRefusedError, NeutronConflictError */
  updatePort(id: string, body: Readonly<Record<string, unknown>>): Promise<NeutronPort>;
  /** `DELETE /v2.0/ports/{id}`; resolves false when the port was already gone (404). */
  deletePort(id: string): Promise<boolean>;
  /** `GET /v2.0/networks?id=...`: the networks among `ids` this user can see. */
  listNetworks(ids: readonly string[]): Promise<NeutronNetwork[]>;
  /** `GET /v2.0/subnets?id=...`. */
  listSubnets(ids: readonly string[]): Promise<NeutronSubnet[]>;
  /** `GET /v2.0/floatingips?port_id=...`; `[]` where Neutron has no L3 API (a 404, as nova takes it). */
  listFloatingIps(portId: string): Promise<NeutronFloatingIp[]>;
  /** `GET /v2.0/security-groups?...`: id and name of the groups matching `filters`. */
  listSecurityGroups(filters: Filters): Promise<{ id: string; name: string }[]>;
  /** `POST /v2.0/ports/{id}/bindings` (binding-extended): an INACTIVE binding to `host`. @throws NeutronConflictError (one exists), NeutronNotFoundError */
  createBinding(portId: string, binding: { host: string; vnic_type?: string; profile?: Readonly<Record<string, unknown>> }): Promise<NeutronBinding>;
  /** `GET /v2.0/ports/{id}/bindings/{host}`. @throws NeutronNotFoundError */
  getBinding(portId: string, host: string): Promise<NeutronBinding>;
  /** `PUT /v2.0/ports/{id}/bindings/{host}/activate`. @throws NeutronConflictError (already active), NeutronNotFoundError */
  activateBinding(portId: string, host: string): Promise<NeutronBinding>;
  /** `DELETE /v2.0/ports/{id}/bindings/{host}`; resolves false when there was none (404). */
  deleteBinding(portId: string, host: string): Promise<boolean>;
}
