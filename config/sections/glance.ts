/**
 * The `[glance]` and `[image_cache]` sections: where the qemu driver finds Glance and how long it
 * keeps the images it downloaded, with nova's option names (`[glance] endpoint_override`,
 * `valid_interfaces`, `region_name`, `num_retries`; `[image_cache] manager_interval`,
 * `subdirectory_name`, `remove_unused_base_images`, `remove_unused_original_minimum_age_seconds`).
 *
 * Credentials are not repeated here: Glance is reached with `[placement]`'s keystone credentials
 * (the agent's one service user), looked up in the catalog as service type `image`. With
 * `[placement] auth_type = noauth` there is no catalog, so `endpoint_override` is how Glance is
 * found, and requests carry no token (a Glance without keystone).
 *
 * It is: declarations only. It is not: the Glance client (`virt-drivers/glance/`).
 */
import { z } from 'zod';
import { bool, float, httpUrl, int, list, option } from '../types';

/** `_base`-like: one path component. */
const dirName = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (/^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(v)) return v;
    ctx.addIssue({ code: 'custom', message: 'not a plain directory name' });
    return z.NEVER;
  });

export const glanceSection = z.object({
  endpoint_override: option(httpUrl(), {
    help:
      'Glance URL (e.g. http://127.0.0.1:9292), bypassing the catalog. Unset: the image endpoint of the keystone ' +
      "catalog, with [placement]'s credentials; with [placement] auth_type = noauth, Glance images are not used " +
      'unless this is set.',
    default: '',
    expected: 'an http(s) URL such as http://127.0.0.1:9292',
  }),
  valid_interfaces: option(list(), {
    help: 'Catalog interfaces to try for the image endpoint, in order.',
    default: 'internal,public',
    expected: 'a comma-separated list of internal, public, admin',
  }),
  region_name: option(z.string(), { help: 'Region to pick the image endpoint from.', default: '', expected: 'a region name' }),
  num_retries: option(int(0), {
    help: 'Extra attempts of a Glance request that got no answer or a 5xx (not of a download cut off midway).',
    default: '3',
    expected: 'an integer >= 0',
  }),
  timeout: option(float(0, true), {
    help: 'Seconds without a byte from Glance (connecting, or during a download) before the request is abandoned.',
    default: '60',
    expected: 'a number > 0 (seconds)',
  }),
});

export const imageCacheSection = z.object({
  subdirectory_name: option(dirName(), {
    help: 'Directory under [DEFAULT] instances_path holding the images downloaded from Glance.',
    default: '_base',
    expected: 'a directory name (letters, digits, . _ -)',
  }),
  manager_interval: option(int(-1), {
    help: 'Seconds between runs of the cache manager, which removes unused images; 0: every 60 seconds; -1: never.',
    default: '2400',
    expected: 'an integer >= -1 (seconds)',
  }),
  remove_unused_base_images: option(bool(), {
    help: 'Whether the cache manager removes images no instance of this host uses.',
    default: 'true',
    expected: 'true or false',
  }),
  remove_unused_original_minimum_age_seconds: option(int(0), {
    help: 'An unused image is removed once it has not been used for this many seconds.',
    default: '86400',
    expected: 'an integer >= 0 (seconds)',
  }),
});
