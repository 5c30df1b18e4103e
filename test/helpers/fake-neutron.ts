/**
 * An in-memory Neutron behind the `NeutronApi` port, for unit tests of the network service and
 * the compute flows, with the Neutron rules the agent can get wrong: a port is bound only to a
 * host that has a live network agent (`aliveHosts`, as ML2/OVN needs an alive OVN controller
 * there), otherwise its `binding:vif_type` is `binding_failed`; unbinding (`binding:host_id`
 * null) makes it `unbound`; a fixed IP in use is a conflict; a missing port or network is a 404.
 * Every call is logged in order, and any method can be made to fail (`fail`, or `down` for all).
 *
 * It is not: a model of Neutron's policy or of DHCP; statuses change only when a test says so
 * (`setStatus`), as the network agent would.
 */
import { randomUUID } from 'node:crypto';
import type { Filters, NeutronApi, NeutronBinding, NeutronFloatingIp, NeutronNetwork, NeutronPort, NeutronSubnet } from '../../agent/network/neutron-api';
import { NeutronConflictError, NeutronNotFoundError, NeutronUnavailableError } from '../../agent/network/errors';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** A port as the fake stores it: Neutron's fields, plus the ones the agent writes but does not read back. */
export type FakePort = Mutable<NeutronPort> & { security_groups: string[]; dns_name: string };

export interface FakeCall {
  readonly method: keyof NeutronApi;
  readonly args: readonly unknown[];
}

const copy = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

export class FakeNeutron implements NeutronApi {
  readonly networks = new Map<string, NeutronNetwork>();
  readonly subnets = new Map<string, NeutronSubnet>();
  readonly ports = new Map<string, FakePort>();
  readonly securityGroups: Array<{ id: string; name: string; tenant_id: string }> = [];
  readonly floatingIps: NeutronFloatingIp[] = [];
  readonly bindings = new Map<string, NeutronBinding>();
  /** Hosts with a live network agent: ports bound elsewhere get `binding_failed`. */
  readonly aliveHosts = new Set<string>();
  readonly aliases = new Set<string>(['binding', 'binding-extended', 'security-group', 'port-security']);
  /** Networks whose new ports carry a resource request (a minimum-bandwidth QoS policy). */
  readonly qosNetworks = new Set<string>();
  /** What OVN puts in `binding:vif_details` for this host's chassis. */
  vifDetails: Record<string, unknown> = { port_filter: true, connectivity: 'l2', bridge_name: 'br-int', datapath_type: 'netdev' };
  /** Every call, in order. */
  readonly calls: FakeCall[] = [];
  /** When true, every call fails as an unreachable Neutron does (after the client's retries). */
  down = false;
  private readonly faults = new Map<keyof NeutronApi, { error: () => Error; times: number }>();
  private macSeq = 1;

  /** A network with one IPv4 subnet `10.<n>.0.0/24`, gateway `.1`, DNS 10.<n>.0.2. */
  addNetwork(o: { id?: string; name?: string; tenant_id?: string; mtu?: number; type?: string; subnet?: Partial<NeutronSubnet> } = {}): { network: NeutronNetwork; subnet: NeutronSubnet } {
    const n = this.networks.size + 1;
    const id = o.id ?? randomUUID();
    const subnet: NeutronSubnet = {
      id: randomUUID(),
      network_id: id,
      cidr: `10.${n}.0.0/24`,
      ip_version: 4,
      gateway_ip: `10.${n}.0.1`,
      enable_dhcp: true,
      dns_nameservers: [`10.${n}.0.2`],
      host_routes: [],
      ...o.subnet,
    };
    const network: NeutronNetwork = {
      id,
      name: o.name ?? `net-${n}`,
      tenant_id: o.tenant_id ?? 'proj-1',
      mtu: o.mtu ?? 1442,
      subnets: [subnet.id],
      'provider:network_type': o.type ?? 'geneve',
      'provider:physical_network': null,
    };
    this.networks.set(id, network);
    this.subnets.set(subnet.id, subnet);
    return { network, subnet };
  }

  /** A port made beforehand (a user's `--port`), unbound. */
  addPort(networkId: string, over: Partial<FakePort> = {}): FakePort {
    const port = this.newPort(networkId, {}, over);
    this.ports.set(port.id, port);
    return port;
  }

  addSecurityGroup(name: string, tenant_id = 'proj-1', id: string = randomUUID()): string {
    this.securityGroups.push({ id, name, tenant_id });
    return id;
  }

  /** The network agent reports the port up (or down). */
  setStatus(portId: string, status: string): void {
    const p = this.ports.get(portId);
    if (p) p.status = status;
  }

  /** `method` throws `error` (default: Neutron unavailable) on its next `times` calls. */
  fail(method: keyof NeutronApi, error?: () => Error, times = Number.POSITIVE_INFINITY): void {
    this.faults.set(method, { error: error ?? (() => new NeutronUnavailableError(`fake ${method}`, 'connect ECONNREFUSED 127.0.0.1:9696')), times });
  }

