/**
 * How the Placement client gets a token and an endpoint. `NoAuth` serves deployments running
 * Placement with `auth_strategy = noauth2` (a fixed token, `admin`, and an explicit endpoint);
 * keystone v3 providers live in `keystone.ts`.
 */

/** Supplies the token and endpoint for each Placement request. */
export interface AuthProvider {
  /** A token to send as X-Auth-Token; may fetch or renew one. @throws PlacementAuthError */
  token(): Promise<string>;
  /** The Placement base URL, without a trailing slash. @throws PlacementAuthError */
  endpoint(): Promise<string>;
  /** Forgets the cached token after a 401, so the next `token()` gets a fresh one. */
  invalidate(): void;
}

export const NOAUTH_TOKEN = 'admin';
export const DEFAULT_NOAUTH_ENDPOINT = 'http://127.0.0.1:8778';

/** noauth2: Placement accepts the token `admin` for an admin context. */
export class NoAuth implements AuthProvider {
  constructor(private readonly url: string = DEFAULT_NOAUTH_ENDPOINT) {}
  token(): Promise<string> {
    return Promise.resolve(NOAUTH_TOKEN);
  }
  endpoint(): Promise<string> {
    return Promise.resolve(this.url.replace(/\/+$/, ''));
  }
  invalidate(): void {}
}
