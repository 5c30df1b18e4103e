// Each unit test's limit: a guard against a hang, not a speed goal (those are in bench/). Tests
// that run in under a second took over 5 s, jest's default, on a fresh 2-core machine installing
// the stack's packages and building guest images beside them. A test that sets its own keeps it.
jest.setTimeout(30_000);
