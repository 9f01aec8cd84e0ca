// From a downloaded zip to opened vector layers: extract only the members a layer needs
// (shapefile parts, and zips inside the zip when the source nests them), each member
// inflated once, bounded and CRC-checked (archive.ts; the download step inflated nothing);
// find every .shp (all parts of a split layer, sub-folders included); open each with the
// engine's encoding and CRS rules (vector-reader.ts), whatever the pipeline. The layers are
// opened for the streaming reader (stageLayers reads their .shp and .dbf without GDAL).
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { AgroError } from '../errors.ts';
import { extractZip, type ZipLimits } from './archive.ts';
import { readingStored } from './download.ts';
import { canStream } from './read/shp-stream.ts';
import type { LayerStageResult } from './stage-vector.ts';
import { findShapefiles, openLayer, type VectorLayer } from './vector-reader.ts';

/** Sidecars a shapefile layer is read with; anything else in an archive is never inflated. */
const LAYER_PART = /\.(shp|shx|dbf|prj|cpg|cst)$/i;

export interface ZipLayerOptions {
  /** SRID assumed for a layer without a .prj. */
  srid: number;
  limits: ZipLimits;
  /** Levels of zips inside the zip that are searched too (1: the zip alone). */
  maxDepth?: number;
}

/** The shapefiles in a zip (and in zips inside it, up to maxDepth levels); a zip without one fails (no_layer). */
async function shapefilesInZip(zipPath: string, workDir: string, o: ZipLayerOptions): Promise<string[]> {
  const maxDepth = o.maxDepth ?? 1;
  const shps: string[] = [];
  // One budget for the zip and every zip inside it, so nesting cannot multiply the bound.
  let left = o.limits.maxBytes;
  const visit = async (zip: string, into: string, depth: number) => {
    const nested = depth < maxDepth;
    const only = (name: string) => LAYER_PART.test(name) || (nested && /\.zip$/i.test(name));
    // A damaged stored zip must not be answered from the store again (download.ts).
    const files = await readingStored(zipPath, () => extractZip(zip, into, { limits: { ...o.limits, maxBytes: left }, only }));
    for (const f of files) left -= (await stat(f)).size;
    shps.push(...findShapefiles(files));
    if (!nested) return;
    const inner = files.filter((f) => /\.zip$/i.test(f)).sort();
    for (let i = 0; i < inner.length; i++) await visit(inner[i], `${into}.z${i}`, depth + 1);
  };
  await visit(zipPath, path.join(workDir, path.basename(zipPath).replace(/\.zip$/i, '')), 1);
  if (shps.length === 0) throw new AgroError('no_layer', `${path.basename(zipPath)} holds no shapefile`);
  return shps.sort();
}

/** Every layer of a zip, opened (encoding and CRS decided by the engine's rules) for the streaming reader. */
export async function layersFromZip(zipPath: string, workDir: string, o: ZipLayerOptions): Promise<VectorLayer[]> {
  return (await shapefilesInZip(zipPath, workDir, o)).map((s) => openForStreaming(s, o.srid));
}

/** One extracted shapefile, opened with the engine's rules; the streaming reader stages it when it can (else GDAL). */
export function openForStreaming(shp: string, srid: number): VectorLayer {
  const layer = openLayer(shp, { srid });
  return { ...layer, reader: canStream(shp, layer.encoding) ? 'shp-stream' : 'gdal' };
}

/** The report's note on which reader staged the rows (stage-vector.ts). */
export function readerNote(r: Pick<LayerStageResult, 'reader' | 'deleted' | 'unparsed'>): string {
  if (r.reader === 'gdal') return 'read with GDAL, one feature at a time (text COPY)';
  const extra = [r.deleted ? `${r.deleted} deleted DBF record(s) skipped` : '', r.unparsed ? `${r.unparsed} numeric/date value(s) that were not numbers/dates, kept as written` : ''].filter(Boolean);
  return `read with the streaming shapefile reader (binary COPY)${extra.length ? `: ${extra.join('; ')}` : ''}`;
}

/** Report notes on how each layer's encoding was decided, when no sidecar declared it. */
export function encodingNotes(layers: VectorLayer[]): string[] {
  const notes: string[] = [];
  for (const l of layers) {
    if (l.encodingIgnored) notes.push(`${l.name}: ${l.encodingIgnored}`);
    if (!l.encodingAssumed) continue;
    notes.push(
      l.encodingDecidedBy === 'default'
        ? `${l.name} has no .cpg or .cst and its text is plain ASCII: read as ${l.encoding}`
        : `${l.name} has no .cpg or .cst: its DBF read as ${l.encoding} (decided by the ${l.encodingDecidedBy === 'ldid' ? 'language driver byte' : 'bytes'})`,
    );
  }
  return notes;
}
