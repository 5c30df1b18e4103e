/**
 * The network arguments of the compute methods: `build_and_run_instance`'s `requested_networks`
 * (nova's NetworkRequestList) and `security_groups`, and `external_instance_event`'s `events`
 * (InstanceExternalEvent 1.5), as nova-conductor and nova-api send them (object primitives) or as
 * plain JSON (standalone peers, tests). Same conventions as `decode.ts`: a malformed argument is
 * refused before the request is journaled, naming the field and the form expected.
 */
import { z } from 'zod';
import { arg } from '../rpc/endpoint/args';
import type { NetworkRequest, RequestedNetworks } from '../../model/network';
import { fromSchema } from './decode';

const uuid = z.string().regex(/^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$/, 'a UUID');

const NO_NETWORK: RequestedNetworks = { kind: 'none' };

const requestSchema = z
  .object({
    network_id: z.string().nullish(),
    address: z.string().nullish(),
    port_id: uuid.nullish(),
    tag: z.string().nullish(),
  })
  .refine((r) => !!r.network_id || !!r.port_id, { message: 'needs a network_id or a port_id' });

function normalizeRequests(list: readonly z.infer<typeof requestSchema>[] | null): RequestedNetworks {
  if (!list || list.length === 0) return { kind: 'none' };
  if (list.length === 1 && list[0]?.network_id === 'none' && !list[0].port_id) return { kind: 'none' };
  if (list.length === 1 && list[0]?.network_id === 'auto' && !list[0].port_id) return { kind: 'auto' };
  const requests = list.map((r): NetworkRequest => {
    const tag = r.tag ? { tag: r.tag } : {};
    if (r.port_id) return { kind: 'port', port_id: r.port_id, ...tag };
    return { kind: 'network', network_id: r.network_id ?? '', ...(r.address ? { address: r.address } : {}), ...tag };
  });
  return { kind: 'list', requests };
}

/** One event about an instance, from Neutron or Cinder through nova-api. */
export interface ExternalEvent {
  readonly instance_uuid: string;
  /** `network-vif-plugged`, `network-vif-unplugged`, `network-changed`, `network-vif-deleted`, `volume-extended`, ... */
  readonly name: string;
  /** `completed`, `failed` or `in-progress`. */
  readonly status: string;
  /** The port (or volume) the event is about. */
  readonly tag: string | null;
  readonly data: unknown;
}

const eventSchema = z.object({
  instance_uuid: uuid,
  name: z.string().min(1, 'an event name'),
  status: z.string().default('completed'),
  tag: z.string().nullish(),
  data: z.unknown().optional(),
});

export const networkArgs = {
  /** `requested_networks`: absent, null, empty or `[{network_id: 'none'}]` is no network. */
  requestedNetworks: arg.optional(
    fromSchema('a NetworkRequestList (object primitive or list of {network_id, address, port_id, tag}) or null', z.array(requestSchema).nullable(), normalizeRequests),
    NO_NETWORK,
  ),
  /** `security_groups`: names or ids; absent or null is none (Neutron applies the project's default group). */
  securityGroups: arg.optional(fromSchema('a list of security group names or ids, or null', z.array(z.string().min(1, 'a name or id')).nullable(), (l) => l ?? []), []),
  /** `external_instance_event`'s `events`. */
  externalEvents: fromSchema('a list of InstanceExternalEvents', z.array(eventSchema), (l) =>
    l.map((e): ExternalEvent => ({ instance_uuid: e.instance_uuid, name: e.name, status: e.status, tag: e.tag ?? null, data: e.data })),
  ),
};
