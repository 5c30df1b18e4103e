import { join, resolve } from 'node:path';
import { checkFile, checkTree, commentLines, headingAnchor } from './comment-rules';

const ROOT = resolve(__dirname, '../../..');

/** The problems found in one comment, as if written in `file` (relative to the repository root). */
const problemsIn = (comment: string, file = 'agent/compute/manager.ts'): string[] =>
  checkFile(ROOT, join(ROOT, file), `/**\n * ${comment}\n */\nexport const x = 1;\n`).map((f) => f.problem);

describe('source comments', () => {
  it('cite only what is in the repository and never speak of history', () => {
    const findings = checkTree(ROOT);
    const report = findings.map((f) => `${f.where}: ${f.problem}\n    ${f.text}`).join('\n');
    expect(report).toBe('');
  });
});

describe('comment rules', () => {
  it('find comments, not strings, regular expressions or template text that look like them', () => {
    const source = [
      "const a = '// not a comment';",
      'const b = /\\/\\/ not a comment either/;',
      'const c = `${a} /* nor this */ ${b}`;',
      '// one line',
      '/* a block',
      '   over two lines */',
    ].join('\n');
    expect(commentLines('x.ts', source)).toEqual([
      { line: 4, text: '// one line' },
      { line: 5, text: '/* a block' },
      { line: 6, text: '   over two lines */' },
    ]);
  });

  it.each([
    ['`../shared/reference/qemu.md` §8'],
    ['see rpc-protocol.md section 4'],
    ['as nova settled them (placement-and-nova.md section 3)'],
    ['in the order nova-compute does it (nova-control-plane.md section 3)'],
    ['anchors measured with nova (`../shared/reference/anchors.md` A)'],
    ['(openstack-2025.md)'],
    ['`docs/oslo-wire.md` section 2'],
  ])('refuse a citation outside the repository or by section number: %s', (comment) => {
    expect(problemsIn(comment)).not.toEqual([]);
  });

  it.each([
    ['checks the state machine (`states.ts`)'],
    ['the clock (`agent/util/clock.ts`)'],
    ['the tree model (`tracker/tree/provider-tree.ts`)'],
    ['a fake for tests (`rpc/fake-broker.ts`)'],
    ['the small tools (`agent/util/`)'],
    ['the reply rules (`docs/oslo-wire.md#no-such-heading`)'],
    ['the wire notes (`docs/no-such-note.md`)'],
  ])('refuse a repository path or anchor that does not exist: %s', (comment) => {
    expect(problemsIn(comment)).not.toEqual([]);
  });

  it.each([
    ['`get_host_uptime` as far as it is served today'],
    ['The compute manager issue adds its methods to the same dispatcher'],
    ['The tracker issue adds the Placement writes; later issues add lifecycle steps.'],
    ['Fleet simulation (issue 9, item 6)'],
    ['Issue 7 end to end: two agents'],
    ['Goals from the issue: a pass under 300 ms'],
    ['each step is an oslo versioned notification, exactly as the agent always sent them'],
    ['each step is an oslo versioned notification, exactly as\n * the agent always sent them'],
    ['the agent used to send them twice'],
  ])('refuse history: %s', (comment) => {
    expect(problemsIn(comment)).not.toEqual([]);
  });

  it.each([
    ['nova `compute/manager.py` and oslo `_drivers/amqpdriver.py` say so', ''],
    ['the reply rules (`docs/oslo-wire.md#replies`), the tree (`model/provider-tree.ts`)', ''],
    ['the test doubles (`test/helpers/fake-broker.ts`), every probe (`host/*.ts`)', 'virt-drivers/host/facts.ts'],
    ['the two kinds of errors (`../errors.ts` and `errors.ts`)', 'virt-drivers/qemu/driver.ts'],
    ['run `node scripts/ts-run.js path/to/file.ts`; the build writes `dist/bench/rpc.js`', ''],
    ['Used to build a tree from Placement records; the periodic issues one GET per provider.', ''],
    ['the allocations now held by the migration uuid; a driver that no longer reports it; from now on', ''],
    ['the README (`README.md#architecture`) and the notes (`docs/placement.md`)', ''],
    ['the claim service (`tracker/claims/`), the state (`state_path/journal/`), `/sys/class/net/`', ''],
  ])('accept what is in the repository, upstream names and plain present tense: %s', (comment, file) => {
    expect(problemsIn(comment, file || undefined)).toEqual([]);
  });

  it('derive heading anchors as GitHub does', () => {
    expect(headingAnchor('Allocations for moves')).toBe('allocations-for-moves');
    expect(headingAnchor('oslo RPC (`agent/rpc/`)')).toBe('oslo-rpc-agentrpc');
  });
});
