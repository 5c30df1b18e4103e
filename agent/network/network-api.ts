/**
 * The network side of a compute host, as nova-compute does it against Neutron (nova
 * `network/neutron.py` `allocate_for_instance`, `deallocate_for_instance`, `get_instance_nw_info`):
 * ports created or taken over for an instance and bound to this host, the VIF model built from
 * them, and the ports given back when the instance goes.
 *
 * Token: nova creates ports with the user's token and binds them with its service user; the agent
 * has only its service user (`[placement]` credentials), so it creates ports on the instance's
 * project explicitly (`tenant_id`), which Neutron allows an admin.
 *
 * Contracts: `allocate` leaves nothing behind when it throws (ports it created are deleted, ports
 * the user gave are unbound); `deallocate` and `deallocatePort` are idempotent; none of them plugs anything (the virt
 * driver does). Neutron's outages surface as `NeutronUnavailableError` after the client's retries.
 */
import type { Clock } from '../../lib/clock';
import type { Logger } from '../../lib/logging/logger';
import type { NetworkInfo, RequestedNetworks, Vif } from '../../model/network';
import { NetworkNotConfiguredError, NetworkNotFoundError, NetworkRequestError, NeutronNotFoundError, PortBindingFailedError, PortInUseError } from './errors';
import type { NeutronApi, NeutronNetwork, NeutronPort } from './neutron-api';
import { bindingAllocation, movedProfile, portResourceRequest, type PortPlacement } from './port-allocation';
import { LiveBindings } from './live-bindings';
import { profileWithout, vifsFor } from './port-vifs';

/** The instance a network call is for. */
export interface NetworkOwner {
  readonly uuid: string;
  readonly project_id: string;
  /** The guest's host name (Neutron's `dns_name` where it has the dns-integration extension). */
  readonly hostname: string;
  readonly availability_zone: string;
}

export interface NetworkServiceOptions {
  /** Undefined: this agent has no Neutron (builds that ask for networks fail clearly). */
  readonly neutron: NeutronApi | undefined;
  /** `[DEFAULT] host`: the `binding:host_id` Neutron binds ports to (the OVN chassis hostname). */
  readonly host: string;
  readonly logger: Logger;
  readonly clock: Clock;
  /** How long the extension list is trusted (nova's `extension_sync_interval`, 600 s). */
  readonly extensionTtlMs?: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** `binding:profile` keys a compute host set and takes back when it unbinds (nova `_unbind_ports`). */
const HOST_PROFILE_KEYS = ['allocation', 'pci_vendor_info', 'pci_slot', 'physical_network', 'card_serial_number', 'pf_mac_address', 'vf_num', 'migrating_to'];

/** A host name Neutron accepts as `dns_name`: lower case letters, digits and '-', at most 63. */
export function dnsLabel(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 63) || 'server';
}

export class NetworkService {
  private extensionCache: { at: number; aliases: ReadonlySet<string> } | undefined;

  constructor(private readonly o: NetworkServiceOptions) {}

  /** Whether this agent can reach a Neutron at all. */
  get configured(): boolean {
    return this.o.neutron !== undefined;
  }

  /** A live migration's port bindings (`live-bindings.ts`). @throws NetworkNotConfiguredError */
  get live(): LiveBindings {
    return new LiveBindings({ neutron: this.neutronOrThrow(), host: this.o.host, logger: this.o.logger });
  }

