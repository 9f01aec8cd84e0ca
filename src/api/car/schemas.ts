// Schemas of the car routes (reference "Registry property record", "Property summary",
// "Document lookup envelope", "Geometry query result item"; contract §3–4).
import { Type } from 'typebox';
import { Bbox, DateString, ErrorResponses, IdempotencyHeaders, Nullable, PointSchema, RequestGeometry, Timestamp } from '../schemas.ts';
import { INCLUDE_LAYERS } from './layers.ts';

export const CAR_PATTERN = '^[A-Za-z]{2}-[0-9]{7}-[0-9A-Fa-f]{32}$';

const Hectares = (description: string) => Nullable(Type.Number({ description: `${description}, hectares` }));
const Overlap = {
  area_sobreposta_ha: Nullable(Type.Number({ description: 'area of the property inside the feature, hectares (null for a point-only embargo)' })),
  percentual: Nullable(Type.Number({ minimum: 0, maximum: 1, description: 'share of the property inside the feature (0..1)' })),
};

export const UcOverlap = Type.Object({
  cnuc: Type.String({ description: 'CNUC code (cd_cnuc)' }),
  nome: Nullable(Type.String()), categoria: Nullable(Type.String()), grupo: Nullable(Type.String()), esfera: Nullable(Type.String()),
  ...Overlap,
});
const EmbargoOverlap = Type.Object({
  numero_tad: Type.String(), data_embargo: Nullable(Type.String({ format: 'date' })), situacao: Nullable(Type.String()),
  area_embargada_ha: Nullable(Type.Number()), ...Overlap,
  ativo: Nullable(Type.Boolean({ description: 'issued, not cancelled, not lifted' })),
});
const IcmbioEmbargoOverlap = Type.Object({
  id_embargo: Type.String({ description: 'num_emb, with /serie when the embargo has a series' }),
  numero_embargo: Nullable(Type.String()), serie_embargo: Nullable(Type.String()), data_embargo: Nullable(Type.String({ format: 'date' })),
  nome_uc: Nullable(Type.String({ description: 'the federal conservation unit' })), cnuc: Nullable(Type.String()),
  tipo_infracao: Nullable(Type.String()), julgamento: Nullable(Type.String({ description: 'as ICMBio writes it (the layer says nothing about lifting)' })),
  area_embargada_ha: Nullable(Type.Number({ description: 'geodesic area of the embargo polygon' })), ...Overlap,
});
const TiOverlap = Type.Object({
  codigo: Type.String({ description: 'FUNAI terrai_codigo' }), nome: Nullable(Type.String()), etnias: Nullable(Type.Array(Type.String())),
  fase: Nullable(Type.String()), modalidade: Nullable(Type.String()), ...Overlap,
});
const QuilomboOverlap = Type.Object({
  codigo: Type.String({ description: 'INCRA cd_quilomb' }), comunidade: Nullable(Type.String()), fase: Nullable(Type.String()), esfera: Nullable(Type.String()), ...Overlap,
});
export const ZarcCultura = Type.Object({
  // Codes are text (ZARC's crop codes have 14 digits); a code that did not parse is null, its text in the snapshot's extra.
  cultura: Type.String(), safra: Type.String(), ciclo: Nullable(Type.String()), solo: Nullable(Type.String()), manejo: Nullable(Type.String()), portaria: Nullable(Type.String()),
  cod_clima: Nullable(Type.String({ description: 'ZARC climate variant (Cod_Clima): rows of one crop, season, cycle, soil and management differ by it' })),
  clima: Nullable(Type.String({ description: 'name of the climate variant (Nome_Clima)' })),
  risco_20: Type.Array(Type.Integer({ minimum: 1, maximum: 36 }), { description: 'ten-day periods (1..36) at 20 % risk' }),
  risco_30: Type.Array(Type.Integer({ minimum: 1, maximum: 36 }), { description: 'ten-day periods at 30 % risk' }),
  risco_40: Type.Array(Type.Integer({ minimum: 1, maximum: 36 }), { description: 'ten-day periods at 40 % risk' }),
});
const Zarc = Nullable(Type.Object({
  geocodigo: Type.String({ description: "IBGE code of the property's municipality" }), snapshot_id: Type.Integer(), as_of: DateString,
  culturas: Type.Array(ZarcCultura),
}));

