// From a downloaded zip to opened vector layers: extract (which validates every
// member's CRC), find every .shp (all parts of a split layer), open each.
import path from 'node:path';
import { AgroError } from '../errors.ts';
import { extractZip } from './archive.ts';
import { findShapefiles, openLayer, type LayerDefaults, type VectorLayer } from './vector-reader.ts';

export async function layersFromZip(zipPath: string, workDir: string, defaults: LayerDefaults): Promise<VectorLayer[]> {
  const dir = path.join(workDir, path.basename(zipPath).replace(/\.zip$/i, ''));
  const files = await extractZip(zipPath, dir);
  const shps = findShapefiles(files);
  if (shps.length === 0) throw new AgroError('no_layer', `${path.basename(zipPath)} holds no shapefile`);
  return shps.map((s) => openLayer(s, defaults));
}
