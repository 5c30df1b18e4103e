// Cinder RBD connection_info to the qemu driver's volume definitions: every field QEMU is given
// comes out checked, and a bad one is refused with one line naming the field and the form expected.
import { VolumeConnectionError } from '../../../../virt-drivers/qemu/errors';
import { neededSecrets, rbdSecretFile, rbdVolumeDefinition, VOLUME_SLOTS, volumeDefinitions } from '../../../../virt-drivers/qemu/volumes';
import type { AttachedVolume } from '../../../../virt-drivers/types';
import { rbdVolume } from '../../../helpers/rbd-volume';

const I = 'inst-1';
const V1 = '0d1a4c4e-1111-4111-8111-111111111111';
const V2 = '0d1a4c4e-2222-4222-8222-222222222222';
const SECRET = '5b6e1a2c-7f3d-4a8e-9c01-2d3e4f5a6b7c';

/** `v` with its connection_info.data changed by `patch` (undefined values remove the key). */
function withData(v: AttachedVolume, patch: Record<string, unknown>): AttachedVolume {
  const data: Record<string, unknown> = { ...v.connection_info.data, ...patch };
  for (const [k, val] of Object.entries(patch)) if (val === undefined) delete data[k];
  return { ...v, connection_info: { ...v.connection_info, data } };
}

/** The message of what `fn` throws, checking it is a VolumeConnectionError. */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(VolumeConnectionError);
    return (e as Error).message;
  }
  throw new Error('expected a VolumeConnectionError');
}

