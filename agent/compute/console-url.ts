/**
 * The URL a user opens for a console: nova's `ConsoleAuthToken.access_url`, the proxy's base URL
 * with the console's token. noVNC (>= 1.1) reads the token from the `path` query parameter, so it
 * goes there (after any path the base URL names already); the serial proxy reads `?token=`.
 */
export function consoleAccessUrl(consoleType: string, baseUrl: string, token: string): string {
  if (consoleType !== 'novnc') return `${baseUrl}?token=${token}`;
  const url = new URL(baseUrl);
  url.searchParams.set('path', `${url.searchParams.get('path') ?? ''}?token=${token}`);
  return url.toString();
}
