// From a downloaded zip to opened vector layers: extract (which validates every
// member's CRC), find every .shp (all parts of a split layer, sub-folders included),
// open each.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { extractZip } from './archive.ts';
import type { RunContext } from './pipeline.ts';
import { describeLayer } from './quality.ts';
import { stageLayers, type FieldSpec } from './stage-vector.ts';
import { findShapefiles, openLayer, type LayerDefaults, type VectorLayer } from './vector-reader.ts';

/** Extracts a zip beside its siblings in `workDir` and lists its shapefiles; a zip without one fails (no_layer). */
async function shapefilesInZip(zipPath: string, workDir: string): Promise<string[]> {
  const dir = path.join(workDir, path.basename(zipPath).replace(/\.zip$/i, ''));
  const shps = findShapefiles(await extractZip(zipPath, dir));
  if (shps.length === 0) throw new AgroError('no_layer', `${path.basename(zipPath)} holds no shapefile`);
  return shps;
}

export async function layersFromZip(zipPath: string, workDir: string, defaults: LayerDefaults): Promise<VectorLayer[]> {
  return (await shapefilesInZip(zipPath, workDir)).map((s) => openLayer(s, defaults));
}

/**
 * Whether a DBF's records are valid UTF-8 (pure ASCII counts as UTF-8). Used only when a
 * layer has no .cpg: a Latin-1 DBF read as UTF-8 would turn every accent into U+FFFD,
 * a UTF-8 DBF read as Latin-1 into mojibake that nothing detects later.
 */
export async function dbfLooksUtf8(dbf: string): Promise<boolean> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let headerLeft = -1;
  try {
    for await (const chunk of createReadStream(dbf)) {
      let buf = chunk as Buffer;
      if (headerLeft < 0) headerLeft = buf.length >= 10 ? buf.readUInt16LE(8) : 32; // header length (bytes 8–9)
      if (headerLeft > 0) {
        const skip = Math.min(headerLeft, buf.length);
        headerLeft -= skip;
        buf = buf.subarray(skip);
      }
      if (buf.length) decoder.decode(buf, { stream: true });
    }
    decoder.decode();
    return true;
  } catch {
    return false;
  }
}

export interface OpenedLayers {
  layers: VectorLayer[];
  /** Layers without a .cpg and the encoding their bytes were found to be in. */
  detected: { layer: string; encoding: string }[];
}

/**
 * Extracts a zip and opens every shapefile in it, sub-folders included. A layer without a
 * .cpg is decoded as UTF-8 when its bytes are valid UTF-8, else as ISO-8859-1.
 */
export async function openZipLayers(zipPath: string, workDir: string, srid: number): Promise<OpenedLayers> {
  const shps = await shapefilesInZip(zipPath, workDir);
  const layers: VectorLayer[] = [];
  const detected: OpenedLayers['detected'] = [];
  for (const shp of shps) {
    const base = shp.slice(0, -4);
    const hasCpg = (await Promise.all(['.cpg', '.CPG'].map((e) => stat(base + e).then(() => true, () => false)))).some(Boolean);
    let encoding = 'UTF-8';
    if (!hasCpg) {
      const dbf = ['.dbf', '.DBF'].map((e) => base + e);
      const found = (await Promise.all(dbf.map((p) => stat(p).then(() => p, () => null)))).find((p) => p !== null)!;
      encoding = (await dbfLooksUtf8(found)) ? 'UTF-8' : 'ISO-8859-1';
    }
    const layer = openLayer(shp, { srid, encoding });
    if (layer.encodingAssumed) detected.push({ layer: layer.name, encoding });
    layers.push(layer);
  }
  return { layers, detected };
}

/**
 * The read stage of a source that is one zip of shapefiles: its layers opened as
 * openZipLayers does and staged (stageLayers) into the run's staging table `table`.
 * `check` may refuse the layers before anything is staged.
 */
export async function readZipLayers(
  ctx: RunContext,
  client: pg.ClientBase,
  zipPath: string,
  fields: FieldSpec[],
  o: { table: string; srid: number; check?: (layers: VectorLayer[]) => void },
) {
  return ctx.stage(
    'read',
    async () => {
      const opened = await openZipLayers(zipPath, ctx.workDir, o.srid);
      o.check?.(opened.layers);
      const stage = ctx.stagingTable(o.table);
      const r = await stageLayers(client, stage, opened.layers, fields);
      return { ...r, ...opened, stage };
    },
    (s) => s.rows,
    (s) => ({ layers: s.layers.map(describeLayer) }),
  );
}
