/** Loading configuration in tests: from environment variables only, and the problems a refusal names. */
import { ConfigError, loadConfig } from '../../config/loader';

/** The configuration that `COMPUTE_AGENT__SECTION__OPTION` variables alone give (no file). */
export function configFromEnv(env: Record<string, string>): ReturnType<typeof loadConfig>['config'] {
  return loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' }).config;
}

/** The messages of the ConfigError `fn` throws; fails when it throws none, or something else. */
export function configProblems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigError) return e.problems.map((p) => p.message);
    throw e;
  }
  throw new Error('expected a ConfigError');
}
