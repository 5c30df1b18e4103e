/**
 * A Cinder RBD volume as nova hands it to a virt driver (`AttachedVolume`), for the qemu driver's
 * tests. Its connection_info is the shared fixture of Cinder 2025.1's (`cinder-rbd-connection-info.ts`)
 * in nova's nested form; this adds only what nova's block device mapping puts around it (device
 * name, boot index).
 */
import type { AttachedVolume } from '../../virt-drivers/types';
import { novaRbdConnectionInfo, type RbdConnectionOptions } from './cinder-rbd-connection-info';

export interface RbdVolumeOptions extends RbdConnectionOptions {
  readonly bootIndex?: number | null;
  readonly deviceName?: string;
}

/** The attached volume `volumeId` with Cinder-shaped connection_info. */
export function rbdVolume(volumeId: string, o: RbdVolumeOptions = {}): AttachedVolume {
  const { bootIndex, deviceName, ...connection } = o;
  return {
    volume_id: volumeId,
    device_name: deviceName ?? '/dev/vda',
    boot_index: bootIndex === undefined ? null : bootIndex,
    connection_info: novaRbdConnectionInfo(volumeId, connection),
  };
}
