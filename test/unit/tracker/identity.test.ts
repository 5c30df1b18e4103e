import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ComputeIdError, loadOrCreateComputeId } from '../../../tracker/identity';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const dir = (): string => mkdtempSync(join(tmpdir(), 'computeid-'));

describe('loadOrCreateComputeId', () => {
  test('creates the state directory and the file once, then reads it back', async () => {
    const state = join(dir(), 'nested', 'state');
    const id = await loadOrCreateComputeId(state);
    expect(id).toMatch(UUID);
    expect(readFileSync(join(state, 'compute_id'), 'utf8')).toBe(`${id}\n`);
    expect(statSync(join(state, 'compute_id')).mode & 0o777).toBe(0o644);
    expect(await loadOrCreateComputeId(state)).toBe(id);
  });

  test("reads nova's file (a uuid, any case, surrounding whitespace)", async () => {
    const state = dir();
    writeFileSync(join(state, 'compute_id'), '  7A1D3C9E-52B4-4E55-9B5D-2F0C1A6B7E88\n\n');
    expect(await loadOrCreateComputeId(state)).toBe('7a1d3c9e-52b4-4e55-9b5d-2f0c1a6b7e88');
  });

  test('a malformed file is an error and is never replaced', async () => {
    const state = dir();
    writeFileSync(join(state, 'compute_id'), 'not-a-uuid\n');
    await expect(loadOrCreateComputeId(state)).rejects.toThrow(ComputeIdError);
    await expect(loadOrCreateComputeId(state)).rejects.toThrow(/does not hold a uuid .*a new uuid makes a new compute node/);
    expect(readFileSync(join(state, 'compute_id'), 'utf8')).toBe('not-a-uuid\n');
  });

  test('concurrent first starts agree on one uuid and leave no temporary files', async () => {
    const state = dir();
    const ids = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateComputeId(state)));
    expect(new Set(ids).size).toBe(1);
    expect(readFileSync(join(state, 'compute_id'), 'utf8').trim()).toBe(ids[0]);
    expect(readdirSync(state)).toEqual(['compute_id']);
  });

  test('a state path that cannot be created is a ComputeIdError naming the file', async () => {
    const file = join(dir(), 'a-file');
    writeFileSync(file, '');
    await expect(loadOrCreateComputeId(join(file, 'state'))).rejects.toThrow(`${join(file, 'state', 'compute_id')}: cannot be created (ENOTDIR)`);
  });
});