  /**
   * `allocate_for_instance`: the ports of `requested` (created on networks, or the user's own),
   * owned by the instance and bound to this host, as VIFs in request order. `none` is `[]`. A
   * user's port with a resource request is bound with `binding:profile.allocation` naming the
   * provider(s) `placement` says the scheduler took its resources from (`port-allocation.ts`).
   * @throws NetworkNotConfiguredError, NetworkRequestError, PortBindingFailedError, PortAllocationError, NeutronError
   */
  async allocate(owner: NetworkOwner, requested: RequestedNetworks, securityGroups: readonly string[], placement: PortPlacement = { allocations: {} }): Promise<NetworkInfo> {
    if (requested.kind === 'none') return [];
    const neutron = this.neutronOrThrow();
    if (requested.kind === 'auto') {
      throw new NetworkRequestError("networks 'auto' needs Neutron's auto-allocated topology, which this agent does not set up; name a network or a port");
    }
    const userPorts = new Map<string, NeutronPort>();
    for (const r of requested.requests) {
      if (r.kind !== 'port') continue;
      const port = await neutron.getPort(r.port_id);
      if (port.device_id && port.device_id !== owner.uuid) throw new PortInUseError(port.id, port.device_id);
      userPorts.set(port.id, port);
    }
    const networkIds = [...new Set(requested.requests.map((r) => (r.kind === 'network' ? r.network_id : (userPorts.get(r.port_id)?.network_id ?? ''))))];
    const networks = new Map((await neutron.listNetworks(networkIds)).map((n) => [n.id, n]));
    for (const id of networkIds) if (!networks.has(id)) throw new NetworkNotFoundError(id);
    const groups = await this.securityGroupIds(owner, securityGroups);
    // Which provider fulfils each user port's resource request, decided before anything is written
    // (nova does it before it creates ports); ports the build creates carry none (refused below).
    const allocations = new Map<string, ReturnType<typeof bindingAllocation>>();
    for (const port of userPorts.values()) allocations.set(port.id, bindingAllocation(port, placement));

    const created: string[] = [];
    const taken: string[] = [];
    try {
      const ports: NeutronPort[] = [];
      for (const r of requested.requests) {
        if (r.kind === 'port') {
          ports.push(userPorts.get(r.port_id) as NeutronPort);
          continue;
        }
        const port = await neutron.createPort({
          network_id: r.network_id,
          device_id: owner.uuid,
          admin_state_up: true,
          tenant_id: owner.project_id,
          ...(groups.length ? { security_groups: groups } : {}),
          ...(r.address ? { fixed_ips: [{ ip_address: r.address }] } : {}),
        });
        created.push(port.id);
        if (portResourceRequest(port)) {
          throw new NetworkRequestError(`network ${r.network_id} has a QoS policy with a minimum guarantee; create the port first and boot with it (--port)`);
        }
        ports.push(port);
      }
      const dns = (await this.extensions()).has('dns-integration');
      const bound: NeutronPort[] = [];
      for (const port of ports) {
        if (!created.includes(port.id)) taken.push(port.id);
        const allocation = allocations.get(port.id);
        const updated = await neutron.updatePort(port.id, {
          device_id: owner.uuid,
          device_owner: `compute:${owner.availability_zone}`,
          'binding:host_id': this.o.host,
          ...(allocation === undefined ? {} : { 'binding:profile': { ...port['binding:profile'], allocation } }),
          ...(dns ? { dns_name: dnsLabel(owner.hostname) } : {}),
        });
        const vifType = updated['binding:vif_type'];
        if (vifType === 'binding_failed' || vifType === 'unbound') throw new PortBindingFailedError(updated.id, this.o.host, vifType);
        bound.push(updated);
      }
      return await this.vifsOf(bound, networks, new Set(userPorts.keys()));
    } catch (e) {
      await this.undo(owner.uuid, created, taken);
      throw e;
    }
  }

  /**
   * `deallocate_for_instance`: every port of the instance in Neutron is deleted, except those
   * in `preserved` (the user's), which are unbound and released. Idempotent.
   */
  async deallocate(instanceUuid: string, preserved: ReadonlySet<string>): Promise<void> {
    if (!this.o.neutron) return;
    const ports = await this.o.neutron.listPorts({ device_id: instanceUuid });
    await this.undo(
      instanceUuid,
      ports.filter((p) => !preserved.has(p.id)).map((p) => p.id),
      ports.filter((p) => preserved.has(p.id)).map((p) => p.id),
      true,
    );
  }

  /**
   * `deallocate_port_for_instance` (an interface detached): deletes the port, or, `preserved` (the
   * user's), unbinds and releases it. A port already gone is fine, as nova has it.
   * @throws NetworkNotConfiguredError, NeutronError (the port is left as it was)
   */
  async deallocatePort(instanceUuid: string, portId: string, preserved: boolean): Promise<void> {
    const neutron = this.neutronOrThrow();
    if (!preserved) {
      if (!(await neutron.deletePort(portId))) this.o.logger.info({ instance: instanceUuid, port: portId }, 'port already gone from Neutron');
      return;
    }
    const port = await neutron.getPort(portId).catch((e: unknown) => {
      if (e instanceof NeutronNotFoundError) return undefined;
      throw e;
    });
    if (!port) {
      this.o.logger.info({ instance: instanceUuid, port: portId }, 'port already gone from Neutron');
      return;
    }
    await this.unbind(neutron, port, (await this.extensions()).has('dns-integration'));
  }

