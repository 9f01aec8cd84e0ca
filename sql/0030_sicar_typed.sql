-- SICAR's typed pass (sql/queries/sicar_typed_*.sql): why a staged row of AREA_IMOVEL or of a
-- theme is kept or not, in priority order, once for both. The Brazil envelope is in degrees:
-- a projected layer (UTM, Web Mercator) is checked after transforming; SIRGAS 2000 and
-- WGS 84 coordinates are checked as they are. A plain SQL expression: inlined by the planner.
CREATE FUNCTION etl.sicar_verdict(car text, uf text, geom geometry, srid integer, repair text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN NOT etl.car_number_ok(car) THEN 'bad_car_number'
    WHEN left(car, 2) <> uf THEN 'other_state'
    WHEN geom IS NULL THEN 'no_geometry'
    WHEN repair = 'rejected' THEN 'geometry_unrepairable'
    WHEN repair = 'empty' THEN 'geometry_empty_after_repair'
    WHEN NOT etl.in_brazil(CASE WHEN srid IN (4326, 4674) THEN geom ELSE ST_Transform(ST_SetSRID(geom, srid), 4326) END) THEN 'outside_brazil'
    ELSE 'ok' END
$$;

-- A kept row's geometry as the snapshots hold it: MultiPolygon in EPSG:4326.
CREATE FUNCTION etl.sicar_geom(geom geometry, srid integer) RETURNS geometry
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT ST_Multi(ST_Transform(ST_SetSRID(geom, srid), 4326))
$$;
