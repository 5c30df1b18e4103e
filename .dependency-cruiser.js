// The layer and cycle rules, checked by dependency-cruiser in the lint step of `npm test`
// (`npm run lint`). Paths are relative to the repository root.
//
// Floors, each importing only from the ones below it:
//   agent/  ->  tracker/ | virt-drivers/ (side by side)  ->  config/  ->  model/  ->  lib/
// Inside agent/rpc the transport (amqp/) knows neither the wire format (oslo/) nor the server
// and client (endpoint/), the wire format does not know the endpoint, and nothing in rpc/ knows
// the compute flows or the nova control plane that use it.
//
// Type-only imports count: a floor that needs a type from above is as tangled as one that calls
// into it. Each rule's name is what a failure prints, followed by the importing and the imported
// file.
'use strict';

/** The folders of the product: what ships (bench is a product tool, built with it). */
const PRODUCT = '^(lib|model|config|tracker|virt-drivers|agent|bench)/';

/**
 * A rule that lets files under `floor` import only from `allowed` folders (and packages and
 * node's own modules). Stated as "only" rather than as a list of forbidden folders, so a new
 * top-level folder is refused until a rule admits it.
 */
function floor(name, floorPath, allowed, comment) {
  return {
    name,
    comment,
    severity: 'error',
    from: { path: `^${floorPath}/` },
    to: {
      // node_modules anywhere in the path: a linked node_modules resolves to where it really is.
      pathNot: ['(^|/)node_modules/', `^(${allowed.join('|')})/`],
      dependencyTypesNot: ['core'],
      couldNotResolve: false,
    },
  };
}

/** A rule that forbids files under `fromPath` to import files matching `toPath`. */
function forbid(name, fromPath, toPath, comment) {
  return { name, comment, severity: 'error', from: { path: fromPath }, to: { path: toPath } };
}

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    floor('lib-imports-no-project-folder', 'lib', ['lib'],
      'lib/ is the ground floor: clock, backoff, checkpoint, files, crc, logging. It imports no other project folder.'),
    floor('model-imports-only-lib', 'model', ['model', 'lib'],
      'model/ (provider tree, instance model) builds on lib/ only.'),
    floor('config-imports-only-lib-and-model', 'config', ['config', 'model', 'lib'],
      'config/ builds on lib/ and model/ only.'),
    floor('tracker-imports-only-config-model-lib', 'tracker', ['tracker', 'config', 'model', 'lib'],
      'tracker/ builds on config/, model/ and lib/; never on virt-drivers/ (side by side) or agent/ (above).'),
    floor('virt-drivers-import-only-config-model-lib', 'virt-drivers', ['virt-drivers', 'config', 'model', 'lib'],
      'virt-drivers/ builds on config/, model/ and lib/; never on tracker/ (side by side) or agent/ (above).'),
    forbid('product-imports-no-test', PRODUCT, '^test/',
      'Test doubles and helpers live in test/; the product never imports them.'),
    forbid('rpc-amqp-imports-no-oslo-or-endpoint', '^agent/rpc/amqp/', '^agent/rpc/(oslo|endpoint)/',
      'The AMQP transport carries bytes; it knows neither the oslo wire format nor the RPC server and client.'),
    forbid('rpc-oslo-imports-no-endpoint', '^agent/rpc/oslo/', '^agent/rpc/endpoint/',
      'The oslo wire format encodes and decodes messages; the server and client build on it, not the reverse.'),
    forbid('rpc-imports-no-compute-or-nova', '^agent/rpc/', '^agent/(compute|nova)/',
      'agent/rpc is the RPC machinery; compute methods and the nova control plane use it, it does not know them.'),
    {
      name: 'integration-tests-reach-no-nock',
      comment:
        'nock patches node:http for the whole process once loaded, and jest runs the integration files in one ' +
        'process: a file that reaches it sends every later real request through its interceptor (which cut ' +
        "streamed Glance downloads short). Integration tests talk to real servers only; nock is for unit tests.",
      severity: 'error',
      from: { path: '^test/integration/' },
      to: { path: '(^|/)node_modules/nock/', reachable: true },
    },
    {
      name: 'no-circular',
      comment: 'No import cycles between files, product and tests alike.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    // Everything but what is generated or data; a new top-level folder is cruised too. Installed
    // packages are leaves (doNotFollow), there so that a rule can name one.
    exclude: { path: '^(dist|coverage|\\.stack|\\.test-results|test/fixtures)/' },
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
