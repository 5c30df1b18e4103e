/**
 * The nova releases the agent can register as, and the choice among them. A nova-compute service
 * version is a promise to the control plane: the compute RPC methods and arguments of that release
 * and its object versions. nova gates features by the lowest one, caps compute RPC by it, and from
 * 2023.2 on its api, conductor and scheduler refuse to start while any compute is older than their
 * oldest supported release.
 *
 * The agent implements two: Zed (service version 64, compute RPC 6.1, nova 26's objects) and
 * 2025.1 Epoxy (68, compute RPC 6.4, nova 31's objects). `data/object-versions.json` holds each
 * release's object manifest, written by `scripts/gen-nova-object-versions.py` from nova's source.
 *
 * Not here: asking the conductor what it runs (`service.ts`), the option (`[DEFAULT]
 * nova_service_version`, `config/sections/default.ts`).
 */
import manifests from './data/object-versions.json';

export type ObjectVersions = Readonly<Record<string, string>>;

export interface NovaRelease {
  /** The release as operators name it. */
  readonly name: 'zed' | '2025.1';
  /** nova-compute's `SERVICE_VERSION` in that release. */
  readonly serviceVersion: number;
  /** The compute RPC version that release's computes serve (its `VERSION_ALIASES` entry). */
  readonly computeRpc: string;
  /** Every registered object class and its version in that release's nova. */
  readonly objects: ObjectVersions;
}

export const ZED: NovaRelease = { name: 'zed', serviceVersion: 64, computeRpc: '6.1', objects: manifests.zed.objects };
export const EPOXY: NovaRelease = { name: '2025.1', serviceVersion: 68, computeRpc: '6.4', objects: manifests['2025.1'].objects };

/** Oldest first. */
export const NOVA_RELEASES: readonly NovaRelease[] = [ZED, EPOXY];

/**
 * Service versions between two the agent implements: 2023.1 to 2024.2 computes (65-67) speak
 * compute RPC 6.1-6.3 with objects the agent has no manifest of, and a control plane of those
 * releases refuses Zed computes (2023.2 on) or cannot read 2025.1's objects.
 */
const BETWEEN = 'the agent implements service versions 64 (Zed) and 68 (2025.1) only';

/** The configured or negotiated service version cannot be used with this control plane. */
export class ServiceVersionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServiceVersionError';
  }
}

/** The release registering as `serviceVersion` promises; undefined for one the agent does not implement. */
export function releaseOf(serviceVersion: number): NovaRelease | undefined {
  return NOVA_RELEASES.find((r) => r.serviceVersion === serviceVersion);
}

export interface ReleaseChoice {
  readonly release: NovaRelease;
  /** Something the operator should know (the control plane is newer or older than the choice). */
  readonly warning?: string;
}

/**
 * The release to register as. `configured` is `[DEFAULT] nova_service_version`; `controlPlane`
 * the lowest service version of the nova-conductor services (undefined when the conductor could
 * not say).
 *
 * auto: the newest implemented release not newer than the control plane; one newer than 2025.1
 * still takes 68 (2025.2 and 2026.1 support 2025.1 computes). Configured: that release, refused
 * when it is newer than the control plane (whose conductor cannot read its objects).
 * @throws ServiceVersionError naming the option and what would work
 */
export function chooseRelease(configured: 'auto' | number, controlPlane: number | undefined): ReleaseChoice {
  const option = 'DEFAULT.nova_service_version';
  if (configured !== 'auto') {
    const release = releaseOf(configured);
    if (!release) throw new ServiceVersionError(`${option} = ${configured}: ${BETWEEN}; expected auto, 64 or 68`);
    if (controlPlane === undefined || controlPlane === release.serviceVersion) return { release };
    if (controlPlane < release.serviceVersion) {
      throw new ServiceVersionError(
        `${option} = ${configured} (${release.name}) but nova-conductor runs service version ${controlPlane}: an older conductor cannot read ${release.name}'s objects; expected auto or ${suggestion(controlPlane)}`,
      );
    }
    return { release, warning: `nova-conductor runs service version ${controlPlane}, newer than the ${release.name} (${release.serviceVersion}) this agent registers as: a control plane from 2023.2 on refuses to start with computes older than its oldest supported release` };
  }
  if (controlPlane === undefined || controlPlane <= 0) {
    throw new ServiceVersionError(`${option} = auto: nova-conductor did not report its service version; set ${option} to 64 (Zed) or 68 (2025.1)`);
  }
  const newest = [...NOVA_RELEASES].reverse().find((r) => r.serviceVersion <= controlPlane);
  if (!newest) throw new ServiceVersionError(`${option} = auto: nova-conductor runs service version ${controlPlane}, older than Zed (64), the oldest release the agent implements`);
  if (newest === EPOXY && controlPlane > EPOXY.serviceVersion) {
    return { release: EPOXY, warning: `nova-conductor runs service version ${controlPlane}, newer than 2025.1 (68), the newest release the agent implements; registering as 68` };
  }
  if (newest === ZED && controlPlane > ZED.serviceVersion + 1) {
    throw new ServiceVersionError(`${option} = auto: nova-conductor runs service version ${controlPlane} (2023.1 to 2024.2); ${BETWEEN}`);
  }
  return { release: newest };
}

function suggestion(controlPlane: number): string {
  const older = [...NOVA_RELEASES].reverse().find((r) => r.serviceVersion <= controlPlane);
  return older ? String(older.serviceVersion) : 'a control plane of Zed or later';
}
