import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { unitNodeOptions } from '../../../bench/footprint';

describe('unitNodeOptions', () => {
  it('reads the NODE_OPTIONS the unit sets, with or without quotes', () => {
    expect(unitNodeOptions('[Service]\nEnvironment=NODE_OPTIONS=--max-semi-space-size=1\nExecStart=x\n')).toBe('--max-semi-space-size=1');
    expect(unitNodeOptions('Environment=NODE_OPTIONS="--a --b"\n')).toBe('--a --b');
    expect(unitNodeOptions('[Service]\nExecStart=x\n')).toBe('');
  });

  it('the shipped unit sets options this Node accepts (a bad one would stop the service from starting)', () => {
    const unit = readFileSync(join(__dirname, '..', '..', '..', 'systemd', 'compute-agent.service'), 'utf8');
    const options = unitNodeOptions(unit);
    expect(options).not.toBe('');
    const r = spawnSync(process.execPath, ['-e', 'process.exit(0)'], { env: { ...process.env, NODE_OPTIONS: options }, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
