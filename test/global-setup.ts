// Starts the embedded PostGIS (unless DATABASE_URL is set) and builds one migrated
// template database; every test file clones its own database from it.
import { loadConfig } from '../src/config.ts';
import { EmbeddedCluster } from '../src/db/cluster.ts';
import { prepareTemplate } from './helpers/db.ts';

export default async function setup() {
  const cfg = loadConfig();
  if (!cfg.databaseUrl) await new EmbeddedCluster(cfg).start();
  await prepareTemplate();
}
