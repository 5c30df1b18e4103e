/** An instance record as the qemu driver writes it, for unit tests. */
import type { InstanceRecord } from '../../../../virt-drivers/qemu/instance-files';

export const RECORD: InstanceRecord = {
  uuid: '11111111-1111-4111-8111-111111111111',
  name: 'instance-1',
  host: 'host-a',
  flavor: { vcpus: 1, memory_mb: 32, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} },
  imageRef: 'tick.img',
  image: { path: '/images/tick.img', format: 'raw' },
  vm: { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 1, memoryMb: 32, disk: true },
  power: 'running',
  task: null,
  migration: null,
  process: { pid: 1234, startTicks: '99', startedAt: '2026-01-01T00:00:00.000Z' },
  lastExit: null,
};