const IncludeFields = {
  embargos: Type.Optional(Nullable(Type.Array(EmbargoOverlap, { description: 'include=embargos: IBAMA embargo terms overlapping the property' }))),
  ucs: Type.Optional(Nullable(Type.Array(UcOverlap, { description: 'include=ucs: conservation units' }))),
  tis: Type.Optional(Nullable(Type.Array(TiOverlap, { description: 'include=tis: indigenous lands' }))),
  quilombos: Type.Optional(Nullable(Type.Array(QuilomboOverlap, { description: 'include=quilombos: quilombola areas' }))),
  zarc: Type.Optional(Zarc),
  embargos_icmbio: Type.Optional(Nullable(Type.Array(IcmbioEmbargoOverlap, { description: 'include=embargos_icmbio: ICMBio embargoes (inside federal conservation units) overlapping the property' }))),
};

const Geometria = Type.Optional(Type.Unknown({ description: 'with geometry=true: GeoJSON Polygon (one part) or MultiPolygon, exterior rings counter-clockwise, 7 decimals' }));
const Avisos = Type.Optional(Type.Array(Type.String(), { description: 'notes on fields that could not be filled (historical reads)' }));

export const CarRecord = Type.Object({
  car: Type.String({ description: 'registry number', pattern: '^[A-Z]{2}-[0-9]{7}-[0-9A-F]{32}$' }),
  uf: Type.String(),
  situacao: Nullable(Type.String({ enum: ['ativo', 'pendente', 'cancelado', 'suspenso'] })),
  tipo: Nullable(Type.String({ enum: ['imovel_rural', 'assentamento', 'territorio_tradicional'] })),
  area_total_ha: Hectares('area SICAR publishes (num_area)'),
  area_calculada_ha: Hectares('geodesic area of the polygon'),
  area_consolidada_ha: Hectares('AREA_CONSOLIDADA theme area (null when the theme was not loaded)'),
  reserva_legal_ha: Hectares('RESERVA_LEGAL theme area (null when the theme was not loaded)'),
  app_ha: Hectares('APPS theme area (null when the theme was not loaded)'),
  municipio: Nullable(Type.String({ description: '<municipality>/<UF>' })),
  cod_municipio_ibge: Nullable(Type.String()),
  data_inscricao: Nullable(DateString),
  embargo_ibama: Nullable(Type.Boolean({ description: 'an active IBAMA embargo overlaps the property; null while no IBAMA snapshot is available' })),
  sobreposicao_ucs: Nullable(Type.Array(UcOverlap)),
  geometria: Geometria,
  srid: Type.Literal(4326),
  centroid: Nullable(PointSchema),
  bbox: Bbox,
  consultado_em: Timestamp,
  fonte: Type.String({ description: 'source and snapshot, e.g. "SICAR/SFB MT 2026-11-15"' }),
  snapshot_id: Type.Integer(),
  as_of: DateString,
  ...IncludeFields,
  avisos: Avisos,
});

export const CarParams = Type.Object({
  numero: Type.String({ pattern: CAR_PATTERN, maxLength: 43, description: 'complete registry number <UF>-<7 digits>-<32 hex>' }),
});

const IncludeQuery = Type.Optional(Type.String({ description: `comma-separated (or the parameter repeated): ${INCLUDE_LAYERS.join(', ')}`, maxLength: 200 }));
const GeometryFlag = Type.Boolean({ default: false, description: 'include the polygon as geometria' });
const AsOf = Type.Optional(Type.String({ format: 'date', description: 'answer from the snapshot current on that date (greatest as-of ≤ date among kept snapshots)' }));

export const CarQuery = Type.Object({ include: IncludeQuery, geometry: GeometryFlag, as_of: AsOf });

export const CarSchema = {
  summary: 'Property record by CAR number',
  tags: ['car'],
  params: CarParams,
  querystring: CarQuery,
  response: { 200: CarRecord, ...ErrorResponses },
};

// ---- by document -----------------------------------------------------------------

export const LGPD_BASES = [
  'consentimento', 'obrigacao_legal', 'politicas_publicas', 'estudos_pesquisa', 'execucao_contrato',
  'exercicio_direitos', 'protecao_vida', 'tutela_saude', 'legitimo_interesse', 'protecao_credito',
] as const;

