// Attachment deletes owed to Cinder (agent/compute/attachment-deletes.ts) against the in-memory
// Cinder: what is done, kept, dropped, and a deleted instance's delete_on_termination volume.
import { silentLogger } from '../../../../lib/logging/logger';
import { AttachmentDeletes } from '../../../../agent/compute/attachment-deletes';
import { CinderRefusedError } from '../../../../agent/volume/errors';
import type { RecordStore } from '../../../../agent/compute/ports';
import { FakeCinder, fakeCinderClients } from '../../../helpers/fake-cinder';

class MapStore implements RecordStore {
  readonly m = new Map<string, unknown>();
  put(kind: string, key: string, value: unknown): Promise<void> {
    this.m.set(`${kind}/${key}`, JSON.parse(JSON.stringify(value)));
    return Promise.resolve();
  }
  del(kind: string, key: string): Promise<void> {
    this.m.delete(`${kind}/${key}`);
    return Promise.resolve();
  }
  get<T>(kind: string, key: string): T | undefined {
    return this.m.get(`${kind}/${key}`) as T | undefined;
  }
  list<T>(kind: string): Array<[string, T]> {
    return [...this.m].filter(([k]) => k.startsWith(`${kind}/`)).map(([k, v]) => [k.slice(kind.length + 1), v as T]);
  }
}

function setup() {
  const cinder = new FakeCinder();
  const store = new MapStore();
  const tokens: Array<string | null> = [];
  const deletes = new AttachmentDeletes({ store, cinder: fakeCinderClients(cinder, tokens), log: silentLogger() });
  const vol = cinder.addVolume();
  const attachment = cinder.reserve(vol.id, 'vm-1').id;
  return { cinder, store, tokens, deletes, vol, attachment };
}

const NOW = '2026-11-28T12:00:00.000Z';

test('Cinder answers: deleted at once, nothing owed, with the agent’s own token', async () => {
  const { cinder, deletes, vol, attachment, tokens } = setup();
  expect(await deletes.remove(attachment, vol.id, 'vm-1', NOW)).toBe(true);
  expect(deletes.pending()).toEqual([]);
  expect(cinder.attachments.size).toBe(0);
  expect(tokens).toEqual([null]);
});

test('Cinder down: owed, kept through failed passes, done on the first pass after Cinder is back; an attachment already gone counts as done', async () => {
  const { cinder, deletes, vol, attachment } = setup();
  cinder.down = true;
  expect(await deletes.remove(attachment, vol.id, 'vm-1', NOW)).toBe(false);
  expect(deletes.items()).toEqual([[attachment, { attachment_id: attachment, volume_id: vol.id, instance: 'vm-1', since: NOW }]]);
  expect(await deletes.drainOnce()).toBe(1);
  cinder.down = false;
  cinder.attachments.delete(attachment); // an operator deleted it meanwhile
  expect(await deletes.drainOnce()).toBe(0);
  await deletes.stop();
});

test('refused for good (403): logged for an operator and dropped, not retried for ever', async () => {
  const { cinder, deletes, vol, attachment } = setup();
  cinder.deleteAttachment = () => Promise.reject(new CinderRefusedError(`DELETE /v3/attachments/${attachment}`, 403, ': policy does not allow'));
  expect(await deletes.remove(attachment, vol.id, 'vm-1', NOW)).toBe(true);
  expect(deletes.pending()).toEqual([]);
  expect(cinder.attachments.has(attachment)).toBe(true);
  await deletes.stop();
});

test('a delete_on_termination volume: deleted after its attachment, once Cinder shows it available', async () => {
  const { cinder, deletes, vol, attachment } = setup();
  cinder.down = true;
  await deletes.remove(attachment, vol.id, 'vm-1', NOW);
  await deletes.thenDeleteVolume(attachment);
  cinder.down = false;
  // Cinder shows the volume `detaching` for a moment after its last attachment went.
  const realDelete = cinder.deleteAttachment.bind(cinder);
  cinder.deleteAttachment = async (id) => {
    const out = await realDelete(id);
    const v = cinder.volumes.get(vol.id);
    if (v && out) v.status = 'detaching';
    return out;
  };
  expect(await deletes.drainOnce()).toBe(1);
  expect(cinder.volumes.has(vol.id)).toBe(true);
  const v = cinder.volumes.get(vol.id);
  if (v) v.status = 'available';
  expect(await deletes.drainOnce()).toBe(0);
  expect(cinder.volumes.has(vol.id)).toBe(false);
  await deletes.stop();
});