describe('qemu volumes: Cinder RBD connection_info to definitions', () => {
  test("Cinder 2025.1's connection_info: pool and image split at the first /, monitors as strings, cephx user and secret, discard, rw", () => {
    expect(rbdVolumeDefinition(I, rbdVolume(V1, { bootIndex: 0, hosts: ['10.0.0.1', '10.0.0.2'], ports: ['6789', '6789'] }), 3)).toEqual({
      slot: 3,
      volumeId: V1,
      pool: 'volumes',
      image: `volume-${V1}`,
      servers: [
        { host: '10.0.0.1', port: '6789' },
        { host: '10.0.0.2', port: '6789' },
      ],
      user: 'cinder',
      secretUuid: SECRET,
      readOnly: false,
      discard: true,
      bootIndex: 0,
    });
  });

  test('read-only access, no discard, no cephx (auth_enabled false: no user, no key file), numeric ports, nova\'s -1 boot index', () => {
    const d = rbdVolumeDefinition(I, { ...withData(rbdVolume(V1, { user: null, accessMode: 'ro', discard: false }), { ports: [3301] }), boot_index: -1 }, 0);
    expect(d).toMatchObject({ user: null, secretUuid: null, readOnly: true, discard: false, bootIndex: null, servers: [{ host: '127.0.0.1', port: '3301' }] });
    expect(rbdVolumeDefinition(I, withData(rbdVolume(V1), { name: 'pool/ns/image' }), 0)).toMatchObject({ pool: 'pool', image: 'ns/image' });
  });

  test('absent optional fields take Cinder\'s meaning: rw, no discard, no auth', () => {
    const v = withData(rbdVolume(V1), { access_mode: undefined, discard: undefined, auth_enabled: undefined, auth_username: undefined, secret_uuid: undefined });
    expect(rbdVolumeDefinition(I, v, 0)).toMatchObject({ readOnly: false, discard: false, user: null, secretUuid: null });
  });

  test('another back end is refused naming driver_volume_type and the one supported', () => {
    const iscsi: AttachedVolume = { ...rbdVolume(V1), connection_info: { driver_volume_type: 'iscsi', data: { target_portal: '10.0.0.1:3260' } } };
    expect(refusal(() => rbdVolumeDefinition(I, iscsi, 0))).toBe(`instance ${I}: volume ${V1}: connection_info.driver_volume_type must be "rbd", the only back end the qemu driver attaches (got "iscsi")`);
  });

  test.each([
    ['name', { name: 'volume-only' }, 'connection_info.data.name must be "<pool>/<image>"'],
    ['name', { name: '/image' }, 'connection_info.data.name must be "<pool>/<image>"'],
    ['hosts', { hosts: [] }, 'connection_info.data.hosts must be a non-empty list of monitor addresses'],
    ['hosts', { hosts: '127.0.0.1' }, 'connection_info.data.hosts must be a non-empty list'],
    ['ports', { ports: ['3301', '3302'] }, 'connection_info.data.ports must be a list of ports (strings such as "6789"), one per host'],
    ['ports', { ports: ['70000'] }, 'connection_info.data.ports must be'],
    ['auth_enabled', { auth_enabled: 'yes' }, 'connection_info.data.auth_enabled must be true or false'],
    ['auth_username', { auth_username: null }, 'connection_info.data.auth_username must be the cephx user without "client."'],
    ['secret_uuid', { secret_uuid: '../../etc/shadow' }, "connection_info.data.secret_uuid must be a UUID (the name of the host's key file)"],
    ['secret_type', { secret_type: 'volume' }, 'connection_info.data.secret_type must be "ceph"'],
    ['access_mode', { access_mode: 'rwx' }, 'connection_info.data.access_mode must be "rw" or "ro"'],
    ['discard', { discard: 'unmap' }, 'connection_info.data.discard must be true or false'],
    ['encrypted', { encrypted: true }, 'connection_info.data.encrypted must be false (the qemu driver does not attach encrypted volumes)'],
  ])('a malformed %s is refused naming it and the form expected', (_field, patch, words) => {
    expect(refusal(() => rbdVolumeDefinition(I, withData(rbdVolume(V1), patch), 0))).toContain(`instance ${I}: volume ${V1}: ${words}`);
  });

  test('a malformed volume itself: no volume id, no connection_info, no data, a fractional boot index', () => {
    expect(refusal(() => rbdVolumeDefinition(I, { ...rbdVolume(V1), volume_id: '' }, 2))).toBe(`instance ${I}: volumes[2].volume_id must be the Cinder volume id (a UUID)`);
    expect(refusal(() => rbdVolumeDefinition(I, { ...rbdVolume(V1), connection_info: null as unknown as AttachedVolume['connection_info'] }, 0))).toContain('connection_info must be an object {driver_volume_type, data}');
    expect(refusal(() => rbdVolumeDefinition(I, { ...rbdVolume(V1), connection_info: { driver_volume_type: 'rbd', data: [] as unknown as Record<string, unknown> } }, 0))).toContain('connection_info.data must be an object');
    expect(refusal(() => rbdVolumeDefinition(I, { ...rbdVolume(V1), boot_index: 0.5 }, 0))).toContain('boot_index must be an integer or null');
  });

  test('the message never repeats the data (it may carry other back ends\' credentials)', () => {
    const v = withData(rbdVolume(V1), { hosts: 'mon-password-s3cret', keyring: '[client.cinder]\nkey = AQBs3cret' });
    expect(refusal(() => rbdVolumeDefinition(I, v, 0))).not.toMatch(/s3cret/);
  });

  test('a list: slots in order; more than the slots, a volume twice or a boot index twice is refused', () => {
    expect(volumeDefinitions(I, [rbdVolume(V1, { bootIndex: 0 }), rbdVolume(V2)]).map((d) => [d.slot, d.volumeId, d.bootIndex])).toEqual([
      [0, V1, 0],
      [1, V2, null],
    ]);
    expect(volumeDefinitions(I, [])).toEqual([]);
    const many = Array.from({ length: VOLUME_SLOTS + 1 }, (_, i) => rbdVolume(`0d1a4c4e-0000-4000-8000-00000000000${i}`));
    expect(refusal(() => volumeDefinitions(I, many))).toBe(`instance ${I}: volumes must be a list of at most ${VOLUME_SLOTS} volumes (got ${VOLUME_SLOTS + 1})`);
    expect(refusal(() => volumeDefinitions(I, [rbdVolume(V1), rbdVolume(V1)]))).toContain(`volume ${V1}: volume_id must be attached once`);
    expect(refusal(() => volumeDefinitions(I, [rbdVolume(V1, { bootIndex: 1 }), rbdVolume(V2, { bootIndex: 1 })]))).toContain(`volume ${V2}: boot_index must be unique (1 is given to two volumes)`);
  });

  test('the key files needed: one per secret uuid, none without cephx; named <uuid>.base64 in the directory', () => {
    const defs = volumeDefinitions(I, [rbdVolume(V1), rbdVolume(V2), rbdVolume('0d1a4c4e-3333-4333-8333-333333333333', { user: null })]);
    expect(neededSecrets(defs)).toEqual([SECRET]);
    expect(neededSecrets(undefined)).toEqual([]);
    expect(rbdSecretFile('/etc/compute-agent/secrets', SECRET)).toBe(`/etc/compute-agent/secrets/${SECRET}.base64`);
  });
});
