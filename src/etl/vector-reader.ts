// Reads shapefile layers with GDAL (gdal-async, synchronous API: one native call per
// feature, no thread hop) and hands out attributes plus ISO WKB geometry.
// Encoding comes from the .cpg (GDAL honours it); without one the DBF is decoded as
// the pipeline's default (latin1 for SICAR). CRS comes from the .prj; without one the
// pipeline's default (EPSG:4674) is assumed and the assumption is reported.
import fs from 'node:fs';
import path from 'node:path';
import gdal from 'gdal-async';
import { AgroError } from '../errors.ts';

export interface LayerField {
  name: string;
  type: string;
}

export interface VectorLayer {
  file: string;
  /** Layer file name without extension, e.g. GO_AREA_IMOVEL_1. */
  name: string;
  srid: number;
  sridAssumed: boolean;
  encoding: string;
  encodingAssumed: boolean;
  fields: LayerField[];
  featureCount: number;
}

export interface LayerDefaults {
  srid: number;
  /** GDAL encoding name used when no .cpg exists, e.g. 'ISO-8859-1'. */
  encoding: string;
}

export interface RawFeature {
  /** Attribute values keyed by lower-cased source field name. */
  props: Record<string, unknown>;
  wkb: Buffer | null;
}

const sibling = (shp: string, ext: string) => {
  const base = shp.slice(0, -4);
  return [ext, ext.toUpperCase()].map((e) => base + e).find((p) => fs.existsSync(p)) ?? null;
};

/** Every .shp among `files` (all parts of a split layer), with its sidecars checked. */
export function findShapefiles(files: string[]): string[] {
  const shps = files.filter((f) => f.toLowerCase().endsWith('.shp')).sort();
  for (const shp of shps) {
    for (const ext of ['.shx', '.dbf']) {
      if (!sibling(shp, ext)) throw new AgroError('missing_layer_part', `${path.basename(shp)} has no ${ext} file`, { file: path.basename(shp), part: ext });
    }
  }
  return shps;
}

function withEncoding<T>(encoding: string | null, fn: () => T): T {
  const before = gdal.config.get('SHAPE_ENCODING');
  if (encoding) gdal.config.set('SHAPE_ENCODING', encoding);
  try {
    return fn();
  } finally {
    gdal.config.set('SHAPE_ENCODING', before ?? null);
  }
}

function identifySrid(srs: gdal.SpatialReference | null, file: string): number | null {
  if (!srs) return null;
  try {
    srs.autoIdentifyEPSG();
  } catch {
    /* falls through to the authority lookup below */
  }
  const code = srs.getAuthorityCode(null as unknown as string) ?? srs.getAuthorityCode('GEOGCS');
  if (!code) throw new AgroError('malformed_source', `cannot identify the CRS in the .prj of ${path.basename(file)}`);
  return Number(code);
}

export function openLayer(shp: string, defaults: LayerDefaults): VectorLayer {
  const cpg = sibling(shp, '.cpg');
  const prj = sibling(shp, '.prj');
  const encoding = cpg ? fs.readFileSync(cpg, 'utf8').trim() : defaults.encoding;
  return withEncoding(cpg ? null : defaults.encoding, () => {
    let ds: gdal.Dataset;
    try {
      ds = gdal.open(shp);
    } catch (e) {
      throw new AgroError('malformed_source', `${path.basename(shp)}: ${(e as Error).message}`);
    }
    try {
      const layer = ds.layers.get(0);
      const srid = prj ? identifySrid(layer.srs, shp) : null;
      return {
        file: shp,
        name: path.basename(shp).slice(0, -4),
        srid: srid ?? defaults.srid,
        sridAssumed: srid === null,
        encoding,
        encodingAssumed: !cpg,
        fields: layer.fields.map((f) => ({ name: f.name.toLowerCase(), type: f.type })),
        featureCount: layer.features.count(),
      };
    } finally {
      ds.close();
    }
  });
}

/** Streams a layer's features; the dataset stays open only while iterating. */
export function* readFeatures(layer: VectorLayer): Generator<RawFeature> {
  const ds = withEncoding(layer.encodingAssumed ? layer.encoding : null, () => gdal.open(layer.file));
  try {
    const lyr = ds.layers.get(0);
    const names = lyr.fields.map((f) => f.name.toLowerCase());
    // first() rewinds the layer and returns feature 1; next() continues from there.
    for (let f = lyr.features.first(); f; f = lyr.features.next()) {
      const values = f.fields.toArray();
      const props: Record<string, unknown> = {};
      for (let i = 0; i < names.length; i++) props[names[i]] = values[i];
      const g = f.getGeometry();
      yield { props, wkb: g && !g.isEmpty() ? g.toWKB() : null };
    }
  } finally {
    ds.close();
  }
}
