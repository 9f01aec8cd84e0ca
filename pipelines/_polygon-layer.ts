// A national polygon layer published as one zip holding one shapefile (FUNAI indigenous
// lands, CNUC conservation units, INCRA quilombola areas): the parts of the shape these
// three share. The zip may nest its shapefile in sub-folders or inner zips; there is no
// .prj-less CRS but SIRGAS 2000; polygons are repaired row by row; rows are keyed by
// `codigo`, and among copies of a key the latest update wins (then the one read last),
// the others dropped by design (queries/layer_classify.sql).
import type { LoadStep, ShapeSpec } from '../src/etl/shape.ts';
import { classifyPolygons } from '../src/etl/sql/polygon-layer.ts';
import { sqlText, type Sql } from '../src/sql.ts';

export interface PolygonKey {
  /** The key as SQL over the staged row `s`; a NULL key rejects the row ('no_key'). */
  key: string;
  /** The row's update date as SQL over `s`; without it the copy read last wins. */
  newest?: string;
  /** Creates a stable fallback key table (src_seq, codigo, origem) for rows whose own key is missing; joined as `k`. */
  fallbackKeys?: (step: LoadStep) => Promise<Sql>;
}

/** The polygon-layer parts of a ShapeSpec: reading, repair, classify by key, duplicates dropped. */
export function polygonLayer(k: PolygonKey): Pick<ShapeSpec, 'read' | 'repairPolygons' | 'classify' | 'dropped'> {
  return {
    read: { srid: 4674, maxDepth: 3 },
    repairPolygons: true,
    dropped: ['duplicate_key'],
    async classify(step) {
      // An overflowed key ('**********') is no key; a declared fallback then gives a stable one.
      let key = `CASE WHEN NOT etl.is_overflow(${k.key}) THEN ${k.key} END`;
      let keyJoin = '';
      if (k.fallbackKeys) {
        const keys = await k.fallbackKeys(step);
        key = `coalesce(${key}, k.codigo)`;
        keyJoin = `LEFT JOIN ${keys} k ON k.src_seq = s.src_seq`;
      }
      const { t } = step;
      await classifyPolygons(step.client, {
        classified: t.classified, stage: t.stage, fix: t.fix,
        key: sqlText(key), newest: sqlText(k.newest ?? 'NULL::date'), keyJoin: sqlText(keyJoin),
      });
    },
  };
}
