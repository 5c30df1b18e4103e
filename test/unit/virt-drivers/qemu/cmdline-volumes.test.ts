// The volume part of the QEMU command line: per RBD volume a secret object QEMU fills from the key
// file (the key itself on no command line), an rbd protocol node and a raw format node as libvirt
// makes them, a virtio-blk device with the volume id as serial; q35 root ports clear of the NICs',
// fixed pci.0 slots on pc; the boot order between the local disk and the volumes.
import { bootOrder, NIC_SLOTS, qemuCommandLine, volumeBlockdevs, volumeDevice } from '../../../../virt-drivers/qemu/cmdline';
import { instancePaths, type RbdVolumeDefinition, type VmDefinition } from '../../../../virt-drivers/qemu/instance-files';
import { VOLUME_SLOTS } from '../../../../virt-drivers/qemu/volumes';

const UUID = '11111111-1111-4111-8111-111111111111';
const SECRET = '5b6e1a2c-7f3d-4a8e-9c01-2d3e4f5a6b7c';
const DIR = '/etc/compute-agent/secrets';
const paths = instancePaths(`/srv/instances/${UUID}`);
const DEF: VmDefinition = { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 1, memoryMb: 32, disk: true, nics: [] };
const BOOT: RbdVolumeDefinition = {
  slot: 0,
  volumeId: '0d1a4c4e-1111-4111-8111-111111111111',
  pool: 'volumes',
  image: 'volume-0d1a4c4e-1111-4111-8111-111111111111',
  servers: [{ host: '127.0.0.1', port: '3301' }],
  user: 'cinder',
  secretUuid: SECRET,
  readOnly: false,
  discard: true,
  bootIndex: 0,
};
const DATA: RbdVolumeDefinition = { ...BOOT, slot: 2, volumeId: '0d1a4c4e-2222-4222-8222-222222222222', image: 'volume-2', user: null, secretUuid: null, readOnly: true, discard: false, bootIndex: null };

function values(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1] as string] : []));
}
const line = (def: VmDefinition): string[] => qemuCommandLine({ uuid: UUID, name: 'x', def, paths, sandbox: false, rbdSecretsDir: DIR });

