/**
 * Builds the Placement client from the `[placement]` options.
 */
import type { AgentConfig } from '../../config/schema';
import { DEFAULT_NOAUTH_ENDPOINT, NoAuth, type AuthProvider } from './auth';
import { PlacementClient } from './client';
import { PlacementHttp, type PlacementObserver, type RequestCounter } from './http';
import { KeystoneAuth } from './keystone';

export function authFromConfig(p: AgentConfig['placement']): AuthProvider {
  if (p.auth_type === 'noauth') return new NoAuth(p.endpoint_override ?? DEFAULT_NOAUTH_ENDPOINT);
  return new KeystoneAuth({
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
  });
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
