import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CheckpointCorruptError } from '../../../../lib/checkpoint';
import { instanceDirs, readRecord, scanInstanceDirs, writeRecord } from '../../../../virt-drivers/qemu/instance-files';
import { RECORD } from './record-fixture';

const U1 = RECORD.uuid;
const U2 = '22222222-2222-4222-8222-222222222222';


describe('instance files', () => {
  test('the record round-trips through a checksummed checkpoint; absent is undefined, tampered is corrupt', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qemu-rec-'));
    expect(await readRecord(dir)).toBeUndefined();
    await writeRecord(dir, RECORD);
    expect(await readRecord(dir)).toEqual(RECORD);
    writeFileSync(join(dir, 'instance.json'), '{"kind":"compute-agent/qemu-instance","version":1,"checksum":0,"data":{}}');
    await expect(readRecord(dir)).rejects.toThrow(CheckpointCorruptError);
  });

  test('scan: instances, cold-migration source copies and half-fetched migrations; anything else ignored', async () => {
    const root = mkdtempSync(join(tmpdir(), 'qemu-scan-'));
    expect(await scanInstanceDirs(join(root, 'absent'))).toEqual([]);
    const d1 = instanceDirs(root, U1);
    const d2 = instanceDirs(root, U2);
    for (const d of [d1.active, d1.resized, d2.staging, join(root, 'locks'), join(root, `${U2}.bak`), join(root, '_base')]) mkdirSync(d);
    writeFileSync(join(root, U2), 'a file, not a directory');
    expect(await scanInstanceDirs(root)).toEqual([
      { uuid: U2, dir: d2.staging, kind: 'staging' },
      { uuid: U1, dir: d1.active, kind: 'active' },
      { uuid: U1, dir: d1.resized, kind: 'resized' },
    ]);
  });
});
