/**
 * The `[cinder]` section and the volume-creation knobs: where the agent finds Cinder, and how long
 * a build waits for a volume it created to become available (`[DEFAULT]
 * block_device_allocate_retries`, `block_device_allocate_retries_interval`, nova's names and
 * defaults).
 *
 * Credentials are not repeated here: Cinder is reached as nova-compute reaches it, with the
 * requesting user's token from the RPC context (so a volume a build creates belongs to the
 * server's project) and the agent's own token (`[placement]`'s keystone credentials, a user with
 * the `service` role) as `X-Service-Token`; a request without a user token (the agent acting for
 * itself, e.g. a delete it resumes after a restart) goes with the agent's token alone. The
 * endpoint is the catalog's `block-storage` service, or `volumev3` or `volume` (what older
 * catalogs call it). With `[placement] auth_type = noauth` there is no catalog: servers can only
 * be built without volumes unless `endpoint_override` is set.
 *
 * It is: declarations only. It is not: the Cinder client (`agent/volume/`).
 */
import { z } from 'zod';
import { float, httpUrl, int, list, option } from '../types';

export const cinderSection = z.object({
  endpoint_override: option(httpUrl(), {
    help: 'Cinder URL with its version (e.g. http://127.0.0.1:8776/v3), bypassing the catalog. Unset: the block-storage endpoint of the keystone catalog.',
    default: '',
    expected: 'an http(s) URL such as http://127.0.0.1:8776/v3',
  }),
  valid_interfaces: option(list(), {
    help: 'Catalog interfaces to try for the block-storage endpoint, in order.',
    default: 'internal,public',
    expected: 'a comma-separated list of internal, public, admin',
  }),
  os_region_name: option(z.string(), { help: "Region to pick the block-storage endpoint from (nova's [cinder] os_region_name).", default: '', expected: 'a region name' }),
  http_retries: option(int(0), {
    help: "Extra attempts of a Cinder request that got no answer or a 5xx (nova's [cinder] http_retries).",
    default: '3',
    expected: 'an integer >= 0',
  }),
  timeout: option(float(0, true), {
    help:
      "Seconds a Cinder request may take before it is abandoned (and retried, except a POST that creates: a second one would make a second volume). nova's client waits without limit; a loaded Cinder API can take tens of seconds to answer a create.",
    default: '120',
    expected: 'a number > 0 (seconds)',
  }),
});

/** `[DEFAULT]` options about volumes a build creates; merged into the DEFAULT section. */
export const blockDeviceOptions = {
  block_device_allocate_retries: option(int(0), {
    help: 'How many times a build looks at a volume it created (from an image, a snapshot or blank) before giving up on it becoming available.',
    default: '60',
    expected: 'an integer >= 0',
  }),
  block_device_allocate_retries_interval: option(int(0), {
    help: 'Seconds between those looks.',
    default: '3',
    expected: 'an integer >= 0 (seconds)',
  }),
};