  /** The ids of the ports Neutron has for the instance (`device_id`). @throws NetworkNotConfiguredError, NeutronError */
  async portIdsOf(instanceUuid: string): Promise<string[]> {
    return (await this.neutronOrThrow().listPorts({ device_id: instanceUuid })).map((p) => p.id);
  }

  /**
   * `get_instance_nw_info`: the instance's ports as Neutron has them now, in the order of
   * `previous` (new ports last); `preserve_on_delete` is kept from `previous`.
   */
  async refresh(instanceUuid: string, previous: NetworkInfo): Promise<NetworkInfo> {
    const neutron = this.neutronOrThrow();
    const ports = await neutron.listPorts({ device_id: instanceUuid });
    const order = new Map(previous.map((v, i) => [v.id, i]));
    ports.sort((a, b) => (order.get(a.id) ?? Number.MAX_SAFE_INTEGER) - (order.get(b.id) ?? Number.MAX_SAFE_INTEGER));
    const networks = new Map((await neutron.listNetworks([...new Set(ports.map((p) => p.network_id))])).map((n) => [n.id, n]));
    return this.vifsOf(ports, networks, new Set(previous.filter((v) => v.preserve_on_delete).map((v) => v.id)));
  }

  /**
   * `migrate_instance_finish` (nova `_update_port_binding_for_instance`): the ports `portIds` of a
   * moved instance bound to this host (`binding:host_id`, `migrating_to` out of the profile; the
   * rest of the profile and `device_owner` kept), as VIFs in that order. Nova sends this PUT on
   * the destination of a cold migration and on the source of a revert. `preserved`: the user's ports.
   * A port with a resource request gets `binding:profile.allocation` naming the provider of this
   * host that `placement` (the instance's allocations here) holds its request on, as nova's
   * `provider_mappings` do; where none can be told, it keeps the one it had, with a warning.
   * @throws PortBindingFailedError (nothing is undone: the caller's move fails and reverts), NeutronError
   */
  async bindHere(instanceUuid: string, portIds: readonly string[], preserved: ReadonlySet<string>, placement?: PortPlacement): Promise<NetworkInfo> {
    const neutron = this.neutronOrThrow();
    const bound: NeutronPort[] = [];
    for (const id of portIds) {
      const port = await neutron.getPort(id);
      const profile = movedProfile(port, placement, (reason) =>
        this.o.logger.warn({ instance: instanceUuid, port: id, reason }, "the moved port's allocation cannot be tied to a provider here; its binding:profile.allocation is left as it was"),
      );
      const updated = await neutron.updatePort(id, { 'binding:host_id': this.o.host, ...profile });
      const vifType = updated['binding:vif_type'];
      if (vifType === 'binding_failed' || vifType === 'unbound') throw new PortBindingFailedError(updated.id, this.o.host, vifType);
      bound.push(updated);
    }
    this.o.logger.info({ instance: instanceUuid, ports: portIds }, 'ports of a moved instance bound to this host');
    const networks = new Map((await neutron.listNetworks([...new Set(bound.map((p) => p.network_id))])).map((n) => [n.id, n]));
    return this.vifsOf(bound, networks, preserved);
  }

  /**
   * `setup_networks_on_host(host, teardown=True)` after a confirmed move: the ports' bindings to
   * `host` (the source) deleted, a missing one (404: the PUT of `bindHere` replaced it) ignored.
   * Failures are logged, never thrown: the move is confirmed whatever Neutron says.
   */
  async dropBindings(instanceUuid: string, portIds: readonly string[], host: string): Promise<void> {
    if (!this.o.neutron) return;
    for (const id of portIds) {
      await this.o.neutron.deleteBinding(id, host).catch((e: unknown) =>
        this.o.logger.warn({ instance: instanceUuid, port: id, host, err: e instanceof Error ? e.message : String(e) }, "could not delete the port's binding to the old host"),
      );
    }
  }

