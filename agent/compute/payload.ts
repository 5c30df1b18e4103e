/**
 * Versioned notification payloads, shaped like nova's `InstanceActionPayload` (a NovaObject
 * primitive), so consumers of nova's notifications can read ours.
 */
import type { InstanceRecord } from '../../model/instance';

const POWER = ['pending', 'running', 'pending', 'paused', 'shutdown', 'pending', 'crashed', 'suspended'];

export function payloadOf(rec: InstanceRecord, host: string, fault?: string): Record<string, unknown> {
  return {
    'nova_object.name': 'InstanceActionPayload',
    'nova_object.namespace': 'nova',
    'nova_object.version': '1.8',
    'nova_object.data': {
      uuid: rec.uuid,
      display_name: rec.name,
      host,
      node: host,
      state: rec.vm_state,
      task_state: rec.task_state,
      power_state: POWER[rec.power_state] ?? 'pending',
      tenant_id: rec.project_id,
      user_id: rec.user_id,
      flavor: {
        'nova_object.name': 'FlavorPayload',
        'nova_object.namespace': 'nova',
        'nova_object.version': '1.4',
        'nova_object.data': {
          name: rec.flavor.name,
          vcpus: rec.flavor.vcpus,
          memory_mb: rec.flavor.memory_mb,
          root_gb: rec.flavor.root_gb,
          ephemeral_gb: rec.flavor.ephemeral_gb,
          swap: rec.flavor.swap,
          extra_specs: rec.flavor.extra_specs,
        },
      },
      launched_at: rec.launched_at ?? null,
      fault: fault ? { 'nova_object.name': 'ExceptionPayload', 'nova_object.namespace': 'nova', 'nova_object.version': '1.1', 'nova_object.data': { exception_message: fault } } : null,
      ...(rec.migration ? { migration_uuid: rec.migration.uuid } : {}),
    },
  };
}
