import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { unitNode, unitNodeArgs, unitNodeOptions } from '../../../bench/footprint';

describe('unitNodeOptions', () => {
  it('reads the NODE_OPTIONS the unit sets, with or without quotes', () => {
    expect(unitNodeOptions('[Service]\nEnvironment=NODE_OPTIONS=--max-semi-space-size=1\nExecStart=x\n')).toBe('--max-semi-space-size=1');
    expect(unitNodeOptions('Environment=NODE_OPTIONS="--a --b"\n')).toBe('--a --b');
    expect(unitNodeOptions('Environment="NODE_OPTIONS=--a --b"\n')).toBe('--a --b');
    expect(unitNodeOptions('[Service]\nExecStart=x\n')).toBe('');
  });

  it("reads the flags ExecStart gives node before the script", () => {
    expect(unitNodeArgs('ExecStart=/usr/bin/env node --a --b=1 /opt/x/main.js run --config-file f\n')).toEqual(['--a', '--b=1']);
    expect(unitNodeArgs('ExecStart=/usr/bin/node /opt/x/main.js run\n')).toEqual([]);
    expect(unitNodeArgs('ExecStart=/usr/local/bin/compute-agent run --config-file f\n')).toEqual([]);
  });

  it('the shipped unit runs node with flags this Node accepts silently (a bad one would stop the service from starting)', () => {
    const unit = unitNode(readFileSync(join(__dirname, '..', '..', '..', 'systemd', 'compute-agent.service'), 'utf8'));
    expect(unit.args.length + unit.options.length).toBeGreaterThan(0);
    const r = spawnSync(process.execPath, [...unit.args, '-e', 'process.exit(0)'], { env: { ...process.env, NODE_OPTIONS: unit.options }, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
