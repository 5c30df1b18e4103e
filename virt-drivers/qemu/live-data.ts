/**
 * The `LiveMigrateData` the QEMU driver's live-migration steps hand to each other, field by field
 * (nova's `LibvirtLiveMigrateData` names where nova has one). The compute manager passes it on
 * unchanged: the result of each step is the input of the next.
 *
 * | set by (host)                        | fields |
 * |--------------------------------------|--------|
 * | checkCanLiveMigrateDestination (dest)| driver, dest_host, dest_accel, dest_qemu_version, filename |
 * | checkCanLiveMigrateSource (source)   | is_shared_instance_path, block_migration, source_host, source_qemu_version, vm, image_ref, disk_virtual_size |
 * | preLiveMigration (dest)              | target_connect_addr, migrate_uri, nbd_host, nbd_port, nbd_export |
 *
 * `vm` is the instance's `VmDefinition` as JSON: the destination starts QEMU from it, so both
 * sides run identical device and memory configurations. `filename` is the shared-storage probe:
 * a file the destination creates in its instances_path, which the source looks for in its own.
 *
 * It is: encoding and checked decoding. It is not: the steps.
 */
import type { LiveMigrateData } from '../types';
import { MigrationDataError } from './errors';
import { vmDefinitionSchema, type VmDefinition } from './instance-files';

/** A field that must be a non-empty string. @throws MigrationDataError */
export function stringField(data: LiveMigrateData, field: string): string {
  const v = data[field];
  if (typeof v !== 'string' || v === '') throw new MigrationDataError(field, 'a non-empty string (set by an earlier live-migration step)');
  return v;
}

/** A field that must be a string or null. @throws MigrationDataError */
export function optStringField(data: LiveMigrateData, field: string): string | null {
  const v = data[field];
  if (v === null || v === undefined) return null;
  if (typeof v !== 'string') throw new MigrationDataError(field, 'a string or null');
  return v;
}

/** A field that must be a non-negative integer, or null when `nullable`. @throws MigrationDataError */
export function intField(data: LiveMigrateData, field: string): number {
  const v = data[field];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new MigrationDataError(field, 'an integer >= 0');
  return v;
}

/** A field that must be a boolean. @throws MigrationDataError */
export function boolField(data: LiveMigrateData, field: string): boolean {
  const v = data[field];
  if (typeof v !== 'boolean') throw new MigrationDataError(field, 'true or false');
  return v;
}

/** The instance definition in `vm`. @throws MigrationDataError */
export function vmField(data: LiveMigrateData): VmDefinition {
  const raw = stringField(data, 'vm');
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new MigrationDataError('vm', 'the JSON of a VM definition');
  }
  const r = vmDefinitionSchema.safeParse(parsed);
  if (!r.success) throw new MigrationDataError('vm', `a VM definition (${r.error.issues[0]?.path.join('.') ?? '?'}: ${r.error.issues[0]?.message ?? 'invalid'})`);
  return r.data;
}

/** `tcp:<host>:<port>`, with IPv6 addresses in brackets. */
export function tcpUri(host: string, port: number): string {
  return `tcp:${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** The disk-copy target of a live migration: what `preLiveMigration` exported over NBD. */
export interface NbdTarget {
  readonly host: string;
  readonly port: number;
  readonly export: string;
}

/** The NBD target in the data, or undefined for an instance without a disk. @throws MigrationDataError */
export function nbdTarget(data: LiveMigrateData): NbdTarget | undefined {
  if (data.nbd_port === null || data.nbd_port === undefined) return undefined;
  return { host: stringField(data, 'nbd_host'), port: intField(data, 'nbd_port'), export: stringField(data, 'nbd_export') };
}
