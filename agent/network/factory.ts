/**
 * Builds the agent's network service from the configuration: Neutron found through keystone's
 * catalog (`network`, chosen by `[neutron]`) with `[placement]`'s credentials, or at `[neutron]
 * endpoint_override` without a token when `[placement] auth_type = noauth` (a Neutron run with
 * `auth_strategy = noauth`). With neither, the service has no Neutron and builds that ask for
 * networks fail with one line saying what to set.
 */
import { readFileSync } from 'node:fs';
import type { AgentConfig } from '../../config/schema';
import type { Clock } from '../../lib/clock';
import type { Logger } from '../../lib/logging/logger';
import { NoAuth, type AuthProvider } from '../../tracker/placement/auth';
import { serviceAuthFromConfig } from '../../tracker/placement/factory';
import { NodeHttpTransport } from '../../tracker/placement/transport';
import { NetworkService } from './network-api';
import { NeutronHttpClient, type NeutronHttpOptions } from './neutron-http';

/** The network service for `config`; `hooks.onAnswer` sees each Neutron request's outcome (the metrics). */
export function networkFromConfig(config: AgentConfig, logger: Logger, clock: Clock, hooks: Pick<NeutronHttpOptions, 'onAnswer'> = {}): NetworkService {
  const n = config.neutron;
  const auth: AuthProvider | undefined =
    serviceAuthFromConfig(config, { serviceType: 'network', section: 'neutron', interfaces: n.valid_interfaces, endpointOverride: n.endpoint_override, regionName: n.region_name }) ??
    (n.endpoint_override ? new NoAuth(n.endpoint_override) : undefined);
  const neutron = auth
    ? new NeutronHttpClient({
        auth,
        transport: new NodeHttpTransport({ timeoutMs: n.timeout * 1000, ...(config.placement.cafile ? { ca: readFileSync(config.placement.cafile) } : {}) }),
        retries: n.http_retries,
        clock,
        ...(hooks.onAnswer ? { onAnswer: hooks.onAnswer } : {}),
      })
    : undefined;
  return new NetworkService({ neutron, host: config.DEFAULT.host, logger: logger.child({ component: 'network' }), clock });
}
