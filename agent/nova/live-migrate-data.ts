/**
 * check_can_live_migrate_destination's answer as nova's conductor must read it: a
 * `LibvirtLiveMigrateData` whose `vifs` list each port of the instance (nova's
 * `VIFMigrateData.create_skeleton_migrate_vifs`). With Neutron's `binding-extended` extension the
 * 2025.1 conductor binds those ports to the destination and writes each binding into its entry
 * (`_bind_ports_on_destination`, `_update_migrate_vifs_from_bindings`); a plain dict there fails
 * the migration with an AttributeError.
 *
 * The conductor keeps only the fields its class has, so the driver's own fields do not survive the
 * trip to the source: the destination answers pre_live_migration from what it journaled (see
 * `LiveFlows.preLiveMigration`). Of the driver's data only the fields nova's class shares, with
 * their types, are copied.
 *
 * It is: one pure encoding. It is not: the data's meaning (`virt-drivers/qemu/live-data.ts`).
 */
import type { InstanceRecord } from '../../model/instance';
import type { LiveMigrateData } from '../../virt-drivers/types';
import { primitive, type Primitive } from './objects';
import type { ObjectVersions } from './releases';

/** Driver fields nova's LibvirtLiveMigrateData also has, and the JSON type each must have there. */
const SHARED_FIELDS: Readonly<Record<string, 'string' | 'boolean'>> = {
  filename: 'string',
  is_shared_instance_path: 'boolean',
  block_migration: 'boolean',
  target_connect_addr: 'string',
};

/** `data` (and the instance's ports) as a LibvirtLiveMigrateData primitive of the conductor's release. */
export function libvirtLiveMigrateData(rec: InstanceRecord, data: LiveMigrateData, versions: ObjectVersions): Primitive {
  const shared = Object.fromEntries(Object.entries(data).filter(([k, v]) => SHARED_FIELDS[k] !== undefined && typeof v === SHARED_FIELDS[k]));
  const vifs = (rec.network_info ?? []).map((vif) => primitive('VIFMigrateData', { port_id: vif.id, source_vif: JSON.stringify(vif) }, versions));
  return primitive('LibvirtLiveMigrateData', { ...shared, vifs }, versions);
}
