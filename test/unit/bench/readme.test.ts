import { README_BEGIN, README_END, withBenchTable } from '../../../bench/readme';

describe('withBenchTable', () => {
  const readme = `# x\n\n## Performance\n\nprose\n\n${README_BEGIN}\nold table\n${README_END}\n\nafter\n`;

  it('replaces only what lies between the markers', () => {
    const out = withBenchTable(readme, '| new |\n');
    expect(out).toBe(`# x\n\n## Performance\n\nprose\n\n${README_BEGIN}\n| new |\n${README_END}\n\nafter\n`);
    expect(withBenchTable(out, 'third')).toContain(`${README_BEGIN}\nthird\n${README_END}`);
  });

  it('refuses a README without the block instead of appending somewhere', () => {
    expect(() => withBenchTable('# x\n', 't')).toThrow(/bench:begin/);
    expect(() => withBenchTable(`${README_END}\n${README_BEGIN}\n`, 't')).toThrow(/no/);
  });
});
