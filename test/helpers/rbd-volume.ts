/**
 * A Cinder RBD volume as nova hands it to a virt driver (`AttachedVolume`), its connection_info
 * shaped field for field like Cinder 2025.1's RBD driver and volume manager make it
 * (`initialize_connection` plus `access_mode`, `attachment_id`, `encrypted`, ...), for the qemu
 * driver's tests.
 */
import type { AttachedVolume } from '../../virt-drivers/types';

export interface RbdVolumeOptions {
  readonly pool?: string;
  readonly image?: string;
  readonly hosts?: readonly string[];
  readonly ports?: readonly string[];
  /** null: a cluster without cephx (auth_enabled false). */
  readonly user?: string | null;
  readonly secretUuid?: string;
  readonly accessMode?: 'rw' | 'ro';
  readonly discard?: boolean;
  readonly bootIndex?: number | null;
  readonly deviceName?: string;
}

/** The attached volume `volumeId` with Cinder-shaped connection_info. */
export function rbdVolume(volumeId: string, o: RbdVolumeOptions = {}): AttachedVolume {
  const user = o.user === undefined ? 'cinder' : o.user;
  return {
    volume_id: volumeId,
    device_name: o.deviceName ?? '/dev/vda',
    boot_index: o.bootIndex === undefined ? null : o.bootIndex,
    connection_info: {
      driver_volume_type: 'rbd',
      data: {
        name: `${o.pool ?? 'volumes'}/${o.image ?? `volume-${volumeId}`}`,
        hosts: o.hosts ?? ['127.0.0.1'],
        ports: o.ports ?? ['3301'],
        cluster_name: 'ceph',
        auth_enabled: user !== null,
        auth_username: user,
        secret_type: 'ceph',
        secret_uuid: user === null ? null : (o.secretUuid ?? '5b6e1a2c-7f3d-4a8e-9c01-2d3e4f5a6b7c'),
        volume_id: volumeId,
        discard: o.discard ?? true,
        access_mode: o.accessMode ?? 'rw',
        attachment_id: 'a77ac4e0-0000-4000-8000-000000000001',
        encrypted: false,
        qos_specs: null,
        cacheable: false,
        enforce_multipath: true,
      },
    },
  };
}
