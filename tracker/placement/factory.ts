/**
 * Builds the Placement client from the `[placement]` options.
 */
import type { AgentConfig } from '../../config/schema';
import { DEFAULT_NOAUTH_ENDPOINT, NoAuth, type AuthProvider } from './auth';
import { PlacementClient } from './client';
import { PlacementHttp, type PlacementObserver, type RequestCounter } from './http';
import { KeystoneAuth, type KeystoneOptions } from './keystone';

export function authFromConfig(p: AgentConfig['placement']): AuthProvider {
  if (p.auth_type === 'noauth') return new NoAuth(p.endpoint_override ?? DEFAULT_NOAUTH_ENDPOINT);
  return new KeystoneAuth(keystoneOptions(p));
}

function keystoneOptions(p: AgentConfig['placement']): KeystoneOptions {
  return {
    authUrl: p.auth_url ?? '',
    method:
      p.auth_type === 'password'
        ? {
            kind: 'password',
            username: p.username,
            password: p.password,
            userDomainName: p.user_domain_name,
            projectName: p.project_name,
            projectDomainName: p.project_domain_name,
          }
        : { kind: 'application_credential', id: p.application_credential_id, secret: p.application_credential_secret },
    ...(p.endpoint_override ? { endpointOverride: p.endpoint_override } : {}),
    interfaces: p.valid_interfaces,
    ...(p.region_name ? { regionName: p.region_name } : {}),
    timeoutMs: p.timeout * 1000,
    ...(p.cafile ? { cafile: p.cafile } : {}),
  };
}

/** Where another service is found: its catalog type and the section whose options choose the endpoint. */
export interface CatalogService {
  readonly serviceType: string;
  /** Older names of the service type, tried when the catalog lacks `serviceType`. */
  readonly serviceTypeAliases?: readonly string[];
  readonly section: string;
  readonly interfaces: readonly string[];
  readonly endpointOverride?: string | undefined;
  readonly regionName?: string;
}

/**
 * Keystone auth for another service the agent calls (Glance, Neutron): `[placement]`'s credentials
 * (the agent's one service user), the service's endpoint chosen by its own section's
 * valid_interfaces, region_name and endpoint_override. Undefined with `auth_type = noauth`.
 */
export function serviceAuthFromConfig(config: AgentConfig, service: CatalogService): KeystoneAuth | undefined {
  const p = config.placement;
  if (p.auth_type === 'noauth') return undefined;
  // Placement's endpoint_override and region_name are Placement's; the service's come from its section.
  const { endpointOverride: _placementUrl, regionName: _placementRegion, ...credentials } = keystoneOptions(p);
  return new KeystoneAuth({
    ...credentials,
    serviceType: service.serviceType,
    ...(service.serviceTypeAliases ? { serviceTypeAliases: service.serviceTypeAliases } : {}),
    section: service.section,
    interfaces: service.interfaces,
    ...(service.endpointOverride ? { endpointOverride: service.endpointOverride } : {}),
    ...(service.regionName ? { regionName: service.regionName } : {}),
  });
}

/**
 * Keystone auth for Glance (`image` in the catalog, chosen by `[glance]`). Undefined with
 * `auth_type = noauth`: a Glance without keystone is reached through `[glance] endpoint_override` alone.
 */
export function glanceAuthFromConfig(config: AgentConfig): KeystoneAuth | undefined {
  const g = config.glance;
  return serviceAuthFromConfig(config, { serviceType: 'image', section: 'glance', interfaces: g.valid_interfaces, endpointOverride: g.endpoint_override, regionName: g.region_name });
}

export function placementFromConfig(config: AgentConfig, counter?: RequestCounter, observer?: PlacementObserver): PlacementClient {
  const p = config.placement;
  return new PlacementClient(
    new PlacementHttp({
      auth: authFromConfig(p),
      timeoutMs: p.timeout * 1000,
      ...(p.cafile ? { cafile: p.cafile } : {}),
      ...(counter ? { counter } : {}),
      ...(observer ? { observer } : {}),
    }),
  );
}
