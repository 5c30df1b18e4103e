/**
 * The `[neutron]` section and the event-wait knobs: where the agent finds Neutron and how long a
 * build waits for Neutron to say a port is wired (`[DEFAULT] vif_plugging_timeout`,
 * `vif_plugging_is_fatal`, nova's names and defaults).
 *
 * Credentials are not repeated here: Neutron is reached with `[placement]`'s keystone credentials
 * (the agent's one service user, which needs the admin role to bind ports to this host), looked up
 * in the catalog as service type `network`, as Glance is. With `[placement] auth_type = noauth`
 * there is no catalog and no token, so servers can only be built without networks.
 *
 * It is: declarations only. It is not: the Neutron client (`agent/network/`).
 */
import { z } from 'zod';
import { bool, float, httpUrl, int, list, option } from '../types';

export const neutronSection = z.object({
  endpoint_override: option(httpUrl(), {
    help: 'Neutron URL (e.g. http://127.0.0.1:9696), bypassing the catalog. Unset: the network endpoint of the keystone catalog.',
    default: '',
    expected: 'an http(s) URL such as http://127.0.0.1:9696',
  }),
  valid_interfaces: option(list(), {
    help: 'Catalog interfaces to try for the network endpoint, in order.',
    default: 'internal,public',
    expected: 'a comma-separated list of internal, public, admin',
  }),
  region_name: option(z.string(), { help: 'Region to pick the network endpoint from.', default: '', expected: 'a region name' }),
  http_retries: option(int(0), {
    help: "Extra attempts of a Neutron request that got no answer or a 5xx (nova's [neutron] http_retries).",
    default: '3',
    expected: 'an integer >= 0',
  }),
  timeout: option(float(0, true), {
    help: 'Seconds a Neutron request may take before it is abandoned (and retried).',
    default: '30',
    expected: 'a number > 0 (seconds)',
  }),
});

/** `[DEFAULT]` options about waiting for Neutron's events; merged into the DEFAULT section. */
export const vifPluggingOptions = {
  vif_plugging_timeout: option(int(0), {
    help:
      "Seconds a build (and a revert of a resize) waits for Neutron's network-vif-plugged event of each port before the " +
      'guest runs; 0 does not wait.',
    default: '300',
    expected: 'an integer >= 0 (seconds)',
  }),
  vif_plugging_is_fatal: option(bool(), {
    help: 'Whether a build whose network-vif-plugged events did not come within vif_plugging_timeout fails (true) or runs the guest anyway.',
    default: 'true',
    expected: 'true or false',
  }),
};
