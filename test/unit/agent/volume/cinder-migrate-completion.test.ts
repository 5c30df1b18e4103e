// os-migrate_volume_completion over the real HTTP transport, against nock: the route, body and
// microversion Cinder 2025.1 takes, the `save_volume_id` it answers, and a volume's
// `migration_status` read back (swap_volume asks Cinder only for a Cinder-initiated migration).
import nock from 'nock';
import type { Clock } from '../../../../lib/clock';
import type { AuthProvider } from '../../../../tracker/placement/auth';
import { NodeHttpTransport } from '../../../../tracker/placement/transport';
import { CinderHttpClient } from '../../../../agent/volume/cinder-http';
import { CinderError, CinderNotFoundError, CinderResponseError } from '../../../../agent/volume/errors';

const BASE = 'http://cinder.test:8776/v3';
const OLD = 'c32ef674-18c0-4ae6-bda5-edbec2b76876';
const NEW = '5a7a8837-7346-47aa-aefc-825ad9627268';

const auth: AuthProvider = { token: () => Promise.resolve('user-1'), endpoint: () => Promise.resolve(BASE), invalidate: () => undefined };
const clock: Clock = { now: () => 0, sleep: () => Promise.resolve() };
const client = (): CinderHttpClient => new CinderHttpClient({ auth, transport: new NodeHttpTransport({ timeoutMs: 5000 }), retries: 0, clock });

afterEach(() => nock.cleanAll());

describe('os-migrate_volume_completion', () => {
  test('POSTs the action on the old volume with the new one and the error flag; answers save_volume_id', async () => {
    const bodies: unknown[] = [];
    nock(BASE, { reqheaders: { 'openstack-api-version': 'volume 3.54', 'x-auth-token': 'user-1' } })
      .post(`/volumes/${OLD}/action`, (b: unknown) => (bodies.push(b), true))
      .reply(200, { save_volume_id: OLD })
      .post(`/volumes/${OLD}/action`, (b: unknown) => (bodies.push(b), true))
      .reply(200, { save_volume_id: OLD });
    await expect(client().migrateVolumeCompletion(OLD, NEW, false)).resolves.toBe(OLD);
    await expect(client().migrateVolumeCompletion(OLD, NEW, true)).resolves.toBe(OLD);
    expect(bodies).toEqual([{ 'os-migrate_volume_completion': { new_volume: NEW, error: false } }, { 'os-migrate_volume_completion': { new_volume: NEW, error: true } }]);
    expect(nock.isDone()).toBe(true);
  });

  test('an unknown volume is CinderNotFoundError; an answer without save_volume_id is CinderResponseError; a bad id is never sent', async () => {
    nock(BASE).post(`/volumes/${OLD}/action`).reply(404, { itemNotFound: { message: 'Volume could not be found.', code: 404 } });
    await expect(client().migrateVolumeCompletion(OLD, NEW, false)).rejects.toBeInstanceOf(CinderNotFoundError);
    nock(BASE).post(`/volumes/${OLD}/action`).reply(200, {});
    await expect(client().migrateVolumeCompletion(OLD, NEW, false)).rejects.toBeInstanceOf(CinderResponseError);
    await expect(client().migrateVolumeCompletion(OLD, '../x', false)).rejects.toBeInstanceOf(CinderError);
  });

  test('a volume’s migration_status is read (absent when Cinder sends none)', async () => {
    nock(BASE).get(`/volumes/${OLD}`).reply(200, { volume: { id: OLD, status: 'in-use', size: 1, migration_status: 'migrating' } });
    nock(BASE).get(`/volumes/${NEW}`).reply(200, { volume: { id: NEW, status: 'available', size: 2 } });
    expect((await client().getVolume(OLD)).migration_status).toBe('migrating');
    expect((await client().getVolume(NEW)).migration_status ?? null).toBeNull();
  });
});