  /**
   * `unbind_ports(detach=False)` (a shelve offload): the ports stay the instance's (device kept)
   * but are bound to no host, the host's profile keys gone. A port already gone is fine.
   * @throws NeutronError (the ports after the first failure are left as they were)
   */
  async unbindKeepingDevice(instanceUuid: string, portIds: readonly string[]): Promise<void> {
    if (!this.o.neutron || portIds.length === 0) return;
    const neutron = this.o.neutron;
    for (const id of portIds) {
      const port = await neutron.getPort(id).catch((e: unknown) => (e instanceof NeutronNotFoundError ? undefined : Promise.reject(e)));
      if (port) await neutron.updatePort(id, { 'binding:host_id': null, ...profileWithout(port, HOST_PROFILE_KEYS) });
    }
    this.o.logger.info({ instance: instanceUuid, ports: portIds }, 'ports unbound from this host, kept for the instance');
  }

  /** Deletes `created`, unbinds `taken`; each failure is logged and the rest still done. @throws the first failure when `strict` */
  private async undo(instanceUuid: string, created: readonly string[], taken: readonly string[], strict = false): Promise<void> {
    const neutron = this.neutronOrThrow();
    let first: Error | undefined;
    const dns = taken.length ? (await this.extensions().catch(() => new Set<string>())).has('dns-integration') : false;
    const attempt = async (what: string, port: string, op: () => Promise<unknown>): Promise<void> => {
      try {
        await op();
      } catch (e) {
        first ??= e instanceof Error ? e : new Error(String(e));
        this.o.logger.warn({ instance: instanceUuid, port, err: (e as Error).message }, `could not ${what} the port in Neutron`);
      }
    };
    for (const id of created) await attempt('delete', id, () => neutron.deletePort(id));
    for (const id of taken) {
      await attempt('unbind', id, async () => this.unbind(neutron, await neutron.getPort(id), dns));
    }
    if (strict && first !== undefined) throw first;
  }

  /** nova's `_unbind_ports`: the port released (no device, no host, the host's profile keys gone). */
  private async unbind(neutron: NeutronApi, port: NeutronPort, dns: boolean): Promise<void> {
    await neutron.updatePort(port.id, { device_id: '', device_owner: '', 'binding:host_id': null, ...profileWithout(port, HOST_PROFILE_KEYS), ...(dns ? { dns_name: '' } : {}) });
  }

  /** Security group names or ids as ids; the lone `default` is left to Neutron. @throws NetworkRequestError */
  private async securityGroupIds(owner: NetworkOwner, requested: readonly string[]): Promise<string[]> {
    const wanted = requested.length === 1 && requested[0] === 'default' ? [] : [...new Set(requested)];
    const names = wanted.filter((g) => !UUID.test(g));
    if (names.length === 0) return wanted;
    const found = await this.neutronOrThrow().listSecurityGroups({ tenant_id: owner.project_id, name: names });
    return wanted.map((g) => {
      if (UUID.test(g)) return g;
      const matches = found.filter((f) => f.name === g);
      if (matches.length === 1) return (matches[0] as { id: string }).id;
      throw new NetworkRequestError(
        matches.length === 0 ? `security group ${g} not found in project ${owner.project_id}` : `security group name ${g} is ambiguous in project ${owner.project_id}; give its id`,
      );
    });
  }

  private vifsOf(ports: readonly NeutronPort[], networks: ReadonlyMap<string, NeutronNetwork>, preserved: ReadonlySet<string>): Promise<Vif[]> {
    return vifsFor(this.neutronOrThrow(), ports, preserved, networks);
  }

  private async extensions(): Promise<ReadonlySet<string>> {
    const now = this.o.clock.now();
    if (this.extensionCache && now - this.extensionCache.at < (this.o.extensionTtlMs ?? 600_000)) return this.extensionCache.aliases;
    const aliases = await this.neutronOrThrow().extensions();
    this.extensionCache = { at: now, aliases };
    return aliases;
  }

  private neutronOrThrow(): NeutronApi {
    if (!this.o.neutron) throw new NetworkNotConfiguredError();
    return this.o.neutron;
  }
}
