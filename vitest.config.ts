import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 2,
    // Tests never reach the internet: a test that downloads a mesh names its own list (SOURCES §9.7).
    env: { AGRO_SOURCE_IBGE_LOCALIDADES: 'none' },
  },
});
