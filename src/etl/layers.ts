// From a downloaded zip to opened vector layers: extract only the members a layer needs
// (shapefile parts, and zips inside the zip when the source nests them), each member
// inflated once, bounded and CRC-checked (archive.ts; the download step inflated nothing);
// find every .shp (all parts of a split layer, sub-folders included); open each with the
// engine's encoding and CRS rules (vector-reader.ts), whatever the pipeline.
// The .shp members (most of a layer's bytes after the .dbf) are not extracted: the
// streaming reader inflates them straight from the zip into the COPY (stageLayers,
// read/shp-stream.ts), once, on the archive's same budget. The small parts and the .dbf
// are extracted first, because the encoding rule may have to see every DBF byte before one
// is decoded. Only when a layer of the zip is one the streaming reader cannot read (GDAL
// reads them all then) are the .shp members extracted too, as before.
import { copyFile, link, mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AgroError } from '../errors.ts';
import { extractMembers, readHead, zipBudget, type ZipBudget, type ZipLimits } from './archive.ts';
import { readingStored } from './download.ts';
import { layerPart, PART_EXTS } from './layer-parts.ts';
import { canStream, canStreamHeader, fileSources, shxInFileOrder } from './read/shp-stream.ts';
import type { LayerStageResult } from './stage-vector.ts';
import { findShapefiles, openLayer, type VectorLayer } from './vector-reader.ts';

/** Sidecars a shapefile layer is read with; anything else in an archive is never inflated. */
const isLayerPart = (name: string) => (PART_EXTS as readonly string[]).includes(path.extname(name).toLowerCase());
const SHP = /\.shp$/i;

export interface ZipLayerOptions {
  /** SRID assumed for a layer without a .prj. */
  srid: number;
  limits: ZipLimits;
  /** Levels of zips inside the zip that are searched too (1: the zip alone). */
  maxDepth?: number;
}

/** A .shp left in its zip: the zip file holding it (the stored one or one extracted from it), its entry, the folder the zip's parts went to. */
interface LeftShp {
  zip: string;
  entry: string;
  into: string;
}

interface ZipShapefiles {
  /** Every .shp, as the path it has (extracted) or would have (left in its zip). */
  shps: string[];
  /** The .shp members left in their zip, by that path. */
  left: Map<string, LeftShp>;
}

/**
 * The shapefiles in a zip (and in zips inside it, up to maxDepth levels), every part but
 * the .shp extracted; a zip without one fails (no_layer). One budget for the zip, every zip
 * inside it and the .shp members streamed later, so that neither nesting nor streaming can
 * multiply the bound.
 */
async function shapefilesInZip(zipPath: string, workDir: string, o: ZipLayerOptions, budget: ZipBudget): Promise<ZipShapefiles> {
  const maxDepth = o.maxDepth ?? 1;
  const files: string[] = [];
  const left = new Map<string, LeftShp>();
  const visit = async (zip: string, into: string, depth: number) => {
    const nested = depth < maxDepth;
    const only = (name: string) => isLayerPart(name) || (nested && /\.zip$/i.test(name));
    // A damaged stored zip must not be answered from the store again (download.ts).
    const got = await readingStored(zipPath, () => extractMembers(zip, into, { limits: o.limits, budget, only, leave: (n) => SHP.test(n) }));
    files.push(...got.written);
    for (const m of got.left) {
      files.push(m.target);
      left.set(m.target, { zip: path.resolve(zip), entry: m.name, into });
    }
    if (!nested) return;
    const inner = got.written.filter((f) => /\.zip$/i.test(f)).sort();
    for (let i = 0; i < inner.length; i++) await visit(inner[i], `${into}.z${i}`, depth + 1);
  };
  await visit(zipPath, path.join(workDir, path.basename(zipPath).replace(/\.zip$/i, '')), 1);
  const shps = findShapefiles(files);
  if (shps.length === 0) throw new AgroError('no_layer', `${path.basename(zipPath)} holds no shapefile`);
  return { shps, left };
}

/**
 * Every layer of a zip, opened (encoding and CRS decided by the engine's rules) for the
 * streaming reader, which reads each .shp straight from the zip. When one of them is a
 * layer it cannot read, the .shp members are extracted and GDAL reads them all.
 */
