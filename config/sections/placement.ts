/**
 * The `[placement]` section: how the agent finds and authenticates to OpenStack Placement, with
 * keystoneauth's option names (`auth_type`, `auth_url`, `valid_interfaces`, `endpoint_override`).
 *
 * It is: declarations only. It is not: the keystone client; the secrets here (`password`,
 * `application_credential_secret`) are marked so the loader masks them in logs and errors.
 */
import { z } from 'zod';
import { choice, float, httpUrl, int, list, option, optPath, str } from '../types';

export const AUTH_TYPES = ['noauth', 'password', 'v3applicationcredential'] as const;

export const placementSection = z.object({
  auth_type: option(choice(AUTH_TYPES), {
    help: 'How to authenticate to Placement: noauth (fixed token "admin", for noauth2 deployments), password or v3applicationcredential (keystone v3).',
    default: 'noauth',
    expected: 'one of noauth, password, v3applicationcredential',
  }),
  auth_url: option(httpUrl(), {
    help: 'Keystone endpoint, e.g. https://keystone.example:5000/v3.',
    default: '',
    expected: 'an http(s) URL',
  }),
  username: option(str(), { help: 'Keystone user (auth_type = password).', default: '', expected: 'a user name' }),
  password: option(str(), {
    help: 'Keystone password (auth_type = password). The value runs to the end of the line; ; and # are part of it.',
    default: '',
    expected: 'a password',
    secret: true,
  }),
  project_name: option(str(), { help: 'Keystone project (auth_type = password).', default: '', expected: 'a project name' }),
  user_domain_name: option(str(), { help: 'Domain of the user.', default: 'Default', expected: 'a domain name' }),
  project_domain_name: option(str(), { help: 'Domain of the project.', default: 'Default', expected: 'a domain name' }),
  application_credential_id: option(str(), {
    help: 'Application credential id (auth_type = v3applicationcredential).',
    default: '',
    expected: 'an application credential id',
  }),
  application_credential_secret: option(str(), {
    help: 'Application credential secret (auth_type = v3applicationcredential).',
    default: '',
    expected: 'a secret',
    secret: true,
  }),
  region_name: option(str(), { help: 'Region to pick from the service catalog.', default: '', expected: 'a region name' }),
  valid_interfaces: option(list(), {
    help: 'Catalog interfaces to try, in order.',
    default: 'internal,public',
    expected: 'a comma-separated list of internal, public, admin',
  }),
  endpoint_override: option(httpUrl(), {
    help: 'Placement URL, bypassing the catalog. With auth_type = noauth it defaults to http://127.0.0.1:8778.',
    default: '',
    expected: 'an http(s) URL such as http://127.0.0.1:8778',
  }),
  cafile: option(optPath(), {
    help: 'CA bundle to verify Placement and keystone over https; empty uses the system store.',
    default: '',
    expected: 'an absolute path',
  }),
  timeout: option(float(0, true), {
    help: 'Seconds before a Placement request is abandoned.',
    default: '30',
    expected: 'a number > 0 (seconds)',
  }),
  retry_deadline: option(int(0), {
    help:
      'Seconds one operation (a build\'s claim, a move\'s swap, confirm, revert) keeps retrying, with backoff, while ' +
      'Placement is unreachable or answers 5xx, before it fails with a fault naming the outage; keystoneauth\'s ' +
      'connect_retries and status_code_retries count attempts of one request, this bounds the whole operation. A ' +
      '4xx or a conflict fails the operation at once. Allocation removals of deleted instances are retried until they ' +
      'succeed, whatever this says. 0 fails on the first outage.',
    default: '300',
    expected: 'an integer >= 0 (seconds)',
  }),
});
