// TypeBox schemas shared by the routes: they validate requests, type the handlers and
// generate /v1/openapi.json. OpenAPI 3.1: "nullable" is spelled as a union with null.
import { Type, type TSchema } from 'typebox';

export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: 'machine-readable code (see Errors)', examples: ['invalid_request'] }),
      message: Type.String({ description: 'human-readable text' }),
      request_id: Type.String({ description: 'equal to the X-Request-Id header', pattern: '^req_' }),
    }),
  },
  { title: 'Error envelope' },
);

export const ErrorResponses = { '4xx': ErrorBody, '5xx': ErrorBody };

/** The Idempotency-Key header of the POST routes, for the OpenAPI document (checked and applied by src/platform/idempotency.ts). */
export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({
    description: '1 to 255 printable ASCII characters; kept 24 h per key and path: the same body (the same JSON value, members in any order) gets the stored answer (Idempotent-Replayed: true, not billed), another body 422 idempotency_key_reused, while the first runs 409 idempotency_conflict',
  })),
});

export const Position = Type.Array(Type.Number(), { minItems: 2, maxItems: 3, description: '[lon, lat]' });
const Ring = Type.Array(Position, { minItems: 4, description: 'closed linear ring' });

export const PointSchema = Type.Object({ type: Type.Literal('Point'), coordinates: Position }, { title: 'GeoJSON Point' });
export const PolygonSchema = Type.Object({ type: Type.Literal('Polygon'), coordinates: Type.Array(Ring, { minItems: 1 }) }, { title: 'GeoJSON Polygon' });
export const MultiPolygonSchema = Type.Object(
  { type: Type.Literal('MultiPolygon'), coordinates: Type.Array(Type.Array(Ring, { minItems: 1 }), { minItems: 1 }) },
  { title: 'GeoJSON MultiPolygon' },
);
export const RequestGeometry = Type.Union([PolygonSchema, MultiPolygonSchema], {
  description:
    'GeoJSON Polygon or MultiPolygon in EPSG:4326 ([lon, lat]); at most 10,000 vertices and 1,000,000 ha, ' +
    'closed rings of at least 4 positions, not self-intersecting; otherwise 422 geometry_invalid',
});
export const Bbox = Type.Array(Type.Number(), { minItems: 4, maxItems: 4, description: '[minLon, minLat, maxLon, maxLat]' });

export const Timestamp = Type.String({ format: 'date-time', description: 'UTC, YYYY-MM-DDTHH:MM:SSZ', examples: ['2026-11-23T17:00:00Z'] });
export const DateString = Type.String({ format: 'date', description: 'YYYY-MM-DD' });

/** YYYY-MM-DDTHH:MM:SSZ (no milliseconds, as the reference writes timestamps). */
export const isoSeconds = (d: Date = new Date()) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

export const round = (x: number | null | undefined, dp: number): number | null =>
  x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** dp) / 10 ** dp;
