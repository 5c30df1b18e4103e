// The Glance client's writes (a snapshot's): the JSON-patch PATCH, the streamed PUT of the data
// (tried once: a stream cannot be replayed), DELETE (gone already is fine), and the image list a
// backup rotation reads; against nock.
import nock from 'nock';
import { Readable } from 'node:stream';
import type { Clock } from '../../../../lib/clock';
import { StaticGlanceAuth } from '../../../../virt-drivers/glance/api';
import { GlanceResponseError, GlanceUnavailableError } from '../../../../virt-drivers/glance/errors';
import { GlanceHttpClient } from '../../../../virt-drivers/glance/http';

const URL_ = 'http://glance.test:9292';
const ID = '11111111-2222-3333-4444-555555555555';
const noSleep: Clock = { now: () => 0, sleep: () => Promise.resolve() };
const client = (): GlanceHttpClient => new GlanceHttpClient({ auth: new StaticGlanceAuth(URL_), numRetries: 2, timeoutMs: 2000, clock: noSleep });

afterEach(() => nock.cleanAll());

test('PATCH sends the ops as an images-v2.1 JSON patch', async () => {
  let body: unknown;
  let type: string | undefined;
  nock(URL_)
    .patch(`/v2/images/${ID}`)
    .reply(function (_uri, b) {
      body = typeof b === 'string' ? (JSON.parse(b) as unknown) : b;
      type = String(this.req.headers['content-type']);
      return [200, {}];
    });
  await client().updateImage(ID, [{ op: 'replace', path: '/disk_format', value: 'qcow2' }]);
  expect(type).toBe('application/openstack-images-v2.1-json-patch');
  expect(body).toEqual([{ op: 'replace', path: '/disk_format', value: 'qcow2' }]);
});

test('PUT streams the data with its length; a 5xx is not retried (the stream is spent)', async () => {
  let got = '';
  nock(URL_)
    .put(`/v2/images/${ID}/file`)
    .matchHeader('content-length', '11')
    .reply(204, (_uri, b) => {
      got = typeof b === 'string' ? b : JSON.stringify(b);
      return '';
    });
  await client().uploadImageData(ID, Readable.from([Buffer.from('hello '), Buffer.from('world')]), 11);
  expect(got).toBe('hello world');
  const scope = nock(URL_).put(`/v2/images/${ID}/file`).reply(503, 'busy');
  await expect(client().uploadImageData(ID, Readable.from([Buffer.from('x')]), 1)).rejects.toThrow(GlanceUnavailableError);
  expect(scope.isDone()).toBe(true);
});

test('DELETE: gone already is fine; a refusal names the status', async () => {
  nock(URL_).delete(`/v2/images/${ID}`).reply(404);
  await client().deleteImage(ID);
  nock(URL_).delete(`/v2/images/${ID}`).reply(403, 'not yours');
  await expect(client().deleteImage(ID)).rejects.toThrow(/403/);
});

test('the list carries the filters and gives id, status and creation time; an answer that does not fit is refused', async () => {
  nock(URL_)
    .get('/v2/images')
    .query({ limit: '1000', instance_uuid: 'i-1', image_type: 'backup' })
    .reply(200, { images: [{ id: 'b2', status: 'active', created_at: '2026-11-28T00:00:00Z', name: 'x' }] });
  expect(await client().listImages({ instance_uuid: 'i-1', image_type: 'backup' })).toEqual([{ id: 'b2', status: 'active', createdAt: '2026-11-28T00:00:00Z' }]);
  nock(URL_).get('/v2/images').query(true).reply(200, { images: [{ id: 'b2' }] });
  await expect(client().listImages({})).rejects.toThrow(GlanceResponseError);
});