  heal(): void {
    this.faults.clear();
    this.down = false;
  }

  /** The calls of `method`, their arguments. */
  callsOf(method: keyof NeutronApi): Array<readonly unknown[]> {
    return this.calls.filter((c) => c.method === method).map((c) => c.args);
  }

  /** The methods called, in order. */
  methods(): string[] {
    return this.calls.map((c) => c.method);
  }

  extensions(): Promise<ReadonlySet<string>> {
    return this.run('extensions', [], () => new Set(this.aliases));
  }

  getPort(id: string): Promise<NeutronPort> {
    return this.run('getPort', [id], () => copy(this.portOrThrow(id, `GET /v2.0/ports/${id}`)));
  }

  listPorts(filters: Filters): Promise<NeutronPort[]> {
    return this.run('listPorts', [filters], () =>
      [...this.ports.values()]
        .filter((p) =>
          Object.entries(filters).every(([k, v]) => {
            const raw = (p as unknown as Record<string, unknown>)[k];
            const have = typeof raw === 'string' || typeof raw === 'number' || typeof raw === 'boolean' ? String(raw) : '';
            return typeof v === 'string' ? have === v : v.includes(have);
          }),
        )
        .map(copy),
    );
  }

  createPort(body: Readonly<Record<string, unknown>>): Promise<NeutronPort> {
    return this.run('createPort', [body], () => {
      const networkId = String(body.network_id);
      if (!this.networks.has(networkId)) throw new NeutronNotFoundError('POST /v2.0/ports', `: NetworkNotFound: Network ${networkId} could not be found.`);
      const port = this.newPort(networkId, body, {});
      this.ports.set(port.id, port);
      return copy(port);
    });
  }

  updatePort(id: string, body: Readonly<Record<string, unknown>>): Promise<NeutronPort> {
    return this.run('updatePort', [id, body], () => {
      const p = this.portOrThrow(id, `PUT /v2.0/ports/${id}`);
      for (const k of ['device_id', 'device_owner', 'dns_name'] as const) if (typeof body[k] === 'string') p[k] = body[k];
      if ('binding:profile' in body) p['binding:profile'] = copy((body['binding:profile'] as Record<string, unknown> | null) ?? {});
      if ('binding:host_id' in body) {
        const host = body['binding:host_id'];
        if (typeof host === 'string' && host) {
          p['binding:host_id'] = host;
          const alive = this.aliveHosts.has(host);
          p['binding:vif_type'] = alive ? 'ovs' : 'binding_failed';
          p['binding:vif_details'] = alive ? copy(this.vifDetails) : {};
        } else {
          p['binding:host_id'] = '';
          p['binding:vif_type'] = 'unbound';
          p['binding:vif_details'] = {};
          p.status = 'DOWN';
        }
      }
      return copy(p);
    });
  }

  deletePort(id: string): Promise<boolean> {
    return this.run('deletePort', [id], () => {
      for (const f of this.floatingIps) if (f.port_id === id) Object.assign(f, { port_id: null, fixed_ip_address: null });
      return this.ports.delete(id);
    });
  }

  listNetworks(ids: readonly string[]): Promise<NeutronNetwork[]> {
    return this.run('listNetworks', [ids], () => ids.flatMap((id) => (this.networks.has(id) ? [copy(this.networks.get(id) as NeutronNetwork)] : [])));
  }

  listSubnets(ids: readonly string[]): Promise<NeutronSubnet[]> {
    return this.run('listSubnets', [ids], () => ids.flatMap((id) => (this.subnets.has(id) ? [copy(this.subnets.get(id) as NeutronSubnet)] : [])));
  }

  listFloatingIps(portId: string): Promise<NeutronFloatingIp[]> {
    return this.run('listFloatingIps', [portId], () => this.floatingIps.filter((f) => f.port_id === portId).map(copy));
  }

  listSecurityGroups(filters: Filters): Promise<{ id: string; name: string }[]> {
    return this.run('listSecurityGroups', [filters], () => {
      const names = filters.name === undefined ? undefined : typeof filters.name === 'string' ? [filters.name] : filters.name;
      return this.securityGroups.filter((g) => (filters.tenant_id === undefined || g.tenant_id === filters.tenant_id) && (!names || names.includes(g.name))).map((g) => ({ id: g.id, name: g.name }));
    });
  }

  createBinding(portId: string, binding: { host: string; vnic_type?: string; profile?: Readonly<Record<string, unknown>> }): Promise<NeutronBinding> {
    return this.run('createBinding', [portId, binding], () => {
      this.portOrThrow(portId, `POST /v2.0/ports/${portId}/bindings`);
      const key = `${portId}/${binding.host}`;
      if (this.bindings.has(key)) throw new NeutronConflictError(`POST /v2.0/ports/${portId}/bindings`, ': PortBindingAlreadyExists');
      const alive = this.aliveHosts.has(binding.host);
      const b: NeutronBinding = {
        host: binding.host,
        vif_type: alive ? 'ovs' : 'binding_failed',
        vif_details: alive ? copy(this.vifDetails) : {},
        vnic_type: binding.vnic_type ?? 'normal',
        profile: copy(binding.profile ?? {}),
        status: 'INACTIVE',
      };
      this.bindings.set(key, b);
      return copy(b);
    });
  }