export async function layersFromZip(zipPath: string, workDir: string, o: ZipLayerOptions): Promise<VectorLayer[]> {
  const budget = zipBudget(o.limits);
  const { shps, left } = await shapefilesInZip(zipPath, workDir, o, budget);
  const opened: VectorLayer[] = [];
  for (const shp of shps) {
    const inZip = left.get(shp);
    if (!inZip) {
      opened.push(openForStreaming(shp, o.srid));
      continue;
    }
    const { layer, shx } = await openLeftInZip(shp, o.srid);
    const zipped = { zip: inZip.zip, entry: inZip.entry, stored: zipPath, budget, dbf: (fileSources(shp).dbf as { file: string }).file };
    const streams = canStreamHeader(shx, layer.encoding) && shxInFileOrder(shp);
    opened.push({ ...layer, file: `/vsizip/${inZip.zip}/${inZip.entry}`, reader: streams ? 'shp-stream' : 'gdal', zipped });
  }
  if (opened.every((l) => l.reader === 'shp-stream')) return opened;
  // GDAL reads the layers from disk: the .shp members left in their zips are extracted now (still inflated once).
  for (const zip of new Set([...left.values()].map((l) => l.zip))) {
    const members = [...left.values()].filter((l) => l.zip === zip);
    const names = new Set(members.map((m) => m.entry));
    await readingStored(zipPath, () => extractMembers(zip, members[0].into, { limits: o.limits, budget, only: (n) => names.has(n) }));
  }
  return opened.map(({ zipped, ...l }, i) => (zipped ? { ...l, file: shps[i], reader: canStream(shps[i], l.encoding) && shxInFileOrder(shps[i]) ? 'shp-stream' : 'gdal' } : l));
}

/** One extracted shapefile, opened with the engine's rules; the streaming reader stages it when it can (else GDAL). */
export function openForStreaming(shp: string, srid: number): VectorLayer {
  const layer = openLayer(shp, { srid });
  return { ...layer, reader: canStream(shp, layer.encoding) && shxInFileOrder(shp) ? 'shp-stream' : 'gdal' };
}

/**
 * GDAL's view of a layer whose .shp is still in its zip (name, fields, feature count, CRS,
 * encoding rule): GDAL opens a stand-in .shp, the .shx's 100-byte header (the two files
 * share it: shape type, bounding box), beside the layer's extracted parts (hard links) in a
 * folder of its own, removed afterwards. Opening a shapefile reads nothing of the .shp but
 * its header (the feature count is the .shx's), so the layer is described exactly as if
 * its .shp had been extracted, and nothing is inflated. Returns the .shx header too.
 */
async function openLeftInZip(shp: string, srid: number): Promise<{ layer: VectorLayer; shx: Buffer }> {
  const dir = await mkdtemp(path.join(path.dirname(shp), '.open-'));
  try {
    // every part under its lower-case extension, as GDAL finds it (layer-parts.ts)
    const base = path.join(dir, path.basename(shp, path.extname(shp)));
    const standIn = `${base}.shp`;
    let shx: Buffer | null = null;
    for (const ext of PART_EXTS) {
      const part = ext === '.shp' ? null : layerPart(shp, ext);
      if (!part) continue;
      await link(part, base + ext).catch(() => copyFile(part, base + ext));
      if (ext === '.shx') shx = await readHead(part, 100);
    }
    const head = Buffer.from(shx ?? Buffer.alloc(0));
    if (head.length >= 28) head.writeInt32BE(50, 24); // file length in 16-bit words: the header alone
    await writeFile(standIn, head);
    const layer = openLayer(standIn, { srid });
    return { layer: { ...layer, file: shp }, shx: head };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The report's note on which reader staged the rows (stage-vector.ts). */
export function readerNote(r: Pick<LayerStageResult, 'reader' | 'deleted' | 'unparsed'> & { ringsClosed?: number; shapesWithoutRecord?: number }): string {
  const closed = r.ringsClosed ? `${r.ringsClosed} polygon ring(s) not closed in the .shp, closed on reading (then repaired like any invalid polygon)` : '';
  const orphans = r.shapesWithoutRecord ? `${r.shapesWithoutRecord} shape(s) after the .dbf's last record (no attributes: the .dbf is shorter than the .shp), not loaded` : '';
  const deleted = r.deleted ? `${r.deleted} deleted DBF record(s) skipped` : '';
  const extra = [deleted, r.unparsed ? `${r.unparsed} numeric/date value(s) that were not numbers/dates, kept as written` : '', closed, orphans].filter(Boolean);
  const how = r.reader === 'gdal' ? 'read with GDAL, one feature at a time (text COPY)' : 'read with the streaming shapefile reader (binary COPY)';
  return `${how}${extra.length ? `: ${extra.join('; ')}` : ''}`;
}

/** Report notes on how each layer's encoding was decided, when no sidecar declared it. */
export function encodingNotes(layers: VectorLayer[]): string[] {
  const notes: string[] = [];
  for (const l of layers) {
    if (l.encodingIgnored) notes.push(`${l.name}: ${l.encodingIgnored}`);
    if (!l.encodingAssumed) continue;
    // a sidecar passed over (unreadable, or overruled by the bytes) was named just above
    const without = l.encodingPassedOver ? `${l.name}:` : `${l.name} has no .cpg or .cst${l.encodingDecidedBy === 'default' ? ' and' : ':'}`;
    notes.push(
      l.encodingDecidedBy === 'default'
        ? `${without} its text is plain ASCII: read as ${l.encoding}`
        : `${without} its DBF read as ${l.encoding} (decided by the ${l.encodingDecidedBy === 'ldid' ? 'language driver byte' : 'bytes'})`,
    );
  }
  return notes;
}
