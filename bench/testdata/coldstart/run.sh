#!/bin/bash
# What a new connection's first add costs, connect counted, and what each
# kind of schema object adds to it (docs/PERFORMANCE.md, "What bounds a new
# connection's first call"). $1: a libpq keyword/value connection string of
# a server (host=... user=...). The script migrates a database of its own
# there, copies it once per variant with one kind of object dropped, and runs
# each script with pgbench -C (a new connection per transaction), three
# rounds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
server=$1
psql="psql -qX -v ON_ERROR_STOP=1"
# The library's add is SegmentAdd of queries/segments.sql, its sqlc
# parameters replaced by literals and a new segment id each time.
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
cp "$here/noop.sql" "$here/raw.sql" "$gen/"
{
  echo '\set n random(1, 9000000000000)'
  sed -n '/^-- name: SegmentAdd /,/^-- name: /p' "$here/../../../queries/segments.sql" | grep -v '^--' | sed \
    -e "s/@topic_id::uuid/'6742701a-dc04-4785-9f35-a078fe4123c1'::uuid/g" \
    -e "s/@segment_id::uuid/lpad(to_hex(:n), 32, '0')::uuid/g" \
    -e "s/@partition::integer/0/g; s/@topic::text/'t'/g; s/@state::smallint/0::smallint/g" \
    -e "s/@max_segment_span::bigint/99/g" \
    -e "s/@start_offset::bigint/0/g; s/@end_offset::bigint/99/g; s/@max_timestamp_ms::bigint/0/g" \
    -e "s/@broker_id::integer/1/g; s/@event_timestamp_ms::bigint/0/g; s/@segment_size_bytes::integer/100/g" \
    -e "s/sqlc.narg('custom_metadata')::bytea/NULL::bytea/g; s/@txn_index_empty::boolean/true/g" \
    -e "s/@epochs::integer\[\]/'{0}'::integer[]/g; s/@epoch_first_offsets::bigint\[\]/'{0}'::bigint[]/g" \
    -e "s/@epoch_last_offsets::bigint\[\]/'{99}'::bigint[]/g"
} > "$gen/add.sql"
if grep -q '@' "$gen/add.sql"; then
  echo "queries/segments.sql's SegmentAdd has a parameter this script does not fill:" >&2
  grep -o '@[a-z_]*' "$gen/add.sql" | sort -u >&2
  exit 1
fi
$psql "$server" -c "DROP DATABASE IF EXISTS rlmm_coldstart" -c "CREATE DATABASE rlmm_coldstart"
(cd "$here/../../.." && go run ./cmd/rlmmctl --database-url "$server dbname=rlmm_coldstart" migrate up)
$psql "$server dbname=rlmm_coldstart" -c "CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g; ANALYZE bench_raw;"
declare -A variant=(
  [base]=""
  [no_fk]="ALTER TABLE rlmm_segment_epochs DROP CONSTRAINT rlmm_segment_epochs_segment_fkey;"
  [no_table_checks]="ALTER TABLE rlmm_segments DROP CONSTRAINT rlmm_segments_offsets_check, DROP CONSTRAINT rlmm_segments_versions_check, DROP CONSTRAINT rlmm_segments_epochs_check;
    ALTER TABLE rlmm_segment_epochs DROP CONSTRAINT rlmm_segment_epochs_state_check, DROP CONSTRAINT rlmm_segment_epochs_range_check;
    ALTER TABLE rlmm_partitions DROP CONSTRAINT rlmm_partitions_delete_fields_check;"
  [no_triggers]="DROP TRIGGER rlmm_segments_state_guard ON rlmm_segments; DROP TRIGGER rlmm_segment_epochs_state_guard ON rlmm_segment_epochs;
    DROP TRIGGER rlmm_partitions_delete_state_guard ON rlmm_partitions; DROP TRIGGER rlmm_segments_identity ON rlmm_segments;
    DROP TRIGGER rlmm_segment_epochs_identity ON rlmm_segment_epochs;"
  [no_secondary_indexes]="DROP INDEX rlmm_segments_changes_idx, rlmm_segments_list_idx, rlmm_segments_in_flight_idx, rlmm_segments_forgotten_idx,
    rlmm_segments_epoch_list_idx, rlmm_segments_epoch_highest_idx, rlmm_segments_epoch_ends_idx,
    rlmm_segment_epochs_ends_idx, rlmm_segment_epochs_highest_idx, rlmm_segment_epochs_list_idx,
    rlmm_partitions_topic_idx, rlmm_partitions_deleting_idx, rlmm_partitions_deleted_idx;"
)
order=(base no_fk no_table_checks no_triggers no_secondary_indexes)
for v in "${order[@]}"; do
  $psql "$server" -c "DROP DATABASE IF EXISTS rlmm_coldstart_$v" -c "CREATE DATABASE rlmm_coldstart_$v TEMPLATE rlmm_coldstart"
  [ -z "${variant[$v]}" ] || $psql "$server dbname=rlmm_coldstart_$v" -c "${variant[$v]}"
done
for round in 1 2 3; do
  for v in "${order[@]}"; do
    scripts=(add)
    [ "$v" = base ] && scripts=(noop raw add)
    for f in "${scripts[@]}"; do
      ms=$(pgbench -n -C -t 300 -f "$gen/$f.sql" "$server dbname=rlmm_coldstart_$v" 2>&1 | sed -n 's/latency average = \(.*\) ms/\1/p')
      echo "round $round, $v, $f: $ms ms"
    done
  done
done
for v in "${order[@]}"; do $psql "$server" -c "DROP DATABASE rlmm_coldstart_$v"; done
$psql "$server" -c "DROP DATABASE rlmm_coldstart"