describe('qemu command line: RBD volumes', () => {
  test('q35: the secret from the key file (base64), the rbd node as libvirt makes it, the raw node, virtio-blk with the serial on its root port', () => {
    const args = line({ ...DEF, disk: false, volumes: [BOOT] });
    expect(values(args, '-object')).toEqual([`secret,id=vol0-secret,file=${DIR}/${SECRET}.base64,format=base64`]);
    expect(values(args, '-blockdev').map((j) => JSON.parse(j) as unknown)).toEqual([
      {
        driver: 'rbd',
        'node-name': 'vol0-storage',
        pool: 'volumes',
        image: BOOT.image,
        server: [{ host: '127.0.0.1', port: '3301' }],
        user: 'cinder',
        'auth-client-required': ['cephx', 'none'],
        'key-secret': 'vol0-secret',
        cache: { direct: true, 'no-flush': false },
        discard: 'unmap',
        'read-only': false,
      },
      { driver: 'raw', 'node-name': 'vol0-format', file: 'vol0-storage', cache: { direct: true, 'no-flush': false }, discard: 'unmap', 'read-only': false },
    ]);
    expect(values(args, '-device')).toContain(`virtio-blk-pci,drive=vol0-format,id=virtio-vol0,serial=${BOOT.volumeId},bus=volport0,bootindex=1`);
    // The secret object comes before the node that names it, the root port before its device.
    expect(args.indexOf('-object')).toBeLessThan(args.indexOf('-blockdev'));
    expect(args.findIndex((a) => a.startsWith('pcie-root-port,id=volport0'))).toBeLessThan(args.findIndex((a) => a.startsWith('virtio-blk-pci')));
    expect(args.join(' ')).not.toMatch(/key=|AQ[A-Za-z0-9+/]{30}/);
  });

  test('q35: one volume root port per slot, chassis and addresses clear of the NIC root ports', () => {
    const ports = values(line({ ...DEF, volumes: [] }), '-device').filter((d) => d.startsWith('pcie-root-port'));
    expect(ports).toHaveLength(NIC_SLOTS + VOLUME_SLOTS);
    const vol = ports.filter((p) => p.includes('id=volport'));
    expect(vol[0]).toBe('pcie-root-port,id=volport0,bus=pcie.0,chassis=9,addr=0x8');
    expect(vol[7]).toBe('pcie-root-port,id=volport7,bus=pcie.0,chassis=16,addr=0xf');
    const field = (k: string): string[] => ports.map((p) => new RegExp(`${k}=([^,]+)`).exec(p)?.[1] as string);
    expect(new Set(field('chassis')).size).toBe(ports.length);
    expect(new Set(field('addr')).size).toBe(ports.length);
  });

  test('a read-only volume without cephx: no secret object, auth none, read-only nodes, no discard, no bootindex', () => {
    const args = line({ ...DEF, volumes: [DATA] });
    expect(values(args, '-object')).toEqual([]);
    const [storage, format] = values(args, '-blockdev').map((j) => JSON.parse(j) as Record<string, unknown>);
    expect(storage).toMatchObject({ 'auth-client-required': ['none'], 'read-only': true });
    expect(storage).not.toHaveProperty('user');
    expect(storage).not.toHaveProperty('key-secret');
    expect(storage).not.toHaveProperty('discard');
    expect(format).toMatchObject({ 'read-only': true });
    expect(values(args, '-device')).toContain(`virtio-blk-pci,drive=vol2-format,id=virtio-vol2,serial=${DATA.volumeId},bus=volport2`);
  });

  test('pc machines: volumes at fixed pci.0 addresses below the NICs\' (0x10+), no root ports', () => {
    const args = line({ ...DEF, machine: 'pc-i440fx-7.2', nics: [{ port: 'p', mac: 'fa:16:3e:00:00:01', tap: 'tapp', mtu: null, slot: 0 }], volumes: [BOOT, DATA] });
    expect(values(args, '-device').filter((d) => d.startsWith('pcie-root-port'))).toEqual([]);
    expect(values(args, '-device')).toEqual(
      expect.arrayContaining([
        `virtio-blk-pci,drive=vol0-format,id=virtio-vol0,serial=${BOOT.volumeId},bus=pci.0,addr=0x8,bootindex=1`,
        `virtio-blk-pci,drive=vol2-format,id=virtio-vol2,serial=${DATA.volumeId},bus=pci.0,addr=0xa`,
        'virtio-net-pci,netdev=hostnet0,id=net0,mac=fa:16:3e:00:00:01,bus=pci.0,addr=0x10,romfile=',
      ]),
    );
  });

  test('boot order: the local disk keeps 1 unless a volume boots first; a volume boots at its boot_index + 1', () => {
    expect(bootOrder(DEF)).toEqual({ disk: 1, volumes: new Map() });
    expect(bootOrder({ ...DEF, volumes: [DATA, { ...BOOT, bootIndex: 1 }] })).toEqual({ disk: 1, volumes: new Map([[0, 2]]) });
    expect(bootOrder({ ...DEF, volumes: [BOOT] })).toEqual({ disk: undefined, volumes: new Map([[0, 1]]) });
    expect(bootOrder({ ...DEF, disk: false, volumes: [BOOT, { ...DATA, bootIndex: 3 }] })).toEqual({ disk: undefined, volumes: new Map([[0, 1], [2, 4]]) });
    const withDisk = values(line({ ...DEF, volumes: [BOOT] }), '-device');
    expect(withDisk).toContain('virtio-blk-pci,drive=drive-disk0,id=virtio-disk0');
    expect(withDisk.filter((d) => d.includes('bootindex='))).toEqual([expect.stringContaining('id=virtio-vol0,') as unknown as string]);
    expect(values(line({ ...DEF, volumes: [DATA] }), '-device')).toContain('virtio-blk-pci,drive=drive-disk0,id=virtio-disk0,bootindex=1');
  });

  test('a definition without a volume list (older records) gets exactly the old command line', () => {
    const old: VmDefinition = { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 1, memoryMb: 32, disk: true };
    const args = line(old);
    expect(values(args, '-blockdev')).toEqual([]);
    expect(values(args, '-object')).toEqual([]);
    expect(values(args, '-device')).toEqual(['isa-serial,chardev=charserial0,id=serial0', 'virtio-blk-pci,drive=drive-disk0,id=virtio-disk0,bootindex=1']);
  });

  test('the QMP hot-plug arguments are the command line\'s; commas in the secrets path are doubled; a keyed volume needs the directory', () => {
    const [storage] = volumeBlockdevs(BOOT);
    expect(storage).toMatchObject({ 'node-name': 'vol0-storage', 'key-secret': 'vol0-secret' });
    expect(volumeDevice('q35', DATA, undefined)).toEqual({ driver: 'virtio-blk-pci', drive: 'vol2-format', id: 'virtio-vol2', serial: DATA.volumeId, bus: 'volport2' });
    const odd = qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, volumes: [BOOT] }, paths, sandbox: false, rbdSecretsDir: '/etc/a,b' });
    expect(values(odd, '-object')).toEqual([`secret,id=vol0-secret,file=/etc/a,,b/${SECRET}.base64,format=base64`]);
    expect(() => qemuCommandLine({ uuid: UUID, name: 'x', def: { ...DEF, volumes: [BOOT] }, paths, sandbox: false })).toThrow(/needs a cephx key/);
  });
});