  getBinding(portId: string, host: string): Promise<NeutronBinding> {
    return this.run('getBinding', [portId, host], () => copy(this.bindingOrThrow(portId, host)));
  }

  activateBinding(portId: string, host: string): Promise<NeutronBinding> {
    return this.run('activateBinding', [portId, host], () => {
      const b = this.bindingOrThrow(portId, host);
      if (b.status === 'ACTIVE') throw new NeutronConflictError(`PUT /v2.0/ports/${portId}/bindings/${host}/activate`, ': PortBindingAlreadyActive');
      const active = { ...b, status: 'ACTIVE' };
      this.bindings.set(`${portId}/${host}`, active);
      const p = this.portOrThrow(portId, 'activate');
      p['binding:host_id'] = host;
      p['binding:vif_type'] = b.vif_type;
      p['binding:vif_details'] = copy(b.vif_details);
      return copy(active);
    });
  }

  deleteBinding(portId: string, host: string): Promise<boolean> {
    return this.run('deleteBinding', [portId, host], () => this.bindings.delete(`${portId}/${host}`));
  }

  private run<T>(method: keyof NeutronApi, args: readonly unknown[], work: () => T): Promise<T> {
    this.calls.push({ method, args: copy(args) });
    if (this.down) return Promise.reject(new NeutronUnavailableError(`fake ${method}`, 'connect ECONNREFUSED 127.0.0.1:9696'));
    const fault = this.faults.get(method);
    if (fault && fault.times > 0) {
      fault.times--;
      return Promise.reject(fault.error());
    }
    try {
      return Promise.resolve(work());
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  private portOrThrow(id: string, request: string): FakePort {
    const p = this.ports.get(id);
    if (!p) throw new NeutronNotFoundError(request, `: PortNotFound: Port ${id} could not be found.`);
    return p;
  }

  private bindingOrThrow(portId: string, host: string): NeutronBinding {
    const b = this.bindings.get(`${portId}/${host}`);
    if (!b) throw new NeutronNotFoundError(`GET /v2.0/ports/${portId}/bindings/${host}`, ': PortBindingNotFound');
    return b;
  }

  private newPort(networkId: string, body: Readonly<Record<string, unknown>>, over: Partial<FakePort>): FakePort {
    const network = this.networks.get(networkId);
    const subnet = this.subnets.get(network?.subnets[0] ?? '');
    const wanted = Array.isArray(body.fixed_ips) ? (body.fixed_ips as Array<{ ip_address?: string }>).map((f) => f.ip_address).filter((a): a is string => !!a) : [];
    const used = new Set([...this.ports.values()].flatMap((p) => p.fixed_ips.map((f) => f.ip_address)));
    for (const a of wanted) if (used.has(a)) throw new NeutronConflictError('POST /v2.0/ports', `: IpAddressAlreadyAllocated: IP address ${a} already allocated in subnet ${subnet?.id ?? ''}`);
    let address = wanted[0];
    if (!address && subnet) {
      const prefix = subnet.cidr.split('.').slice(0, 3).join('.');
      for (let h = 10; h < 250 && !address; h++) if (!used.has(`${prefix}.${h}`)) address = `${prefix}.${h}`;
    }
    const tenant = typeof body.tenant_id === 'string' ? body.tenant_id : 'proj-1';
    const groups = Array.isArray(body.security_groups)
      ? (body.security_groups as string[])
      : this.securityGroups.filter((g) => g.name === 'default' && g.tenant_id === tenant).map((g) => g.id);
    const seq = this.macSeq++;
    return {
      id: randomUUID(),
      network_id: networkId,
      mac_address: `fa:16:3e:00:${Math.floor(seq / 256).toString(16).padStart(2, '0')}:${(seq % 256).toString(16).padStart(2, '0')}`,
      fixed_ips: subnet && address ? [{ subnet_id: subnet.id, ip_address: address }] : [],
      device_id: typeof body.device_id === 'string' ? body.device_id : '',
      device_owner: '',
      status: 'DOWN',
      admin_state_up: body.admin_state_up !== false,
      tenant_id: tenant,
      'binding:host_id': '',
      'binding:vif_type': 'unbound',
      'binding:vif_details': {},
      'binding:vnic_type': 'normal',
      'binding:profile': {},
      ...(this.qosNetworks.has(networkId) ? { resource_request: { request_groups: [{ id: randomUUID(), required: ['CUSTOM_PHYSNET_PUBLIC'], resources: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 } }] } } : {}),
      security_groups: groups,
      dns_name: '',
      ...over,
    };
  }
}
