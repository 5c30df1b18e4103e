// Two projects: unit tests (fast, no servers) and integration tests (real Placement and RabbitMQ,
// started by test/integration/global-setup.ts when they are not already running).
const common = {
  // jest 29, not 30: jest 30 resolves modules through unrs-resolver, whose platform packages the
  // npm mirror here lacks, which makes `npm ci` refuse the lock file on a clean checkout.
  preset: 'ts-jest',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  moduleFileExtensions: ['ts', 'js', 'json'],
};

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    {
      ...common,
      displayName: 'unit',
      // test/drivers: the virt-driver conformance suite (no servers needed).
      testMatch: ['<rootDir>/test/unit/**/*.test.ts', '<rootDir>/test/drivers/**/*.test.ts'],
      setupFilesAfterEnv: ['<rootDir>/test/unit/timeout.ts'],
    },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/integration/global-setup.ts',
      // The cloud of scripts/cloud, when a test file brought it up, is taken down once, after every
      // file that shares it (test/helpers/cloud.ts).
      globalTeardown: '<rootDir>/test/integration/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/test/integration/timeout.ts'],
    },
  ],
};
