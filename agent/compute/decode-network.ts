/**
 * The network arguments of the compute methods: `build_and_run_instance`'s `requested_networks`
 * (nova's NetworkRequestList) and `security_groups`, `external_instance_event`'s `events`
 * (InstanceExternalEvent 1.5), `attach_interface`'s and `detach_interface`'s, and the ports an
 * Instance's info cache names (finish_resize), as nova-conductor and nova-api send them (object
 * primitives) or as plain JSON (standalone peers, tests). Same conventions as `decode.ts`: a malformed argument is
 * refused before the request is journaled, naming the field and the form expected.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { arg, isInvalid } from '../rpc/endpoint/args';
import type { NetworkInfo, NetworkRequest, RequestedNetworks } from '../../model/network';
import { ArgumentError, computeArgs as A, fromSchema, type DecodedInstance } from './decode';

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

/** An Instance's info cache: nova keeps `network_info` as a JSON string; plain peers send the list. */
const vifList = z.array(z.object({ id: uuid, preserve_on_delete: z.boolean().optional() }).passthrough());
const networkInfoSchema = z.union([
  vifList,
  z.string().transform((text, ctx) => {
    try {
      const parsed = vifList.safeParse(text === '' ? [] : JSON.parse(text));
      if (parsed.success) return parsed.data;
    } catch {
      /* reported below */
    }
    ctx.addIssue({ code: 'custom', message: 'network_info: a JSON list of VIFs, each with a port id' });
    return z.NEVER;
  }),
]);

const instanceWithPortsSchema = z.object({
  uuid,
  info_cache: z.object({ network_info: networkInfoSchema.nullish() }).nullish(),
  network_info: networkInfoSchema.nullish(),
});

/** An Instance known by uuid, with the ports of its info cache (what a move's destination binds). */
export interface InstanceWithPorts {
  readonly uuid: string;
  readonly port_ids: readonly string[];
  /** Those of `port_ids` the user gave (`preserve_on_delete`): a delete on the destination unbinds them. */
  readonly preserved_port_ids: readonly string[];
}

/**
 * `instance` with its VIFs in the info cache, as nova's Instance carries it (`info_cache` with
 * `network_info` as a JSON string) or, for a plain instance, as `network_info`: the destination of
 * a move learns the instance's ports from it without asking Neutron (which a host with no ports to
 * move must not need). `instance` is not changed.
 */
export function withNetworkInfo(instance: Record<string, unknown>, info: NetworkInfo): Record<string, unknown> {
  if (info.length === 0) return instance;
  const data = instance['nova_object.data'];
  if (typeof data !== 'object' || data === null) return { ...instance, network_info: info };
  const uuidOf = (data as Record<string, unknown>).uuid;
  const cache = {
    'nova_object.name': 'InstanceInfoCache',
    'nova_object.namespace': 'nova',
    'nova_object.version': '1.5',
    'nova_object.data': { instance_uuid: uuidOf, network_info: JSON.stringify(info) },
  };
  return { ...instance, 'nova_object.data': { ...data, info_cache: cache } };
}

const instanceWithPorts = fromSchema('an Instance with a uuid (and its info cache)', instanceWithPortsSchema, (i): InstanceWithPorts => {
  const vifs = i.info_cache?.network_info ?? i.network_info ?? [];
  return { uuid: i.uuid, port_ids: vifs.map((v) => v.id), preserved_port_ids: vifs.filter((v) => v.preserve_on_delete === true).map((v) => v.id) };
});

export const networkArgs = {
  /** finish_resize's `instance`: its uuid and the port ids of its info cache (none when it has none). */
  instanceWithPorts,
  /** An Instance arriving (`computeArgs.instance`) with the ports of its info cache (an unshelve's). */
  arrivingWithPorts: arg.from<DecodedInstance & { readonly ports: InstanceWithPorts }>('an Instance (object primitive or plain object)', (v) => {
    const inst = A.instance.decode(v);
    if (isInvalid(inst)) return inst;
    const ports = instanceWithPorts.decode(v);
    return isInvalid(ports) ? ports : { ...inst, ports };
  }),
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

/** The instance an interface is attached to: its uuid, and the availability zone its ports are owned in. */
export interface InterfaceInstance {
  readonly uuid: string;
  readonly availability_zone?: string;
}

/** `attach_interface`'s arguments, decoded. */
export interface AttachArgs {
  readonly network_id: string | null;
  readonly port_id: string | null;
  readonly requested_ip: string | null;
  readonly tag: string | null;
}

const ipAddress = arg.from('an IPv4 or IPv6 address', (v) => (typeof v === 'string' && isIP(v) !== 0 ? v : arg.refuse([])));

export const interfaceArgs = {
  /** The Instance of an attach (only its uuid and availability zone are read). */
  instance: fromSchema('an Instance with a uuid', z.object({ uuid, availability_zone: z.string().nullish() }), (i): InterfaceInstance => ({
    uuid: i.uuid,
    ...(i.availability_zone ? { availability_zone: i.availability_zone } : {}),
  })),
  /** `network_id` and `port_id` of an attach: a UUID, null or absent. */
  optionalId: arg.optional(arg.nullable(arg.uuid()), null),
  /** `detach_interface`'s `port_id`. */
  portId: arg.uuid(),
  /** `requested_ip`: the fixed IP asked for on the network, null or absent. */
  requestedIp: arg.optional(arg.nullable(ipAddress), null),
  /** `tag`: the device tag, null or absent. */
  tag: arg.optional(arg.nullable(arg.string()), null),
};

/**
 * The one network request of an attach, with nova-api's rules: a network or a port, not both; a
 * fixed IP only with a network. This agent does not pick a network itself (nova's attach without
 * either does, when the project has exactly one).
 * @throws ArgumentError naming the arguments
 */
export function attachRequest(a: AttachArgs): NetworkRequest {
  const tag = a.tag ? { tag: a.tag } : {};
  if (a.network_id && a.port_id) throw new ArgumentError('invalid arguments network_id and port_id: give one of them, not both');
  if (a.port_id) {
    if (a.requested_ip) throw new ArgumentError('invalid argument requested_ip: a fixed IP is asked for on a network_id, not with a port_id');
    return { kind: 'port', port_id: a.port_id, ...tag };
  }
  if (!a.network_id) throw new ArgumentError('invalid arguments network_id and port_id: one of them is needed (compute-agent does not pick a network)');
  return { kind: 'network', network_id: a.network_id, ...(a.requested_ip ? { address: a.requested_ip } : {}), ...tag };
}
