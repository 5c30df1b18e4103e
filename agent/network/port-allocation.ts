/**
 * `binding:profile.allocation` for a port with a resource request (a minimum-bandwidth or
 * minimum-packet-rate QoS rule), as nova sets it (nova `network/neutron.py`
 * `_get_binding_profile_allocation`): Neutron binds such a port only through the agent that
 * reports the provider named there (`responsible_for_ports_allocation`), so it must name the
 * provider the scheduler took the port's resources from, on Neutron's own provider tree under
 * our root.
 *
 * Neutron sends the request in one of two shapes:
 * - legacy: `{resources, required}`, one group per port; the allocation is the provider's uuid;
 * - `port-resource-request-groups` (Neutron 2025.1 with ML2/OVN): `{request_groups: [{id,
 *   resources, required}], same_subtree}`; the allocation is `{group id: provider uuid}`.
 * nova picks the shape from the extension list; the request's own shape says the same, and is
 * what is read here.
 *
 * Which provider: nova's `RequestSpec.get_request_group_mapping()` (requester id -> providers),
 * which nova-conductor sends in `build_and_run_instance`'s `request_spec` (`requested_resources`,
 * each RequestGroup's `requester_id` and `provider_uuids`); the requester is the port's uuid for a
 * legacy request, the group's id for an extended one, and a port's group always has one provider.
 * Without a mapping (a peer that sends no RequestSpec, or a group it lacks), the provider is the
 * only one among the instance's allocations holding at least the group's amount of every class it
 * asks for: that is where the scheduler must have put it. None, or more than one (two ports on
 * two bridges asking the same), and the port cannot be bound truthfully: the build fails.
 *
 * Pure: no I/O. `network-api.ts` puts the result in the binding update.
 */
import { z } from 'zod';
import type { ProviderMapping } from '../../model/network';
import { NeutronResponseError, PortAllocationError } from './errors';
import type { NeutronPort } from './neutron-api';
import { profileWithout } from './port-vifs';

/** What a build knows about where the scheduler put the instance's resources. */
export interface PortPlacement {
  /** The instance's allocations: provider uuid -> class -> amount. */
  readonly allocations: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** nova's request group -> provider mapping, when the build carried one. */
  readonly providerMapping?: ProviderMapping;
}

/** One request group of a port. */
export interface PortRequestGroup {
  /** The requester id nova's mapping is keyed by: the group id, or the port id for a legacy request. */
  readonly id: string;
  readonly resources: Readonly<Record<string, number>>;
}

export interface PortResourceRequest {
  /** The `port-resource-request-groups` shape: the allocation is a map by group id. */
  readonly extended: boolean;
  readonly groups: readonly PortRequestGroup[];
}

const resources = z.record(z.string(), z.number().int().nonnegative());
const legacy = z.object({ resources, required: z.array(z.string()).default([]) });
const extended = z.object({
  request_groups: z.array(z.object({ id: z.string().min(1), resources, required: z.array(z.string()).default([]) })),
  same_subtree: z.array(z.string()).default([]),
});

/**
 * The port's resource request, or undefined when it has none.
 * @throws NeutronResponseError when it is neither of Neutron's shapes
 */
export function portResourceRequest(port: NeutronPort): PortResourceRequest | undefined {
  const raw = port.resource_request;
  if (raw === undefined || raw === null || (typeof raw === 'object' && Object.keys(raw).length === 0)) return undefined;
  const ext = extended.safeParse(raw);
  // An extended request with no group asks for nothing (nova's `_has_resource_request`).
  if (ext.success) return ext.data.request_groups.length ? { extended: true, groups: ext.data.request_groups.map((g) => ({ id: g.id, resources: g.resources })) } : undefined;
  const old = legacy.safeParse(raw);
  if (old.success) return { extended: false, groups: [{ id: port.id, resources: old.data.resources }] };
  throw new NeutronResponseError(`GET /v2.0/ports/${port.id}`, `resource_request is neither {resources, required} nor {request_groups, same_subtree}: ${JSON.stringify(raw)}`);
}

/** The provider that fulfils `group`. @throws PortAllocationError */
function providerOf(portId: string, group: PortRequestGroup, placement: PortPlacement): string {
  const mapped = placement.providerMapping?.[group.id]?.[0];
  if (mapped) return mapped;
  // No mapping from nova: the one provider holding all of it must be the scheduler's choice.
  const wanted = Object.entries(group.resources).filter(([, n]) => n > 0);
  const holders = Object.entries(placement.allocations)
    .filter(([, held]) => wanted.every(([rc, n]) => (held[rc] ?? 0) >= n))
    .map(([rp]) => rp)
    .sort();
  const [only] = holders;
  if (only !== undefined && holders.length === 1) return only;
  const asked = wanted.map(([rc, n]) => `${n} ${rc}`).join(', ');
  throw new PortAllocationError(
    portId,
    group.id,
    holders.length === 0
      ? `no provider in the instance's allocations holds ${asked} (the scheduler did not allocate the port's request)`
      : `providers ${holders.join(', ')} each hold ${asked} and the build carries no request group mapping to tell which is the port's`,
  );
}

/**
 * The value of `binding:profile.allocation` for `port`, or undefined when the port has no
 * resource request.
 * @throws PortAllocationError, NeutronResponseError
 */
export function bindingAllocation(port: NeutronPort, placement: PortPlacement): string | Record<string, string> | undefined {
  const request = portResourceRequest(port);
  if (!request) return undefined;
  if (!request.extended) {
    const [group] = request.groups;
    return group ? providerOf(port.id, group, placement) : undefined;
  }
  return Object.fromEntries(request.groups.map((g) => [g.id, providerOf(port.id, g, placement)]));
}

/**
 * The `binding:profile` change of a port moved to this host (nova `_update_port_binding_for_instance`):
 * `migrating_to` out, and for a port with a resource request the allocation re-pointed at the
 * provider `placement` (the instance's allocations here) holds it on. Nothing when neither changes.
 * Where the request cannot be tied to one provider, `untied` hears why and the allocation stays.
 */
export function movedProfile(port: NeutronPort, placement: PortPlacement | undefined, untied: (reason: string) => void): { 'binding:profile'?: Record<string, unknown> } {
  let allocation: ReturnType<typeof bindingAllocation>;
  try {
    allocation = placement ? bindingAllocation(port, placement) : undefined;
  } catch (e) {
    if (!(e instanceof PortAllocationError)) throw e;
    untied(e.message);
    allocation = undefined;
  }
  const withoutMigration = profileWithout(port, ['migrating_to']);
  if (allocation === undefined || JSON.stringify(port['binding:profile']['allocation']) === JSON.stringify(allocation)) return withoutMigration;
  return { 'binding:profile': { ...(withoutMigration['binding:profile'] ?? port['binding:profile']), allocation } };
}
