/**
 * The instance argument tests send with build_and_run_instance, and its flavor. Its own module,
 * free of nock, so the integration tests can use it (see the dependency rule
 * integration-tests-reach-no-nock).
 */
import { randomUUID } from 'node:crypto';

export const FLAVOR = { name: 'm1.small', vcpus: 2, memory_mb: 2048, root_gb: 10, ephemeral_gb: 0, swap: 512, extra_specs: {} };

export function instanceArgs(uuid = randomUUID(), flavor: object = FLAVOR): Record<string, unknown> {
  return { uuid, display_name: `vm-${uuid.slice(0, 6)}`, project_id: 'proj-1', user_id: 'user-1', flavor };
}
