// The Cinder client over the real HTTP transport, against nock: the routes, microversion and
// tokens it sends (the user's, and nova's service token that Cinder requires to delete an in-use
// attachment), the bodies as Cinder 2025.1 answers them (the connection info from
// test/helpers/cinder-rbd-connection-info.ts), which failures it retries (and which not), and how
// each status is classified.
import nock from 'nock';
import type { Clock } from '../../../../lib/clock';
import type { AuthProvider } from '../../../../tracker/placement/auth';
import { NodeHttpTransport } from '../../../../tracker/placement/transport';
import { CinderHttpClient, cinderRoute } from '../../../../agent/volume/cinder-http';
import { cinderRbdConnectionInfo } from '../../../helpers/cinder-rbd-connection-info';
import { CinderAuthError, CinderConflictError, CinderError, CinderNotFoundError, CinderRefusedError, CinderResponseError, CinderUnavailableError } from '../../../../agent/volume/errors';

const BASE = 'http://cinder.test:8776/v3';
const VOL = 'c32ef674-18c0-4ae6-bda5-edbec2b76876';
const ATT = '5a7a8837-7346-47aa-aefc-825ad9627268';
const VM = '70e8113b-d0c1-4a1d-bab4-014a9d4b444a';
const CONNECTOR = { platform: 'x86_64', os_type: 'linux', ip: '127.0.0.1', host: 'compute-a', multipath: false, enforce_multipath: true, do_local_attach: false };

/** A token source that says which one it is and counts invalidations. */
class Auth implements AuthProvider {
  invalidations = 0;
  constructor(private readonly name: string) {}
  token(): Promise<string> {
    return Promise.resolve(`${this.name}-${this.invalidations + 1}`);
  }
  endpoint(): Promise<string> {
    return Promise.resolve(BASE);
  }
  invalidate(): void {
    this.invalidations++;
  }
}

/** Sleeps pass at once. */
const clock: Clock = { now: () => 0, sleep: () => Promise.resolve() };

function client(o: { service?: boolean; retries?: number } = {}): { c: CinderHttpClient; user: Auth; answers: string[] } {
  const user = new Auth('user');
  const answers: string[] = [];
  const c = new CinderHttpClient({
    auth: user,
    ...(o.service === false ? {} : { serviceAuth: new Auth('service') }),
    transport: new NodeHttpTransport({ timeoutMs: 5000 }),
    retries: o.retries ?? 2,
    clock,
    onAnswer: (m, r, s) => answers.push(`${m} ${r} ${String(s)}`),
  });
  return { c, user, answers };
}

/** Cinder 2025.1's attachment answer with the RBD back end (the shared connection info fixture). */
const rbdAttachment = {
  attachment: {
    id: ATT,
    status: 'reserved',
    instance: VM,
    volume_id: VOL,
    attached_at: '',
    detached_at: '',
    attach_mode: 'rw',
    connection_info: cinderRbdConnectionInfo(VOL, { attachmentId: ATT }),
  },
};

afterEach(() => nock.cleanAll());

describe('CinderHttpClient: what it sends', () => {
  test('an attachment with a connector: POST /attachments at 3.54 with both tokens; the RBD connection info comes back flat', async () => {
    const { c } = client();
    nock(BASE, { reqheaders: { 'x-auth-token': 'user-1', 'x-service-token': 'service-1', 'openstack-api-version': 'volume 3.54' } })
      .post('/attachments', { attachment: { volume_uuid: VOL, instance_uuid: VM, connector: CONNECTOR, mode: 'rw' } })
      .reply(200, rbdAttachment);
    const a = await c.createAttachment(VOL, VM, CONNECTOR, 'rw');
    expect(a).toMatchObject({ id: ATT, status: 'reserved', volume_id: VOL, instance: VM, attach_mode: 'rw' });
    // Handed on whole and flat: the compute manager nests it as nova does, not the client.
    expect(a.connection_info).toEqual(cinderRbdConnectionInfo(VOL, { attachmentId: ATT }));
    expect(a.connection_info).toMatchObject({ driver_volume_type: 'rbd', name: `volumes/volume-${VOL}`, auth_username: 'cinder' });
  });

  test('reserve (no connector), update with the connector, complete, delete: the routes and bodies nova sends', async () => {
    const { c } = client();
    const reserved = { attachment: { ...rbdAttachment.attachment, connection_info: null } };
    nock(BASE)
      .post('/attachments', { attachment: { volume_uuid: VOL, instance_uuid: VM, connector: null, mode: 'ro' } })
      .reply(200, reserved)
      .put(`/attachments/${ATT}`, { attachment: { connector: CONNECTOR } })
      .reply(200, { attachment: { ...rbdAttachment.attachment, status: 'attaching' } })
      .post(`/attachments/${ATT}/action`, { 'os-complete': null })
      .reply(204)
      .delete(`/attachments/${ATT}`)
      .reply(200, {});
    expect((await c.createAttachment(VOL, VM, null, 'ro')).connection_info).toEqual({});
    expect((await c.updateAttachment(ATT, CONNECTOR)).status).toBe('attaching');
    await c.completeAttachment(ATT);
    expect(await c.deleteAttachment(ATT)).toBe(true);
  });

  test('without a service user no X-Service-Token goes', async () => {
    const { c } = client({ service: false });
    nock(BASE, { badheaders: ['x-service-token'] })
      .get(`/volumes/${VOL}`)
      .reply(200, { volume: { id: VOL, status: 'available', size: 1, multiattach: false, bootable: 'false' } });
    expect(await c.getVolume(VOL)).toEqual({ id: VOL, status: 'available', size: 1, multiattach: false, bootable: false });
  });

  test("a volume snapshot's status, as Cinder 2025.1 shows one (fields beyond id and status dropped); a missing one is not found", async () => {
    const { c } = client();
    const SNAP = '0c1e5b5a-3f0e-4b7e-9a0f-2d3c4b5a6978';
    nock(BASE)
      .get(`/snapshots/${SNAP}`)
      .reply(200, { snapshot: { id: SNAP, status: 'creating', size: 1, volume_id: VOL, name: 'snapshot for vm', metadata: {}, created_at: '2026-11-29T09:20:00.000000' } })
      .get('/snapshots/gone')
      .reply(404, { itemNotFound: { code: 404, message: 'Snapshot gone could not be found.' } });
    expect(await c.getSnapshot(SNAP)).toEqual({ id: SNAP, status: 'creating' });
    await expect(c.getSnapshot('gone')).rejects.toBeInstanceOf(CinderNotFoundError);
  });

  test('an id that could change the route, and a size that is no volume, are refused before anything is sent', async () => {
    const { c } = client();
    await expect(c.getVolume('../attachments')).rejects.toBeInstanceOf(CinderError);
    await expect(c.createVolume({ size: 0 })).rejects.toThrow(/whole number of GiB, 1 or more, not 0/);
    expect(cinderRoute(`/attachments/${ATT}/action`)).toBe('/attachments/{id}/action');
  });
});

