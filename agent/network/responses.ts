/**
 * The 2xx answers the agent reads from Neutron, as zod schemas: each holds the fields the agent
 * reads (`neutron-api.ts`), with Neutron's defaults where an extension may leave a field out
 * (`binding:*` on a port Neutron has not bound, `mtu` on a network without the net-mtu extension).
 * Not here: error answers, which `neutron-http.ts` classifies by status.
 */
import { z } from 'zod';
import type { NeutronBinding, NeutronFloatingIp, NeutronNetwork, NeutronPort, NeutronSubnet } from './neutron-api';

const dict = z.record(z.string(), z.unknown());

const port = z.object({
  id: z.string(),
  network_id: z.string(),
  mac_address: z.string(),
  fixed_ips: z.array(z.object({ subnet_id: z.string(), ip_address: z.string() })),
  device_id: z.string().default(''),
  device_owner: z.string().default(''),
  status: z.string(),
  admin_state_up: z.boolean().default(true),
  tenant_id: z.string().default(''),
  'binding:host_id': z.string().nullable().default('').transform((v) => v ?? ''),
  'binding:vif_type': z.string().default('unbound'),
  'binding:vif_details': dict.nullable().default({}).transform((v) => v ?? {}),
  'binding:vnic_type': z.string().default('normal'),
  'binding:profile': dict.nullable().default({}).transform((v) => v ?? {}),
  resource_request: z.unknown().optional(),
}) satisfies z.ZodType<NeutronPort, unknown>;

const network = z.object({
  id: z.string(),
  name: z.string().default(''),
  tenant_id: z.string().default(''),
  mtu: z.number().int().optional(),
  subnets: z.array(z.string()).default([]),
  port_security_enabled: z.boolean().optional(),
  'provider:physical_network': z.string().nullable().optional(),
  'provider:network_type': z.string().nullable().optional(),
}) satisfies z.ZodType<NeutronNetwork, unknown>;

const subnet = z.object({
  id: z.string(),
  network_id: z.string(),
  cidr: z.string(),
  ip_version: z.union([z.literal(4), z.literal(6)]),
  gateway_ip: z.string().nullable(),
  enable_dhcp: z.boolean(),
  dns_nameservers: z.array(z.string()).default([]),
  host_routes: z.array(z.object({ destination: z.string(), nexthop: z.string() })).default([]),
}) satisfies z.ZodType<NeutronSubnet, unknown>;

const floatingIp = z.object({
  floating_ip_address: z.string(),
  fixed_ip_address: z.string().nullable(),
  port_id: z.string().nullable(),
}) satisfies z.ZodType<NeutronFloatingIp, unknown>;

const binding = z.object({
  host: z.string(),
  vif_type: z.string(),
  vif_details: dict.nullable().default({}).transform((v) => v ?? {}),
  vnic_type: z.string().default('normal'),
  profile: dict.nullable().default({}).transform((v) => v ?? {}),
  status: z.string(),
}) satisfies z.ZodType<NeutronBinding, unknown>;

export const answers = {
  port: z.object({ port }),
  ports: z.object({ ports: z.array(port) }),
  networks: z.object({ networks: z.array(network) }),
  subnets: z.object({ subnets: z.array(subnet) }),
  floatingips: z.object({ floatingips: z.array(floatingIp) }),
  securityGroups: z.object({ security_groups: z.array(z.object({ id: z.string(), name: z.string() })) }),
  binding: z.object({ binding }),
  /** `PUT .../bindings/{host}/activate` answers the binding bare (2025.1's member action), not under `binding`. */
  activated: z.union([z.object({ binding }), binding.transform((b) => ({ binding: b }))]),
  extensions: z.object({ extensions: z.array(z.object({ alias: z.string() })) }),
};
