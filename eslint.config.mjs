// ESLint for the TypeScript sources, run by the lint step of `npm test` (`npm run lint`).
//
// Type-aware (typescript-eslint with the TypeScript project service), so it sees what the compiler
// sees: a promise nobody awaits or catches, a promise passed where a callback's result is ignored,
// and `any` flowing into typed code. The product is held to all of it; tests may poke at values
// they parsed themselves (the no-unsafe-* family is off there) but keep the promise rules, since
// an unawaited assertion is a test that cannot fail.
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/', 'coverage/', '.stack/', '.test-results/', 'test/fixtures/'] },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Named explicitly: these are what the lint step is for, whatever the preset does next.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unsafe-argument': 'error',
      '@typescript-eslint/no-unsafe-assignment': 'error',
      '@typescript-eslint/no-unsafe-call': 'error',
      '@typescript-eslint/no-unsafe-member-access': 'error',
      '@typescript-eslint/no-unsafe-return': 'error',
      // An `async` function that implements a Promise-returning contract without awaiting is
      // deliberate: a throw inside it still reaches the caller as a rejection.
      '@typescript-eslint/require-await': 'off',
      // A variable a closure reads before its one assignment (a callback registered while the
      // object it reports to is still being built) cannot be a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Passing on a rejection reason received from elsewhere (an AbortSignal's) is not
      // inventing a non-Error one; the same allowance the preset gives only-throw-error.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      // A parameter a contract requires but this implementation does not use is named `_x`.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
);