describe('CinderHttpClient: failures', () => {
  test('404, 409 and other refusals are classified with Cinder’s words; deletes of what is gone resolve false', async () => {
    const { c } = client();
    nock(BASE)
      .get(`/volumes/${VOL}`)
      .reply(404, { itemNotFound: { code: 404, message: `Volume ${VOL} could not be found.` } })
      .delete(`/attachments/${ATT}`)
      .reply(404, { itemNotFound: { code: 404, message: 'gone' } })
      .delete(`/volumes/${VOL}`)
      .reply(400, { badRequest: { code: 400, message: 'Invalid volume: Volume status must be available or error' } })
      .post('/attachments')
      .reply(409, { conflictingRequest: { code: 409, message: 'volume in use' } });
    const err = await c.getVolume(VOL).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CinderNotFoundError);
    expect((err as Error).message).toBe(`GET /volumes/${VOL}: not found in Cinder (404): itemNotFound: Volume ${VOL} could not be found.`);
    expect(await c.deleteAttachment(ATT)).toBe(false);
    await expect(c.deleteVolume(VOL)).rejects.toBeInstanceOf(CinderRefusedError);
    await expect(c.createAttachment(VOL, VM, CONNECTOR, 'rw')).rejects.toBeInstanceOf(CinderConflictError);
  });

  test('a 5xx is retried for a GET, not for the POST that would make a second volume; a 401 once with a fresh token', async () => {
    const { c, user, answers } = client({ retries: 2 });
    nock(BASE)
      .get(`/volumes/${VOL}`)
      .reply(503, 'busy')
      .get(`/volumes/${VOL}`)
      .reply(200, { volume: { id: VOL, status: 'in-use', size: 2 } })
      .post('/volumes')
      .reply(500, { computeFault: { message: 'boom' } });
    expect((await c.getVolume(VOL)).status).toBe('in-use');
    await expect(c.createVolume({ size: 1 })).rejects.toBeInstanceOf(CinderUnavailableError);
    expect(answers).toEqual([`GET /volumes/{id} 503`, `GET /volumes/{id} 200`, 'POST /volumes 500']);

    nock(BASE, { reqheaders: { 'x-auth-token': 'user-1' } }).get(`/attachments/${ATT}`).reply(401, {});
    nock(BASE, { reqheaders: { 'x-auth-token': 'user-2' } }).get(`/attachments/${ATT}`).reply(401, {});
    await expect(c.getAttachment(ATT)).rejects.toBeInstanceOf(CinderAuthError);
    expect(user.invalidations).toBe(1);
  });

  test('a 2xx without the fields the agent reads is a CinderResponseError naming the field', async () => {
    const { c } = client();
    nock(BASE).get(`/attachments/${ATT}`).reply(200, { attachment: { id: ATT, status: 'attached' } });
    await expect(c.getAttachment(ATT)).rejects.toThrow(CinderResponseError);
    nock(BASE).get(`/attachments/${ATT}`).reply(200, { attachment: { id: ATT, status: 'attached' } });
    await expect(c.getAttachment(ATT)).rejects.toThrow(/attachment\.volume_id/);
  });
});