export const CarSummary = Type.Object({
  car: Type.String(), uf: Type.String(),
  situacao: Nullable(Type.String()), tipo: Nullable(Type.String()), municipio: Nullable(Type.String()),
  area_total_ha: Hectares('area SICAR publishes'), area_calculada_ha: Hectares('geodesic area'),
  data_inscricao: Nullable(DateString), embargo_ibama: Nullable(Type.Boolean()),
  srid: Type.Literal(4326), centroid: Nullable(PointSchema), bbox: Bbox, geometria: Geometria,
  vinculo: Nullable(Type.String({ description: 'proprietario | possuidor (null for an inferred link)' })),
  origem: Type.String({ enum: ['declarado', 'inferido'] }),
  evidencia: Nullable(Type.Object({
    fonte: Type.String({ description: "'extrato do operador' (declared) or 'embargo IBAMA' (inferred)" }),
  }, {
    additionalProperties: true,
    description: 'why the link exists (contract §3): an inferred link names its embargo term (numero_tad, data_embargo, area_sobreposta_ha, percentual, confianca alta|media|baixa)',
  })),
  snapshot_id: Type.Integer(), fonte: Type.String(),
  ...IncludeFields,
});

export const DocumentEnvelope = Type.Object({
  documento: Type.String({ description: 'the queried document, CPF masked (***.456.789-**), CNPJ formatted' }),
  tipo_documento: Type.String({ enum: ['cpf', 'cnpj'] }),
  titular: Nullable(Type.String({ description: 'holder name: for a CNPJ, Receita\'s legal name (razao_social) of the month read when it has the CNPJ, else the declared or inferred link\'s name' })),
  results: Type.Array(CarSummary),
  count: Type.Integer({ description: 'items in results' }),
  area_total_ha: Type.Number({ description: 'sum of area_total_ha of the returned properties' }),
  next_cursor: Nullable(Type.String()),
  consultado_em: Timestamp,
  snapshots: Type.Record(Type.String(), Type.Integer(), { description: 'snapshot ids read (sicar:<UF>, car-titulares, ibama-embargos, …)' }),
  avisos: Avisos,
});

export const ByDocumentSchema = {
  summary: 'Properties of an owner or possessor (CPF or CNPJ)',
  tags: ['car'],
  params: Type.Object({ documento: Type.String({ maxLength: 32, description: 'CPF (11 digits) or CNPJ (14 characters); punctuation optional' }) }),
  querystring: Type.Object({
    uf: Type.Optional(Type.String({ pattern: '^[A-Za-z]{2}$' })),
    situacao: Type.Optional(Type.String({ enum: ['ativo', 'pendente', 'cancelado', 'suspenso'] })),
    include: IncludeQuery,
    geometry: GeometryFlag,
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 25 }),
    cursor: Type.Optional(Type.String({ maxLength: 4096 })),
    as_of: AsOf,
  }),
  headers: Type.Object({
    'x-lgpd-base-legal': Type.Optional(Type.String({ enum: [...LGPD_BASES], description: 'legal basis (LGPD art. 7); recommended for CPF queries' })),
  }),
  response: { 200: DocumentEnvelope, ...ErrorResponses },
};

// ---- by geometry -------------------------------------------------------------------

export const GeometryHitSchema = Type.Object({
  car: Type.String(), uf: Type.String(), municipio: Nullable(Type.String()), situacao: Nullable(Type.String()),
  overlap_ratio: Type.Number({ minimum: 0, maximum: 1, description: 'area(property ∩ query) / area(property)' }),
  overlap_ha: Type.Number({ description: 'area(property ∩ query), hectares' }),
  area_ha: Hectares('area of the property (SICAR num_area)'),
  area_calculada_ha: Hectares('geodesic area of the property'),
  snapshot_id: Type.Integer(),
});

export const ByGeometrySchema = {
  summary: 'Properties intersecting a polygon, by overlap share',
  tags: ['car'],
  body: Type.Object({
    geometry: RequestGeometry,
    min_overlap: Type.Number({ minimum: 0, maximum: 1, default: 0, description: 'minimum overlap_ratio' }),
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
  }, { additionalProperties: false }),
  headers: IdempotencyHeaders,
  response: {
    200: Type.Object({
      results: Type.Array(GeometryHitSchema), count: Type.Integer(), area_consulta_ha: Type.Number({ description: 'area of the query polygon, hectares' }),
      consultado_em: Timestamp,
    }),
    ...ErrorResponses,
  },
};
