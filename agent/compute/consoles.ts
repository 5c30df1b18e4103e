/**
 * `get_vnc_console`, `get_serial_console` and `validate_console_port` (nova compute RPC 6.x), as
 * nova-compute answers them for nova's console proxies:
 *
 * - get: the driver says where the guest's console listens; the control plane keeps a token for
 *   it (nova: `ConsoleAuthToken.authorize` through the conductor, valid `[consoleauth] token_ttl`
 *   seconds) and the caller gets nova's connect info: the token, the URL the user opens (the
 *   proxy's base URL with the token), the host and port the proxy connects to.
 * - validate: nova-novncproxy and nova-serialproxy ask, before connecting, whether the port a
 *   token names is still this instance's console (a guest started again may listen elsewhere).
 *
 * Refusals are nova's: a console type the method does not serve is `ConsoleTypeInvalid`, a kind
 * this host has switched off or the guest lacks is `ConsoleTypeUnavailable` (nova's API answers
 * both with 400), a guest not running is `InstanceNotReady` (409).
 *
 * It is: the flows. It is not: the sockets (the driver's `getConsole`), nor the token's storage
 * (nova's database, through `ControlPlane.authorizeConsole`).
 */
import { NovaError } from '../rpc/oslo/errors';
import { ConsoleUnavailableError, InstanceStateError } from '../../virt-drivers/errors';
import type { ConsoleKind } from '../../virt-drivers/driver';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';

/** `[vnc]` / `[serial_console]` as the flows need them: the proxies' URLs (null: that kind is off), the token's life. */
export interface ConsoleSettings {
  readonly novncBaseUrl: string | null;
  readonly serialBaseUrl: string | null;
  readonly tokenTtlS: number;
}

/** Consoles off: what an agent without the sections answers. */
export const NO_CONSOLES: ConsoleSettings = { novncBaseUrl: null, serialBaseUrl: null, tokenTtlS: 600 };

/** nova's connect info (`Console.get_connection_info`): what nova-api hands the user (`access_url`) and the proxy. */
export interface ConsoleConnectInfo {
  readonly token: string;
  readonly access_url: string;
  readonly host: string;
  readonly port: number;
  readonly internal_access_path: null;
}

/** The console type nova's API asked for is not one this method serves. nova: `ConsoleTypeInvalid` (400). */
export class ConsoleTypeInvalidError extends NovaError {
  constructor(consoleType: string) {
    super('ConsoleTypeInvalid', `Invalid console type ${consoleType}`, { console_type: consoleType }, 400);
  }
}

/** The console type is off on this host, or the guest has none. nova: `ConsoleTypeUnavailable` (400). */
export class ConsoleTypeUnavailableError extends NovaError {
  constructor(consoleType: string, reason: string, options?: { cause?: unknown }) {
    super('ConsoleTypeUnavailable', `Unavailable console type ${consoleType}: ${reason}`, { console_type: consoleType }, 400, options);
  }
}

/** The guest is not running, so no console listens. nova: `InstanceNotReady` (409). */
export class InstanceNotReadyError extends NovaError {
  constructor(uuid: string, reason: string, options?: { cause?: unknown }) {
    super('InstanceNotReady', `Instance ${uuid} is not ready: ${reason}`, { instance_id: uuid }, 409, options);
  }
}

/** The console types the methods serve: the driver's kind of console, and the option that switches it on. */
const CONSOLE_TYPES = {
  novnc: { kind: 'vnc', option: '[vnc] enabled' },
  serial: { kind: 'serial', option: '[serial_console] enabled' },
} as const satisfies Record<string, { readonly kind: ConsoleKind; readonly option: string }>;
type ConsoleType = keyof typeof CONSOLE_TYPES;

export class ConsoleFlows {
  constructor(
    private readonly c: Pick<FlowContext, 'require' | 'driver' | 'controlPlane' | 'log'>,
    private readonly settings: ConsoleSettings,
  ) {}

  /** `get_vnc_console` (console_type `novnc`). @throws ConsoleTypeInvalidError, ConsoleTypeUnavailableError, InstanceNotReadyError, InstanceNotFoundError */
  vnc(uuid: string, consoleType: string, ctx: RequestContext): Promise<ConsoleConnectInfo> {
    if (consoleType !== 'novnc') throw new ConsoleTypeInvalidError(consoleType);
    return this.authorized(uuid, consoleType, this.settings.novncBaseUrl, ctx);
  }

  /** `get_serial_console` (console_type `serial`). @throws as `vnc` */
  serial(uuid: string, consoleType: string, ctx: RequestContext): Promise<ConsoleConnectInfo> {
    if (consoleType !== 'serial') throw new ConsoleTypeInvalidError(consoleType);
    return this.authorized(uuid, consoleType, this.settings.serialBaseUrl, ctx);
  }

  /**
   * `validate_console_port`: whether `port` is where the instance's console of `consoleType`
   * listens now (nova compares the strings). A console that does not answer is not valid.
   * @throws InstanceNotFoundError
   */
  async validatePort(uuid: string, port: string, consoleType: string): Promise<boolean> {
    const rec = this.c.require(uuid);
    if (!Object.hasOwn(CONSOLE_TYPES, consoleType)) return false;
    try {
      const endpoint = await this.c.driver.getConsole(rec, CONSOLE_TYPES[consoleType as ConsoleType].kind);
      return String(endpoint.port) === port;
    } catch (e) {
      if (e instanceof ConsoleUnavailableError || e instanceof InstanceStateError) return false;
      throw e;
    }
  }

  /** `baseUrl` null: the console type is off on this host. */
  private async authorized(uuid: string, consoleType: ConsoleType, baseUrl: string | null, ctx: RequestContext): Promise<ConsoleConnectInfo> {
    const { kind, option } = CONSOLE_TYPES[consoleType];
    if (baseUrl === null) throw new ConsoleTypeUnavailableError(consoleType, `${option} is false on this host`);
    const rec = this.c.require(uuid);
    let endpoint;
    try {
      endpoint = await this.c.driver.getConsole(rec, kind);
    } catch (e) {
      if (e instanceof ConsoleUnavailableError) throw new ConsoleTypeUnavailableError(consoleType, e.message, { cause: e });
      if (e instanceof InstanceStateError) throw new InstanceNotReadyError(uuid, e.message, { cause: e });
      throw e;
    }
    const { token, accessUrl } = await this.c.controlPlane.authorizeConsole(
      { instanceUuid: uuid, consoleType, host: endpoint.host, port: endpoint.port, accessUrlBase: baseUrl },
      this.settings.tokenTtlS,
      ctx,
    );
    this.c.log.info({ instance: uuid, console: consoleType, host: endpoint.host, port: endpoint.port }, 'console authorized');
    return { token, access_url: accessUrl, host: endpoint.host, port: endpoint.port, internal_access_path: null };
  }
}
