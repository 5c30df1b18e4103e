/**
 * RPC API versions ("6.1", "6.1.2") and oslo.messaging's compatibility rule, as its dispatcher
 * applies it (`_utils.version_is_compatible`): a request for version R is served by an endpoint at
 * version V when the majors are equal and R's minor (then revision) does not exceed V's.
 *
 * Not here: which versions the agent serves (the dispatcher decides from what is registered).
 */

/** A parsed `major.minor[.revision]`. */
export interface RpcVersion {
  readonly major: number;
  readonly minor: number;
  readonly revision: number;
}

const VERSION = /^(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?$/;

/** Parses "X.Y" or "X.Y.Z"; undefined for anything else (the caller names the bad value). */
export function parseVersion(text: string): RpcVersion | undefined {
  const m = VERSION.exec(text);
  if (!m) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), revision: m[3] === undefined ? 0 : Number(m[3]) };
}

/** `parseVersion` for versions written in code; throws on a typo there. */
export function version(text: string): RpcVersion {
  const v = parseVersion(text);
  if (!v) throw new RangeError(`not an RPC version: ${JSON.stringify(text)}`);
  return v;
}

export function formatVersion(v: RpcVersion): string {
  return v.revision === 0 ? `${v.major}.${v.minor}` : `${v.major}.${v.minor}.${v.revision}`;
}

/** Orders versions: negative when a < b, 0 when equal, positive when a > b. */
export function compareVersions(a: RpcVersion, b: RpcVersion): number {
  return a.major - b.major || a.minor - b.minor || a.revision - b.revision;
}

/** oslo's rule: can an endpoint implementing `served` handle a request for `requested`? */
export function isCompatible(served: RpcVersion, requested: RpcVersion): boolean {
  if (requested.major !== served.major) return false;
  if (requested.minor > served.minor) return false;
  return !(requested.minor === served.minor && requested.revision > served.revision);
}
