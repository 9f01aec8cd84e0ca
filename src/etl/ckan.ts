// A CKAN dataset's resources from its package_show answer: where publishers whose resource ids
// change with every release (ZARC's seasons, CNUC's shp_cnuc_YYYY_MM) list their files. The
// pipelines pick their files from it by name, never by id.
import { readFile } from 'node:fs/promises';
import { AgroError } from '../errors.ts';
import { fetchSource, isHttp } from './download.ts';
import type { RunContext } from './pipeline.ts';

export interface CkanResource {
  name?: string | null;
  url?: string | null;
  format?: string | null;
}

/** A CKAN package_show URL (…/api/3/action/package_show?id=…). */
export const isPackageShow = (src: string | undefined): src is string => !!src && isHttp(src) && /\/api\/3\/action\/package_show\b/.test(src);

/** The resources of the package_show answer at `src` (fetched into the run's work folder). */
export async function ckanResources(ctx: RunContext, src: string): Promise<CkanResource[]> {
  const meta = await fetchSource(src, { destDir: ctx.workDir, name: 'package_show.json', userAgent: ctx.cfg.userAgent, ...ctx.cfg.download, expect: 'any', log: (m: string) => ctx.log.info(m) });
  try {
    const resources = JSON.parse(await readFile(meta!.path, 'utf8')).result.resources;
    if (!Array.isArray(resources)) throw new Error('no resources');
    return resources;
  } catch (e) {
    throw new AgroError('download_failed', `${src}: not a CKAN package_show answer (${(e as Error).message})`);
  }
}
