/**
 * A console's token in nova's database, made as nova-compute makes it: a new ConsoleAuthToken
 * and its remotable `authorize(ttl)` run by nova-conductor, which stores the token's hash with
 * its expiry and answers the token itself. nova's proxies later find it by that hash
 * (`ConsoleAuthToken.validate`), so a console nova never authorized cannot be opened.
 *
 * The instance's tokens are deleted again where nova-compute deletes them (the instance deleted,
 * or live-migrated away: the transition table's `consoleTokens`), so that no token reaches a
 * guest through a host that no longer has it.
 *
 * It is: the conductor calls. It is not: the decision which console (`agent/compute/consoles.ts`).
 */
import type { ConsoleAuthorization } from '../compute/control-plane';
import { consoleAccessUrl } from '../compute/console-url';
import type { RequestContext } from '../compute/ports';
import type { Logger } from '../../lib/logging/logger';
import type { Conductor } from './conductor';
import { primitive } from './objects';
import { elevated } from './object-cache';

/** @throws ConductorError; Error when the conductor answers no token */
export async function authorizeConsoleToken(conductor: Conductor, console: ConsoleAuthorization, ttlS: number, ctx: RequestContext): Promise<{ token: string; accessUrl: string }> {
  const obj = primitive(
    'ConsoleAuthToken',
    {
      console_type: console.consoleType,
      host: console.host,
      port: console.port,
      internal_access_path: null,
      instance_uuid: console.instanceUuid,
      access_url_base: console.accessUrlBase,
    },
    conductor.objectVersions,
  );
  const { result } = await conductor.objectAction(elevated(ctx), obj, 'authorize', [ttlS]);
  if (typeof result !== 'string' || result === '') throw new Error(`nova-conductor's ConsoleAuthToken.authorize answered no token (${JSON.stringify(result)?.slice(0, 80)})`);
  return { token: result, accessUrl: consoleAccessUrl(console.consoleType, console.accessUrlBase, result) };
}

/** `ConsoleAuthToken.clean_console_auths_for_instance`. Never throws: a failure is logged (the tokens expire with their ttl). */
export async function cleanConsoleTokens(conductor: Conductor, uuid: string, ctx: RequestContext, log: Logger): Promise<void> {
  try {
    await conductor.classAction(elevated(ctx), 'ConsoleAuthToken', 'clean_console_auths_for_instance', [uuid]);
  } catch (e) {
    log.warn({ instance: uuid, reason: e instanceof Error ? e.message : String(e) }, "nova-conductor did not delete the instance's console tokens; they last until they expire");
  }
}
