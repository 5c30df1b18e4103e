/**
 * Typed Placement calls, each pinned to the microversion it needs. The resource tracker uses only
 * this class; it never builds a URL itself.
 */
import { PlacementVersionError } from './errors';
import type { PlacementHttp } from './http';
import {
  compareMicroversion,
  formatMicroversion,
  MIN_PLACEMENT_MICROVERSION,
  parseVersionDocument,
  type PlacementVersions,
} from './version';

/** A resource provider as Placement returns it (1.14+). */
export interface ProviderRecord {
  readonly uuid: string;
  readonly name: string;
  readonly generation: number;
  readonly parent_provider_uuid: string | null;
  readonly root_provider_uuid: string;
}

export class PlacementClient {
  constructor(readonly http: PlacementHttp) {}

  /** `GET /`: the supported microversion range. @throws PlacementError */
  async versions(): Promise<PlacementVersions> {
    const res = await this.http.request({ method: 'GET', path: '/', anonymous: true });
    const v = parseVersionDocument(res.data);
    if (!v) {
      throw new PlacementVersionError(`GET /: the answer is not a Placement version document`, {
        method: 'GET',
        path: '/',
        status: res.status,
      });
    }
    return v;
  }

  /**
   * Checks that Placement supports every microversion the agent pins.
   * @throws PlacementVersionError naming the endpoint, its max_version and what is needed.
   */
  async assertUsable(): Promise<PlacementVersions> {
    const v = await this.versions();
    if (compareMicroversion(v.max, MIN_PLACEMENT_MICROVERSION) < 0) {
      const endpoint = await this.http.endpoint();
      throw new PlacementVersionError(
        `Placement at ${endpoint} supports microversions up to ${formatMicroversion(v.max)}; ` +
          `compute-agent needs ${formatMicroversion(MIN_PLACEMENT_MICROVERSION)} or later (Placement from Train onwards)`,
        { method: 'GET', path: '/' },
      );
    }
    return v;
  }

  /** `GET /resource_providers[?in_tree=uuid]` at 1.14. @throws PlacementError */
  async listProviders(inTree?: string): Promise<ProviderRecord[]> {
    const path = inTree ? `/resource_providers?in_tree=${encodeURIComponent(inTree)}` : '/resource_providers';
    const res = await this.http.request<{ resource_providers: ProviderRecord[] }>({ method: 'GET', path, microversion: '1.14' });
    return res.data.resource_providers;
  }
}
